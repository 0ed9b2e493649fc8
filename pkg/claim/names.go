package claim

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxKeyLength is the longest key, in bytes, a Claimer accepts. Keys are
// stored whole in an annotation, so the bound keeps records small.
const MaxKeyLength = 1024

// hashLen is how many hex characters of sha256(key) name a record by default.
const hashLen = 40

// boundSuffixLen is the number of hex characters [Bound] appends.
const boundSuffixLen = 10

// Bound returns s unchanged when it fits in limit bytes. Otherwise it cuts s
// to limit-11 bytes (never inside a UTF-8 sequence), trims trailing '-' and
// '.' so the result stays a valid DNS name when s was one, and appends '-' and
// the first 10 hex characters of sha256(s), so that distinct long inputs stay
// distinct. The result is at most limit bytes. limit must be at least 12.
func Bound(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit - boundSuffixLen - 1
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	head := strings.TrimRight(s[:cut], "-.")
	sum := sha256.Sum256([]byte(s))
	return head + "-" + hex.EncodeToString(sum[:])[:boundSuffixLen]
}

// HashName returns prefix followed by the first 40 hex characters of
// sha256(key): a valid DNS-1123 name for any key when prefix is a valid name
// prefix. It is the default record name of the Lease backend.
func HashName(prefix, key string) string {
	sum := sha256.Sum256([]byte(key))
	return prefix + hex.EncodeToString(sum[:])[:hashLen]
}

// ValidateKey reports whether key is acceptable as a claim key: non-empty, at
// most [MaxKeyLength] bytes, valid UTF-8, and free of control characters. The
// error wraps [ErrInvalidKey].
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: key is empty", ErrInvalidKey)
	case len(key) > MaxKeyLength:
		return fmt.Errorf("%w: key is %d bytes long, the limit is %d (key starts %q)", ErrInvalidKey, len(key), MaxKeyLength, key[:32])
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: key %q is not valid UTF-8", ErrInvalidKey, key)
	}
	for i, r := range key {
		if unicode.IsControl(r) {
			return fmt.Errorf("%w: key %q has a control character at byte %d", ErrInvalidKey, key, i)
		}
	}
	return nil
}
