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
// (NFC, which [Claimer.NormalizeKey] applies), free of control characters and
// of format characters (Unicode category Cf: zero-width spaces and joiners,
// the byte order mark, bidirectional controls), and not a URL carrying user
// info ("scheme://user:password@host"). The error wraps [ErrInvalidKey].
//
// Format characters are invisible, and a key in another normalization form
// spells a character differently: two keys that print the same would name
// two claims, and a bidi control can make a key read as another one. User
// info is refused because the key is stored in clear text on the record;
// strip it in Config.Normalize. Errors never echo user info: a key is quoted
// with it replaced by "REDACTED".
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: key is empty", ErrInvalidKey)
	case len(key) > MaxKeyLength:
		return fmt.Errorf("%w: key is %d bytes long, the limit is %d (key starts %q)", ErrInvalidKey, len(key), MaxKeyLength, truncate(redactKey(key), 32))
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: key %q is not valid UTF-8", ErrInvalidKey, redactKey(key))
	case hasUserinfo(key):
		return fmt.Errorf("%w: key %q looks like a URL with credentials (user info); strip them in Config.Normalize", ErrInvalidKey, redactKey(key))
	case !norm.NFC.IsNormalString(key):
		return fmt.Errorf("%w: key %q is not in Unicode normalization form C; Claimer.NormalizeKey puts keys in it", ErrInvalidKey, redactKey(key))
	}
	for i, r := range key {
		switch {
		case unicode.IsControl(r):
			return fmt.Errorf("%w: key %q has a control character at byte %d", ErrInvalidKey, redactKey(key), i)
		case unicode.Is(unicode.Cf, r):
			return fmt.Errorf("%w: key %q has the invisible format character %U at byte %d", ErrInvalidKey, redactKey(key), r, i)
		case unicode.Is(unicode.Variation_Selector, r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r):
			// Zero-width marks that NFC keeps: two keys that print alike
			// would be two claims.
			return fmt.Errorf("%w: key %q has the invisible mark %U at byte %d", ErrInvalidKey, redactKey(key), r, i)
		}
	}
	return nil
}

// Redact returns s with the user info of every URL in it
// ("scheme://user:password@host") replaced by "REDACTED", for messages,
// events and logs that may quote a key or an error about one.
func Redact(s string) string { return redactKey(s) }

// redactedError is err with the user info of every URL in its text
// redacted; errors.Is and errors.As still see err.
type redactedError struct{ err error }

func (e redactedError) Error() string { return redactKey(e.err.Error()) }
func (e redactedError) Unwrap() error { return e.err }

// redacted replaces the user info of a URL in a key shown in a message.
const redacted = "REDACTED"

// redactKey returns key with the user info of every URL in it
// ("scheme://user:password@host") replaced by "REDACTED", for messages and
// logs: exactly the user info [ValidateKey] refuses, judged by the same rule
// (userinfoEnd), so that a key is redacted where it would be refused. Other
// keys are returned unchanged.
func redactKey(key string) string {
	var b strings.Builder
	rest := key
	for {
		i := strings.Index(rest, "//")
		if i < 0 {
			break
		}
		start := i + len("//")
		end, ok := userinfoEnd(rest[start:])
		if !ok {
			b.WriteString(rest[:start])
			rest = rest[start:]
			continue
		}
		b.WriteString(rest[:start])
		b.WriteString(redacted)
		rest = rest[start+end:]
	}
	b.WriteString(rest)
	return b.String()
}

// hasUserinfo reports whether a URL in s may carry user info, after "//"
// (with or without a scheme).
func hasUserinfo(s string) bool {
	for {
		i := strings.Index(s, "//")
		if i < 0 {
			return false
		}
		s = s[i+len("//"):]
		if _, ok := userinfoEnd(s); ok {
			return true
		}
	}
}

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
	for off := 0; ; {
		j := strings.Index(s[off:], "//")
		if j < 0 {
			return s
		}
		j += off
		if bar := strings.LastIndexByte(s[:j], '|'); bar >= 0 {
			return s[:bar]
		}
		off = j + len("//")
	}
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
