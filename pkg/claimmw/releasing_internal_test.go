package claimmw

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReleasingMessagesNameExactlyTheKeysTheyWereWrittenFor pins the
// message of a condition that says which keys an object acts for while it is
// told to release their records: read back, it names exactly the keys it
// was written for (sorted, once each), whatever characters they hold; a
// message it did not write names none, and keys that would not show whole
// are not written that way at all.
func TestReleasingMessagesNameExactlyTheKeysTheyWereWrittenFor(t *testing.T) {
	const prefix = `Holds key "k"` + releasingClaims
	tests := []struct {
		name  string
		keys  []string
		wrote bool
		read  []string
	}{
		{"given one key then it reads back", []string{"a"}, true, []string{"a"}},
		{"given keys out of order and twice then it reads them back sorted, once each", []string{"b", "a", "b"}, true, []string{"a", "b"}},
		{"given keys with quotes, commas and the separator then it reads them back", []string{`x", "y`, "p, q.", prefix}, true, []string{prefix, "p, q.", `x", "y`}},
		{"given no key then it is not written", nil, false, nil},
		{"given keys too long to show whole then it is not written", []string{strings.Repeat("a", 2100), strings.Repeat("b", 2100)}, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, ok := releasingMessage(prefix, tt.keys)
			if ok != tt.wrote {
				t.Fatalf("releasingMessage wrote %v, want %v (%q)", ok, tt.wrote, msg)
			}
			if !ok {
				return
			}
			got, ok := releasingKeysOf(msg, prefix)
			if !ok {
				t.Fatalf("releasingKeysOf(%q) read nothing", msg)
			}
			if diff := cmp.Diff(tt.read, got); diff != "" {
				t.Errorf("keys read back (-want +got):\n%s", diff)
			}
		})
	}
	for _, msg := range []string{
		`Holds key "k".`,
		prefix,
		prefix + `"a"`,
		prefix + `"a" "b".`,
		prefix + `a.`,
		`Other` + releasingClaims + `"a".`,
	} {
		if keys, ok := releasingKeysOf(msg, prefix); ok {
			t.Errorf("releasingKeysOf(%q) = %q, want nothing: the message was not written by releasingMessage", msg, keys)
		}
	}
}
