package claim

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxKeyLength is the longest key, in bytes, a Claimer accepts. Keys are
// stored whole in an annotation, so the bound keeps records small.
const MaxKeyLength = 1024

// hashLen is how many hex characters of sha256(key) name a record by default
// (backends.HashName).
const hashLen = 40

// ValidateKey reports whether key is acceptable as a claim key: non-empty,
// at most [MaxKeyLength] bytes, valid UTF-8 in Unicode normalization form C
// (NFC, which [Claimer.NormalizeKey] applies), free of characters that do
// not show (invisibleRune: control and format characters, line and
// paragraph separators, spaces other than U+0020, private-use code points,
// unassigned code points and noncharacters, zero-width marks and
// blank-looking characters such as U+2800), and free of credentials by the
// secret rule that [Redact] applies: user info with or without a scheme
// ("scheme://user:password@host", "user:password@host"), and credential
// parameters in query strings and connection strings ("?password=",
// "sslpassword=", "token=", "api_key=", libpq's "password=", ADO.NET's
// ";Password="). The error wraps [ErrInvalidKey].
//
// Invisible characters are refused because two keys that print the same
// would name two claims, and a bidi control or a line separator can make a
// key read as another one. Credentials are refused because the key is
// stored in clear text on the record, read by everyone who may read the
// claim namespace, and quoted in conditions other tenants read; strip them
// in Config.Normalize. Errors never echo a credential: a key is quoted
// through [Redact].
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: key is empty", ErrInvalidKey)
	case len(key) > MaxKeyLength:
		return fmt.Errorf("%w: key is %d bytes long, the limit is %d (key starts %q)", ErrInvalidKey, len(key), MaxKeyLength, truncate(redactKey(key), 32))
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: key %q is not valid UTF-8", ErrInvalidKey, redactKey(key))
	}
	if err := secretError(key); err != nil {
		return err
	}
	if !norm.NFC.IsNormalString(key) {
		return fmt.Errorf("%w: key %q is not in Unicode normalization form C; Claimer.NormalizeKey puts keys in it", ErrInvalidKey, redactKey(key))
	}
	for i, r := range key {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: key %q has a control character at byte %d", ErrInvalidKey, redactKey(key), i)
		}
		if what := invisibleRune(r); what != "" {
			return fmt.Errorf("%w: key %q has %s %U at byte %d", ErrInvalidKey, redactKey(key), what, r, i)
		}
	}
	return nil
}

// secretError is ValidateKey's error for a key the secret rule finds a
// credential in, naming its form; nil for a key without one.
func secretError(key string) error {
	switch {
	case len(urlUserinfoSpans(key)) > 0:
		return fmt.Errorf("%w: key %q looks like a URL with credentials (user info); strip them in Config.Normalize", ErrInvalidKey, redactKey(key))
	case len(bareUserinfoSpans(key)) > 0 || len(easyConnectSpans(key)) > 0:
		return fmt.Errorf("%w: key %q looks like credentials without a scheme (user:password@host, user/password@//host); strip them in Config.Normalize", ErrInvalidKey, redactKey(key))
	case len(parameterSpans(key)) > 0:
		return fmt.Errorf("%w: key %q carries a credential parameter (password=, token=, api_key= and the like, in a query or connection string); strip it in Config.Normalize", ErrInvalidKey, redactKey(key))
	}
	return nil
}

// blankRunes are characters of visible categories that print as nothing
// (Braille's blank pattern, the Hangul fillers): a key holding one prints
// as another key.
var blankRunes = map[rune]bool{
	'\u2800': true, // BRAILLE PATTERN BLANK
	'\u115F': true, // HANGUL CHOSEONG FILLER
	'\u1160': true, // HANGUL JUNGSEONG FILLER
	'\u3164': true, // HANGUL FILLER
	'\uFFA0': true, // HALFWIDTH HANGUL FILLER
}

// invisibleRune names the kind of character r is when a key may not hold
// it because it does not show, or is "" for a character that does.
func invisibleRune(r rune) string {
	switch {
	case unicode.IsControl(r):
		return "a control character"
	case unicode.Is(unicode.Cf, r):
		return "the invisible format character"
	case unicode.Is(unicode.Zl, r) || unicode.Is(unicode.Zp, r):
		return "the line-breaking character"
	case unicode.Is(unicode.Zs, r) && r != ' ':
		return "the space character"
	case unicode.Is(unicode.Co, r):
		return "the private-use character"
	case isNoncharacter(r):
		return "the noncharacter"
	case unicode.Is(unicode.Variation_Selector, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r):
		// Zero-width marks that NFC keeps: two keys that print alike
		// would be two claims.
		return "the invisible mark"
	case blankRunes[r]:
		return "the blank-looking character"
	case !assigned(r):
		return "the unassigned code point"
	}
	return ""
}

// isNoncharacter reports whether r is one of Unicode's 66 noncharacters
// (U+FDD0..U+FDEF and the last two code points of every plane).
func isNoncharacter(r rune) bool {
	return r >= 0xFDD0 && r <= 0xFDEF || r&0xFFFE == 0xFFFE
}

// assigned reports whether r has a Unicode category other than Cn in the
// tables Go was built with.
func assigned(r rune) bool {
	return unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

// Redact returns s with every credential the secret rule finds in it
// replaced by "REDACTED": the user info of a URL, with or without a scheme
// ("scheme://user:password@host", "user:password@host"), and the values of
// credential parameters ("?password=", "token=", libpq's "password=",
// ADO.NET's ";Password="), for messages, events and logs that may quote a
// key or an error about one. It finds exactly what [ValidateKey] refuses:
// a text without a credential by that rule is returned unchanged.
func Redact(s string) string { return redactKey(s) }

// redactedError is err with the credentials in its text redacted;
// errors.Is and errors.As still see err.
type redactedError struct{ err error }

func (e redactedError) Error() string { return redactKey(e.err.Error()) }
func (e redactedError) Unwrap() error { return e.err }

// redacted replaces a credential in a key shown in a message.
const redacted = "REDACTED"

// redactKey applies the secret rule (secretSpans) to key for messages and
// logs.
func redactKey(key string) string { return redactSecrets(key) }

// userinfoEnd judges s, the text after a URL's "//", and returns the index
// of the '@' that ends its user info when it may carry some. It is
// deliberately broader than RFC 3986: a password may hold '/', "//", '?',
// '#', '|' or a space, which end the authority for a parser (or a part of a
// composite key) while the whole of it would be stored. The URL is taken to
// run to the '|' before the next URL of a composite key (urlRun), and, when
// no user info shows there, to the end of the key; its user info ends at the
// last '@' of that run, and is there when that '@' is in the authority, or
// when a ':' comes before the first '/', '?', '#' or space preceding it
// ("admin:p/w@host", "admin:pa|ss@host"). Refusing a rare
// "host:port/path@..." (or a later "|...@...") is the safe side. An '@'
// further along a path with no ':' before it ("host/image@sha256:x") is not
// user info.
func userinfoEnd(s string) (int, bool) {
	if at, ok := userinfoIn(urlRun(s)); ok {
		return at, true
	}
	return userinfoIn(s)
}

// userinfoIn applies userinfoEnd's rule to the run s.
func userinfoIn(s string) (int, bool) {
	at := strings.LastIndexByte(s, '@')
	if at < 0 {
		return 0, false
	}
	head := s[:at]
	if cut := strings.IndexAny(head, "/?# "); cut >= 0 {
		head = head[:cut]
	}
	if strings.IndexByte(authority(s), '@') >= 0 || strings.IndexByte(head, ':') >= 0 {
		return at, true
	}
	return 0, false
}

// urlRun returns the leading part of s, the text after a URL's "//", up to
// the '|' before the next "//" of a composite key ("a://x|b://y"), or all
// of s. A "//" with no '|' before it is inside this URL (a path, or a
// password: base64 ones hold "//").
func urlRun(s string) string {
	// Linear: Redact runs on whole messages, and a run is judged for every
	// "//" of a text.
	bar := strings.IndexByte(s, '|')
	if bar < 0 {
		return s
	}
	j := strings.Index(s[bar:], "//")
	if j < 0 {
		return s
	}
	return s[:strings.LastIndexByte(s[:bar+j], '|')]
}

// authority returns the leading run of s made of the characters RFC 3986
// allows in a URL's authority (user info, host, port): it ends at '/', '?',
// '#', or any character that cannot be part of it, such as a '|' separating
// parts of a composite key.
func authority(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && !strings.ContainsRune("-._~%!$&'()*+,;=:@[]", rune(c)) {
			return s[:i]
		}
	}
	return s
}

// truncate cuts s to at most n bytes, never inside a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
