package claim_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ocf-claim/claim/pkg/claim"
)

// Issue 17 item 6: keys carrying URL user info are refused by ValidateKey,
// with an error that does not echo the password. ValidateKey finds user info
// as an '@' in the run of RFC 3986 authority characters after "://"; a
// password holding '/', '?', '#' or a space (common in generated passwords,
// and which the example's own normalizer says passwords may hold) ends that
// run before the '@', and a network-path reference ("//user:pw@host") has no
// "://" at all. The key is then stored in clear on the record.
func TestAttack17_ValidateKeyRefusesHiddenUserinfo(t *testing.T) {
	for _, key := range []string{
		"postgres://admin:hunter2/x@db.data.svc:5432/app",
		"postgres://admin:hunter2?x@db.data.svc:5432/app",
		"postgres://admin:hunter2#x@db.data.svc:5432/app",
		"postgres://admin:hunter 2@db.data.svc:5432/app",
		"//admin:hunter2@db.data.svc:5432/app",
	} {
		t.Run(key, func(t *testing.T) {
			// Given a key normalizer that forgot to strip credentials
			// When the key is validated
			err := claim.ValidateKey(key)
			// Then it is refused as InvalidKey without echoing the password
			if !errors.Is(err, claim.ErrInvalidKey) {
				t.Fatalf("ValidateKey(%q) = %v, want ErrInvalidKey: the password would be stored in clear on the record", key, err)
			}
			if strings.Contains(err.Error(), "hunter") {
				t.Errorf("error echoes the password: %v", err)
			}
		})
	}
}

// TestAttack17_ValidateKeyRefusesZeroWidthMarks: issue 17 item 7 refuses
// format/bidi/zero-width characters. Variation selectors, the combining
// grapheme joiner and the Mongolian free variation selectors are zero-width
// and invisible, survive NFC, and are category Mn (not Cf), so "db" and
// "d<VS1>b" print the same and name two claims.
func TestAttack17_ValidateKeyRefusesZeroWidthMarks(t *testing.T) {
	for _, key := range []string{
		"pg.data.svc/d\uFE00b",     // VARIATION SELECTOR-1
		"pg.data.svc/d\u034Fb",     // COMBINING GRAPHEME JOINER
		"pg.data.svc/d\u180Bb",     // MONGOLIAN FREE VARIATION SELECTOR ONE
		"pg.data.svc/d\U000E0100b", // VARIATION SELECTOR-17
	} {
		t.Run(strings.ToValidUTF8(key, "?"), func(t *testing.T) {
			// Given a key that prints as "pg.data.svc/db" but carries a zero-width mark
			// When it is validated (after NormalizeKey: NFC keeps these marks)
			err := claim.ValidateKey(key)
			// Then it is refused, as zero-width spaces and joiners are
			if !errors.Is(err, claim.ErrInvalidKey) {
				t.Errorf("ValidateKey(%+q) = %v, want ErrInvalidKey (zero-width character)", key, err)
			}
		})
	}
}

// TestAttack17_ValidateKeyControlErrorNeverEchoesCredentials: regression.
// A key with user info and a control character is refused for the user info
// first, and its password is never echoed.
func TestAttack17_ValidateKeyControlErrorNeverEchoesCredentials(t *testing.T) {
	for _, key := range []string{
		"https://u:hunter2@h\x1b[2J/x",
		"https://u:hunter2@[::1]:5432/x\u200b",
		"https://u:p@ss:hunter2@h/x", // '@' inside the password, cut at the last '@'
		"a|https://u:hunter2@h|https://v:hunter2@h",
		"https://u:hunter2@h" + strings.Repeat("x", claim.MaxKeyLength),
		"https://u:hunter2@h/\xff",
	} {
		err := claim.ValidateKey(key)
		if !errors.Is(err, claim.ErrInvalidKey) {
			t.Errorf("ValidateKey(%+q) = %v, want ErrInvalidKey", key, err)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error echoes the password: %v", err)
		}
	}
}
