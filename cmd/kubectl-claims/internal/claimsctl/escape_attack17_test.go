package claimsctl

import (
	"bytes"
	"strings"
	"testing"
)

// Issue 17 items 7 and 8: the plugin escapes what would "make one name look
// like another (a right-to-left override, a zero-width space)". Go calls the
// zero-width, invisible variation selectors and the combining grapheme joiner
// printable (category Mn), and ValidateKey accepts them in keys (see
// pkg/claim TestValidateKeyRefusesZeroWidthMarks), so two keys that
// are two claims print identically in `kubectl claims list`.
func TestAttack17_ZeroWidthMarksAreShownEscaped(t *testing.T) {
	for _, mark := range []string{"\uFE00", "\u034F", "\u180B", "\U000E0100"} {
		// Given a record whose key carries a zero-width mark, beside one without
		key := "pg.data.svc/d" + mark + "b"
		// When it is printed in a table
		var b bytes.Buffer
		if err := (table{header: []string{"KEY"}, rows: [][]string{{"pg.data.svc/db"}, {key}}}).write(&b, ""); err != nil {
			t.Fatal(err)
		}
		// Then the two rows differ visibly (the mark is escaped)
		lines := strings.Split(strings.TrimSpace(b.String()), "\n")
		if strings.Contains(lines[2], mark) {
			t.Errorf("mark %+q printed raw: %q and %q look the same on a terminal", mark, lines[1], lines[2])
		}
	}
}

// TestAttack17_YAMLAndJSONEscapeTerminalSequencesInEveryField: regression.
// A condition message with an OSC sequence and a newline in -o yaml and
// -o json carries no raw ESC.
func TestAttack17_YAMLAndJSONEscapeTerminalSequencesInEveryField(t *testing.T) {
	in := structured{Key: "k", Items: []string{"line1\n\x1b]0;pwned\x07line2"}, Nested: map[string]string{"message": "a\n\u202eb"}}
	for _, format := range []string{outputJSON, outputYAML} {
		var b bytes.Buffer
		if err := writeStructured(&b, format, in); err != nil {
			t.Fatal(err)
		}
		if strings.ContainsAny(b.String(), "\x1b\x07\u202e") {
			t.Errorf("%s output carries a raw control or format character:\n%q", format, b.String())
		}
	}
}
