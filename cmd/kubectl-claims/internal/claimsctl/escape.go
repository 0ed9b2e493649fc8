package claimsctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"sigs.k8s.io/yaml"

	"github.com/ocf-claim/claim/pkg/claim"
)

// Everything the plugin prints comes, in part, from the cluster: keys,
// names, annotation values, condition messages. Whoever can write an
// annotation or a condition must not be able to drive the terminal of the
// person on call (ESC sequences that retitle the window, clear the screen or
// colour a line), nor make one name look like another (a right-to-left
// override, a zero-width space). So every rune Go does not call printable
// (strconv.IsPrint: letters, marks, numbers, punctuation, symbols and the
// ASCII space) is shown escaped, in every output format.

// printable returns s, with the user info of every URL in it redacted
// (claim.Redact), with every rune that is not printable, and every byte
// that is not valid UTF-8, written as a Go escape: \t, \n, \x1b, \u202e,
// \xff. Printable runes, the backslash included, are left as they are, so an
// escape in the output may also be those characters literally; -o json
// tells the two apart.
func printable(s string) string {
	// A key may carry a URL's user info (written by hand, or by a release
	// before the claim refused such keys): no output shows it.
	s = claim.Redact(s)
	if allPrintable(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case shown(r):
			b.WriteRune(r)
		default:
			b.WriteString(escapeRune(r))
		}
		i += size
	}
	return b.String()
}

// printableLines is printable for text whose line breaks are the plugin's
// own (an error joined from several): each line is escaped on its own.
func printableLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = printable(l)
	}
	return strings.Join(lines, "\n")
}

// allPrintable reports whether s is valid UTF-8 made of printable runes only.
func allPrintable(s string) bool {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || !shown(r) {
			return false
		}
		i += size
	}
	return true
}

// escapeRune is the Go escape of one rune (without quotes): \t, \x1b,
// \u202e, \U000e0001. Each of these is also a valid escape in a YAML
// double-quoted scalar.
func escapeRune(r rune) string {
	if strconv.IsPrint(r) {
		// A zero-width mark Go calls printable: QuoteRune would keep it.
		if r > 0xffff {
			return fmt.Sprintf(`\U%08x`, r)
		}
		return fmt.Sprintf(`\u%04x`, r)
	}
	q := strconv.QuoteRune(r)
	return q[1 : len(q)-1]
}

// safeJSON rewrites JSON text so that every rune that is not printable is a
// \u escape. encoding/json already escapes the C0 controls, but writes DEL,
// the C1 controls and the format characters (U+202E, U+200B) as they are.
// Outside strings, JSON text holds only ASCII punctuation, space and the
// newlines of indentation, so every rune rewritten is inside a string, where
// \u means the same rune: the document decodes to the same value.
func safeJSON(data []byte) []byte {
	var b bytes.Buffer
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			// encoding/json never writes invalid UTF-8; if it did, the
			// replacement character is what a decoder reads.
			b.WriteString(`\ufffd`)
		case r == '\n' || shown(r):
			b.Write(data[i : i+size])
		case r > 0xFFFF:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.Bytes()
}

// yamlToken stands in for a string with runes that are not printable while
// the YAML encoder runs: the encoder writes it as "\x01<n>\x01", a form no
// other string takes (a string holding U+0001 is itself replaced by a
// token, and a string without it is never written with \x01).
const yamlToken = "\x01%d\x01"

// safeYAML encodes v as YAML as sigs.k8s.io/yaml does, except that a string
// with a rune that is not printable is written double-quoted with that rune
// escaped. The YAML encoder alone writes U+202E and U+200B as they are, a
// C1 control inside single quotes, and fails on DEL.
func safeYAML(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers come out as the JSON wrote them
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	var unsafe []string
	tree = tokenize(tree, &unsafe)
	out, err := yaml.Marshal(tree)
	if err != nil {
		return nil, err
	}
	if len(unsafe) == 0 {
		return out, nil
	}
	pairs := make([]string, 0, 2*len(unsafe))
	for i, s := range unsafe {
		pairs = append(pairs, `"`+escapeRune(0x01)+strconv.Itoa(i)+escapeRune(0x01)+`"`, yamlDoubleQuoted(s))
	}
	return []byte(strings.NewReplacer(pairs...).Replace(string(out))), nil
}

// tokenize replaces, in a tree decoded from JSON, every string value with a
// rune that is not printable (a newline aside: YAML writes it as a block)
// by a yamlToken, and appends the string to unsafe. Object keys are the
// plugin's own field names and are left alone.
func tokenize(v any, unsafe *[]string) any {
	switch v := v.(type) {
	case string:
		if allPrintable(strings.ReplaceAll(v, "\n", "")) {
			return v
		}
		*unsafe = append(*unsafe, v)
		return fmt.Sprintf(yamlToken, len(*unsafe)-1)
	case map[string]any:
		for k, e := range v {
			v[k] = tokenize(e, unsafe)
		}
	case []any:
		for i, e := range v {
			v[i] = tokenize(e, unsafe)
		}
	}
	return v
}

// yamlDoubleQuoted is s as a YAML double-quoted scalar: backslash and quote
// escaped, and every rune that is not printable as its escape.
func yamlDoubleQuoted(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '\\' || r == '"':
			b.WriteByte('\\')
			b.WriteRune(r)
		case shown(r):
			b.WriteRune(r)
		default:
			b.WriteString(escapeRune(r))
		}
	}
	b.WriteByte('"')
	return b.String()
}

// ErrorText is err's message as the plugin prints it: messages quote names,
// keys and details read from the cluster, so each line is escaped as
// printable does.
func ErrorText(err error) string { return printableLines(err.Error()) }

// shown reports whether r is printed as it is: printable for Go (which
// already excludes spaces other than U+0020, line separators, private-use
// and unassigned code points), and neither a zero-width mark (a variation
// selector, a combining grapheme joiner) nor a blank-looking character
// (U+2800, the Hangul fillers) that would make two different names look
// alike or a name look empty. These are the characters claim.ValidateKey
// refuses in keys.
func shown(r rune) bool {
	return strconv.IsPrint(r) && !unicode.Is(unicode.Variation_Selector, r) && !unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) && !blank[r]
}

// blank are the printable runes that print as nothing.
var blank = map[rune]bool{'\u2800': true, '\u115F': true, '\u1160': true, '\u3164': true, '\uFFA0': true}
