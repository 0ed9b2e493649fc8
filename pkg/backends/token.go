package backends

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// Token is the fencing token of a grant: the resourceVersion of the write
// that granted the key. Kubernetes orders the resourceVersions of one resource
// by write (KEP-5504, Kubernetes 1.35 and later), so every grant of a key
// carries a token greater than every earlier grant's, also after the record
// was deleted and created again.
//
// Within one grant the reported token may rise when something other than the
// protocol writes the record's object (the annotation backend's claimed
// object is written by its operator all the time); it never reaches the token
// of the next grant. The zero Token means "no grant".
type Token string

// ParseToken parses the string form of a token, as handed to an external
// system by [Token.String]. The error names the bad value.
func ParseToken(s string) (Token, error) {
	if _, err := resourceversion.CompareResourceVersion(s, s); err != nil {
		return "", fmt.Errorf("parsing fencing token %q: %w", s, err)
	}
	return Token(s), nil
}

// String returns the token's wire form: a decimal integer without leading
// zeros.
func (t Token) String() string { return string(t) }

// IsZero reports whether t is the zero Token.
func (t Token) IsZero() bool { return t == "" }

// Compare returns -1, 0 or +1 as t is older than, the same as, or newer than
// other. The zero Token is older than every other token. A malformed token is
// an error; tokens from different keys compare but mean nothing together.
func (t Token) Compare(other Token) (int, error) {
	switch {
	case t.IsZero() && other.IsZero():
		return 0, nil
	case t.IsZero():
		return -1, nil
	case other.IsZero():
		return 1, nil
	}
	c, err := resourceversion.CompareResourceVersion(string(t), string(other))
	if err != nil {
		return 0, fmt.Errorf("comparing fencing tokens %q and %q: %w", t, other, err)
	}
	return c, nil
}
