package backends

import (
	"strings"
	"testing"
)

func TestTokenCompare(t *testing.T) {
	tests := []struct {
		a, b Token
		want int
	}{
		{"", "", 0},
		{"", "1", -1},
		{"1", "", 1},
		{"9", "10", -1},
		{"48213", "48213", 0},
		{"100000000000000000001", "99999999999999999999", 1},
	}
	for _, tt := range tests {
		got, err := tt.a.Compare(tt.b)
		if err != nil || got != tt.want {
			t.Errorf("Token(%q).Compare(%q) = %d, %v; want %d", tt.a, tt.b, got, err, tt.want)
		}
	}
	if _, err := Token("01").Compare("1"); err == nil {
		t.Error("a token with a leading zero compared without error")
	}
}

func TestParseToken(t *testing.T) {
	for _, bad := range []string{"", "0", "01", "-1", "1.5", "abc", " 1"} {
		if _, err := ParseToken(bad); err == nil || !strings.Contains(err.Error(), "parsing fencing token") {
			t.Errorf("ParseToken(%q) = %v, want an error naming the token", bad, err)
		}
	}
	for _, good := range []string{"1", "48213", "12345678901234567890123"} {
		tok, err := ParseToken(good)
		if err != nil || tok.String() != good {
			t.Errorf("ParseToken(%q) = %q, %v", good, tok, err)
		}
	}
}

func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"1", "0", "01", "48213", "", "-5", "1e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			return
		}
		// A parsed token round-trips and equals itself.
		if tok.String() != s {
			t.Fatalf("round trip %q -> %q", s, tok)
		}
		same := tok
		if c, err := tok.Compare(same); err != nil || c != 0 {
			t.Fatalf("%q.Compare(itself) = %d, %v", s, c, err)
		}
	})
}
