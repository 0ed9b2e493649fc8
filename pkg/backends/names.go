package backends

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"
)

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

// LabelValue makes any v a valid label value: at most 63 bytes of
// alphanumerics, '-', '_' and '.', starting and ending with an alphanumeric.
// A value that is one already is returned unchanged. Other values stay
// distinct from each other (up to a collision of 40 bits of sha256), but not
// from a valid value crafted to equal their label: the label of
// "team-a/alpha" is itself a valid value. A label only selects; the protocol
// narrows every selection by the holder's UID, so two holders with one
// label never release or list each other's records. Characters a label value
// cannot hold (the '/' of "namespace/name", spaces, non-ASCII) become '-' and
// the first 10 hex characters of sha256(v) are appended; a value too long is
// cut with [Bound], which appends its own hash; leading and trailing '-',
// '_', '.' are trimmed, and a value that only trimming changed also gets the
// hash of v, so that "-abc" and "abc" differ.
//
// Values of label characters that are only too long come out as earlier
// releases made them, so records written then keep matching their holder's
// selector. (Earlier releases trimmed "-abc" to "abc"; a record so labelled
// is relabelled at its holder's next Acquire, see Record.Unlabelled.)
func LabelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	clean := strings.Map(func(r rune) rune {
		if isLabelChar(r) {
			return r
		}
		return '-'
	}, v)
	replaced := clean != v
	if replaced {
		clean += "-" + hashHex(v)
	}
	out := strings.Trim(Bound(clean, validation.LabelValueMaxLength), "-._")
	if !replaced && len(v) <= validation.LabelValueMaxLength {
		// Only trimming changed v: without a hash it would be another
		// value's label.
		base := out
		if cut := validation.LabelValueMaxLength - boundSuffixLen - 1; len(base) > cut {
			base = strings.TrimRight(base[:cut], "-._")
		}
		out = strings.TrimLeft(base+"-"+hashHex(v), "-._")
	}
	return out
}

// hashHex is the first boundSuffixLen hex characters of sha256(s).
func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:boundSuffixLen]
}

// isLabelChar reports whether r may appear in a label value.
func isLabelChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
}
