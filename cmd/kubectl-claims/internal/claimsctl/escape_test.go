package claimsctl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// hostile are strings someone who can write an annotation or a condition
// could put there, by what each would do to a terminal.
var hostile = []struct {
	name string
	in   string
	// want is how printable shows it.
	want string
}{
	{"plain text is left alone", "es|https://es.data.svc:9200", "es|https://es.data.svc:9200"},
	{"non-ASCII letters are printable", "café/日本", "café/日本"},
	{"a backslash is printable", `a\x1bb`, `a\x1bb`},
	{"tab and newline", "a\tb\nc\r", `a\tb\nc\r`},
	{"ESC colours and clears", "\x1b[31mred\x1b[0m\x1b[2J", `\x1b[31mred\x1b[0m\x1b[2J`},
	{"OSC retitles the window, ended by BEL", "\x1b]0;pwned\x07", `\x1b]0;pwned\a`},
	{"NUL and other C0 controls", "a\x00b\x01c\x08", `a\x00b\x01c\b`},
	{"DEL", "a\x7fb", `a\x7fb`},
	{"C1 controls: CSI and NEL", "a\u009b31mb\u0085c", `a\u009b31mb\u0085c`},
	{"right-to-left override", "orders\u202egpj.exe", `orders\u202egpj.exe`},
	{"bidi isolates", "a\u2066b\u2069c", `a\u2066b\u2069c`},
	{"zero-width space and joiner", "or\u200bders\u200d", `or\u200bders\u200d`},
	{"byte order mark", "\ufeffkey", `\ufeffkey`},
	{"no-break space looks like a space", "a\u00a0b", `a\u00a0b`},
	{"line separator", "a\u2028b", `a\u2028b`},
	{"a tag character beyond the BMP", "a\U000e0041b", `a\U000e0041b`},
	{"invalid UTF-8 bytes", "a\xffb\xc3", `a\xffb\xc3`},
}

// TestPrintable: Given a string from the cluster, When the plugin prints it
// in a table or in why's fields, Then every rune that is not printable, and
// every invalid byte, is escaped, and printable text is unchanged.
func TestPrintable(t *testing.T) {
	for _, tt := range hostile {
		t.Run(tt.name, func(t *testing.T) {
			got := printable(tt.in)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("printable(%q) (-want +got):\n%s", tt.in, diff)
			}
			if !allPrintable(got) {
				t.Fatalf("printable(%q) = %q still holds a rune that is not printable", tt.in, got)
			}
		})
	}
}

// TestTableEscapesCells: Given cells with control and format characters,
// When a table is written, Then the columns stay aligned and no cell
// carries a raw control or format character.
func TestTableEscapesCells(t *testing.T) {
	tb := table{header: []string{"KEY", "HOLDER"}, rows: [][]string{
		{"k\x1b[2J", "Widget/a\u202eb"},
		{"plain", "x\ty"},
	}}
	var b bytes.Buffer
	if err := tb.write(&b, ""); err != nil {
		t.Fatal(err)
	}
	want := "KEY        HOLDER\n" +
		`k\x1b[2J   Widget/a\u202eb` + "\n" +
		`plain      x\ty` + "\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Fatalf("table (-want +got):\n%s", diff)
	}
}

// TestErrorText: an error's lines are kept, what is in them is escaped.
func TestErrorText(t *testing.T) {
	err := errors.Join(errors.New("held by Widget a/b\x1b[8m"), errors.New("second\u202e"))
	want := `held by Widget a/b\x1b[8m` + "\n" + `second\u202e`
	if diff := cmp.Diff(want, ErrorText(err)); diff != "" {
		t.Fatalf("ErrorText (-want +got):\n%s", diff)
	}
}

// structured is a value shaped like the plugin's output: nested objects,
// a list, numbers, and strings from the cluster.
type structured struct {
	Key    string            `json:"key"`
	Number int64             `json:"number"`
	Items  []string          `json:"items"`
	Nested map[string]string `json:"nested"`
}

// TestStructuredOutputIsEscapedAndDecodesTheSame: Given values holding every
// hostile string, When they are printed with -o json or -o yaml, Then the
// text holds no rune that is not printable (newlines aside), and decoding it
// gives the values back (invalid UTF-8 as the replacement character, as
// encoding/json does).
func TestStructuredOutputIsEscapedAndDecodesTheSame(t *testing.T) {
	for _, tt := range hostile {
		for _, format := range []string{outputJSON, outputYAML} {
			t.Run(format+"/"+tt.name, func(t *testing.T) {
				in := structured{Key: tt.in, Number: 1234567890123, Items: []string{"plain", tt.in, "multi\nline"}, Nested: map[string]string{"message": "Key " + tt.in}}
				var b bytes.Buffer
				if err := writeStructured(&b, format, in); err != nil {
					t.Fatalf("writing %s: %v", format, err)
				}
				for i, line := range bytes.Split(b.Bytes(), []byte("\n")) {
					if !allPrintable(string(line)) {
						t.Fatalf("line %d of the %s output holds a rune that is not printable: %q", i+1, format, line)
					}
				}
				var got structured
				var err error
				if format == outputJSON {
					err = json.Unmarshal(b.Bytes(), &got)
				} else {
					err = yaml.UnmarshalStrict(b.Bytes(), &got)
				}
				if err != nil {
					t.Fatalf("decoding the %s output: %v\n%s", format, err, b.String())
				}
				want := in
				if !utf8.ValidString(tt.in) {
					want = roundTripJSON(t, in)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Fatalf("decoded %s output (-want +got):\n%s\n%s", format, diff, b.String())
				}
			})
		}
	}
}

// roundTripJSON is v as encoding/json gives it back, invalid UTF-8 replaced.
func roundTripJSON(t *testing.T, v structured) structured {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out structured
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestYAMLTokensCannotBeForged: Given a printable string that spells the
// encoder's stand-in for an escaped string, When it is printed as YAML, Then
// it is printed as itself and not replaced.
func TestYAMLTokensCannotBeForged(t *testing.T) {
	forged := []string{`"\x010\x01"`, `\x010\x01`, "\x01" + "0" + "\x01", "a\x1b"}
	data, err := safeYAML(forged)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := yaml.Unmarshal(data, &got); err != nil {
		t.Fatalf("decoding: %v\n%s", err, data)
	}
	if diff := cmp.Diff(forged, got); diff != "" {
		t.Fatalf("decoded (-want +got):\n%s\n%s", diff, data)
	}
	if s := strconv.Quote(string(data)); !allPrintable(string(bytes.ReplaceAll(data, []byte("\n"), nil))) {
		t.Fatalf("output not printable: %s", s)
	}
}

// hostileKey is a record key no Claimer accepts (claim.ValidateKey refuses
// control characters) but anyone with write access to Leases can store.
const hostileKey = "evil|\x1b[2J\x1b]0;pwned\x07\u200bkey\x7f\u0085"

// TestHostileRecordGolden: Given a record whose key, successor and holder
// condition carry escape sequences, C1 and format characters, When list and
// why print it in every format, Then no output holds a rune that is not
// printable, and the golden files show each escaped.
func TestHostileRecordGolden(t *testing.T) {
	const ns = "hostile"
	namespace(t, ns)
	n := &names{}
	cfg := claimer(t, claim.Config{Namespace: ns}).Config()
	holder := widget(t, ns, "holder", conditions.ReasonClaimed, "Holds key \"evil\". \x1b[8mhidden\x1b[0m")
	waiter := widget(t, ns, "waiter", conditions.ReasonParked, fmt.Sprintf("Key %q is held by Widget hostile/holder\u202e.", hostileKey))
	n.add(string(holder.GetUID()), "0a1b2c3d-1111-4000-8000-000000000001")
	n.add(string(waiter.GetUID()), "7e8f9a0b-2222-4000-8000-000000000002")
	successor := claim.Holder{APIVersion: widgetGVK.GroupVersion().String(), Kind: "Widget", Namespace: ns, Name: "orders\u202egpj.exe", UID: "5c6d7e8f-3333-4000-8000-000000000003"}
	createLease(t, n, cfg, claim.Record{Key: hostileKey, Holder: claim.HolderOf(holder), Successor: &successor, AcquireTime: t0}, "4001")

	tests := []struct {
		name   string
		args   []string
		golden string
	}{
		{"list", []string{"list", "-n", ns}, "escape-list.golden"},
		{"list -o wide", []string{"list", "-n", ns, "-o", "wide"}, "escape-list-wide.golden"},
		{"list -o json", []string{"list", "-n", ns, "-o", "json"}, "escape-list.json.golden"},
		{"list -o yaml", []string{"list", "-n", ns, "-o", "yaml"}, "escape-list.yaml.golden"},
		{"why, the holder", []string{"why", "widget/holder", "-n", ns, "--claim-namespace", ns}, "escape-why-holder.golden"},
		{"why, the waiter", []string{"why", "widget/waiter", "-n", ns, "--claim-namespace", ns}, "escape-why-waiter.golden"},
		{"why -o yaml", []string{"why", "widget/waiter", "-n", ns, "--claim-namespace", ns, "-o", "yaml"}, "escape-why-waiter.yaml.golden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, n, nil, tt.args...)
			if r.err != nil {
				t.Fatalf("%v: %v\nstderr: %s", tt.args, r.err, r.errOut)
			}
			for i, line := range strings.Split(r.out+r.errOut, "\n") {
				if !allPrintable(line) {
					t.Fatalf("line %d of the output holds a rune that is not printable: %q", i+1, line)
				}
			}
			golden(t, tt.golden, r.out+stderrSection(r.errOut))
		})
	}
}

// TestZeroWidthMarksAreShownEscaped: the plugin escapes what would "make one
// name look like another (a right-to-left override, a zero-width space)", the
// zero-width marks too: the invisible variation selectors and the combining
// grapheme joiner, which Go calls printable (category Mn). ValidateKey
// refuses them in keys (pkg/claim TestValidateKeyRefusesZeroWidthMarks), but
// a record written otherwise must not print as another key in `kubectl claims
// list`.
func TestZeroWidthMarksAreShownEscaped(t *testing.T) {
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

// TestYAMLAndJSONEscapeTerminalSequencesInEveryField: a condition message
// with an OSC sequence and a newline in -o yaml and -o json carries no raw
// ESC.
func TestYAMLAndJSONEscapeTerminalSequencesInEveryField(t *testing.T) {
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
