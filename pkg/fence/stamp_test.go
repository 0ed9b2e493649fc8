package fence

import (
	"encoding/json"
	"errors"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ocf-claim/claim/pkg/claim"
)

const (
	keyA = "elasticsearch|https://es.data.svc:9200"
	keyB = "rdbms|pg.data.svc:5432/camunda"
)

var tgt = target{op: "update", kind: "ConfigMap", ref: types.NamespacedName{Namespace: "ns", Name: "cm"}}

func TestAnnotationFor(t *testing.T) {
	// Given keys of every shape, when named, then each name is a valid,
	// distinct annotation name under the prefix.
	seen := map[string]string{}
	hex16 := regexp.MustCompile(`^` + regexp.QuoteMeta(AnnotationPrefix) + `[0-9a-f]{16}$`)
	for _, key := range []string{keyA, keyB, "a", "ä/ü ß", string(make([]byte, claim.MaxKeyLength)), "a/b/c:d|e"} {
		name := AnnotationFor(key)
		if errs := validation.IsQualifiedName(name); len(errs) > 0 {
			t.Errorf("AnnotationFor(%q) = %q, not a qualified name: %v", key, name, errs)
		}
		if !hex16.MatchString(name) {
			t.Errorf("AnnotationFor(%q) = %q, want prefix and 16 hex", key, name)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("keys %q and %q share %q", key, other, name)
		}
		seen[name] = key
		if AnnotationFor(key) != name {
			t.Errorf("AnnotationFor(%q) is not deterministic", key)
		}
	}
}

func TestCheck(t *testing.T) {
	a, b := AnnotationFor(keyA), AnnotationFor(keyB)
	grants := []Grant{{Key: keyA, Token: "200"}, {Key: keyB, Token: "50"}}
	stale := func(key, ann string, ours, newer claim.Token) error {
		return &StaleTokenError{Op: tgt.op, Kind: tgt.kind, Object: tgt.ref, Key: key, Annotation: ann, Token: ours, Newer: newer}
	}
	malformed := func(value string) error {
		return &MalformedStampError{Op: tgt.op, Kind: tgt.kind, Object: tgt.ref, Key: keyA, Annotation: a, Value: value}
	}
	tests := []struct {
		name        string
		annotations map[string]string
		want        error
	}{
		{"given no annotations, then the write passes", nil, nil},
		{"given no stamp of a held key, then the write passes", map[string]string{"other": "x"}, nil},
		{"given an older stamp, then the write passes", map[string]string{a: "199"}, nil},
		{"given a much older stamp (shorter), then the write passes", map[string]string{a: "99"}, nil},
		{"given our own stamp, then the write passes", map[string]string{a: "200", b: "50"}, nil},
		{"given a newer stamp, then the write is refused as stale", map[string]string{a: "201"}, stale(keyA, a, "200", "201")},
		{"given a newer stamp (longer), then the write is refused as stale", map[string]string{a: "1000"}, stale(keyA, a, "200", "1000")},
		{"given a newer stamp of the second key only, then it names that key", map[string]string{a: "100", b: "51"}, stale(keyB, b, "50", "51")},
		{"given a newer stamp of a key not held, then the write passes", map[string]string{AnnotationFor("elsewhere"): "999999"}, nil},
		{"given a malformed stamp of a key not held, then it is not read", map[string]string{AnnotationFor("elsewhere"): "junk"}, nil},
		{"given a non-numeric stamp, then it is refused as malformed", map[string]string{a: "abc"}, malformed("abc")},
		{"given an empty stamp, then it is refused as malformed", map[string]string{a: ""}, malformed("")},
		{"given a stamp with leading zeros, then it is refused as malformed", map[string]string{a: "0201"}, malformed("0201")},
		{"given a negative stamp, then it is refused as malformed", map[string]string{a: "-5"}, malformed("-5")},
		{"given a stamp with spaces, then it is refused as malformed", map[string]string{a: " 201"}, malformed(" 201")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := check(tgt, tc.annotations, grants)
			if diff := cmp.Diff(tc.want, got, cmp.Comparer(sameError)); diff != "" {
				t.Errorf("check (-want +got):\n%s\ngot error: %v", diff, got)
			}
			switch tc.want.(type) { //nolint:errorlint // the table's expected value, not a returned error
			case *StaleTokenError:
				if !errors.Is(got, ErrFenced) {
					t.Errorf("errors.Is(%v, ErrFenced) = false", got)
				}
			case *MalformedStampError:
				if !errors.Is(got, ErrMalformedStamp) || errors.Is(got, ErrFenced) {
					t.Errorf("%v: want ErrMalformedStamp and not ErrFenced", got)
				}
				if !regexp.MustCompile(regexp.QuoteMeta(a)).MatchString(got.Error()) {
					t.Errorf("%v does not name the annotation %s", got, a)
				}
			}
		})
	}
}

// sameError compares the typed errors by their fields, ignoring a
// MalformedStampError's parse error.
func sameError(x, y error) bool {
	var mx, my *MalformedStampError
	if errors.As(x, &mx) && errors.As(y, &my) {
		cx, cy := *mx, *my
		cx.Err, cy.Err = nil, nil
		return cx == cy
	}
	var sx, sy *StaleTokenError
	if errors.As(x, &sx) && errors.As(y, &sy) {
		return *sx == *sy
	}
	return x == nil && y == nil
}

func TestStamped(t *testing.T) {
	a, b, c := AnnotationFor(keyA), AnnotationFor(keyB), AnnotationFor("elsewhere")
	tests := []struct {
		name          string
		desired, read map[string]string
		grants        []Grant
		want          map[string]string
	}{
		{
			name:    "given a fresh object, then it carries exactly the grants' stamps beside its own annotations",
			desired: map[string]string{"app": "x"},
			grants:  []Grant{{Key: keyA, Token: "7"}},
			want:    map[string]string{"app": "x", a: "7"},
		},
		{
			name:    "given a cached copy without another key's stamp, then the read's stamp is kept",
			desired: map[string]string{"app": "x"},
			read:    map[string]string{"app": "old", c: "900", a: "5"},
			grants:  []Grant{{Key: keyA, Token: "7"}},
			want:    map[string]string{"app": "x", c: "900", a: "7"},
		},
		{
			name:    "given a caller that forges or drops stamps, then stamps are the read's and the grants'",
			desired: map[string]string{b: "1", c: "1", a: "1"},
			read:    map[string]string{c: "900"},
			grants:  []Grant{{Key: keyA, Token: "7"}},
			want:    map[string]string{c: "900", a: "7"},
		},
		{
			name:    "given no grants (status), then stamps stay as read",
			desired: map[string]string{a: "1"},
			read:    map[string]string{a: "5"},
			want:    map[string]string{a: "5"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, stamped(tc.desired, tc.read, tc.grants)); diff != "" {
				t.Errorf("stamped (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGuard(t *testing.T) {
	a, c := AnnotationFor(keyA), AnnotationFor("elsewhere")
	cur := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		ResourceVersion: "42",
		Annotations:     map[string]string{"keep": "1", "drop": "2", c: "900"},
	}}
	grants := []Grant{{Key: keyA, Token: "7"}}
	tests := []struct {
		name    string
		pt      types.PatchType
		patch   string
		grants  []Grant
		want    string // JSON; empty when an error is wanted
		wantErr error
	}{
		{
			name:  "given a spec-only merge patch, then it gains the version and the stamp",
			pt:    types.MergePatchType,
			patch: `{"data":{"x":"1"}}`,
			want:  `{"data":{"x":"1"},"metadata":{"resourceVersion":"42","annotations":{"` + a + `":"7"}}}`,
		},
		{
			name:  "given the read's version in the patch, then it is kept",
			pt:    types.MergePatchType,
			patch: `{"metadata":{"resourceVersion":"42"}}`,
			want:  `{"metadata":{"resourceVersion":"42","annotations":{"` + a + `":"7"}}}`,
		},
		{
			name:    "given another version in the patch, then it is a version change",
			pt:      types.MergePatchType,
			patch:   `{"metadata":{"resourceVersion":"41"}}`,
			wantErr: errVersionChanged,
		},
		{
			name:  "given a patch that removes or forges stamps, then those entries are dropped",
			pt:    types.MergePatchType,
			patch: `{"metadata":{"annotations":{"` + c + `":null,"` + a + `":"1","x":"y"}}}`,
			want:  `{"metadata":{"resourceVersion":"42","annotations":{"` + a + `":"7","x":"y"}}}`,
		},
		{
			name:  "given a patch that removes all annotations, then it removes all but the stamps",
			pt:    types.MergePatchType,
			patch: `{"metadata":{"annotations":null}}`,
			want:  `{"metadata":{"resourceVersion":"42","annotations":{"keep":null,"drop":null,"` + a + `":"7"}}}`,
		},
		{
			name:   "given a status patch (no grants), then it gains only the version",
			pt:     types.MergePatchType,
			patch:  `{"status":{"x":1},"metadata":{"annotations":{"` + c + `":null}}}`,
			grants: []Grant{},
			want:   `{"status":{"x":1},"metadata":{"resourceVersion":"42"}}`,
		},
		{
			name:  "given a strategic merge patch, then it gains the version and the stamp",
			pt:    types.StrategicMergePatchType,
			patch: `{"spec":{"replicas":2}}`,
			want:  `{"spec":{"replicas":2},"metadata":{"resourceVersion":"42","annotations":{"` + a + `":"7"}}}`,
		},
		{
			name:    "given a $patch directive on annotations, then it is unsupported",
			pt:      types.StrategicMergePatchType,
			patch:   `{"metadata":{"annotations":{"$patch":"replace","x":"y"}}}`,
			wantErr: ErrUnsupported,
		},
		{
			name:    "given a $patch directive on metadata, then it is unsupported",
			pt:      types.StrategicMergePatchType,
			patch:   `{"metadata":{"$patch":"replace"}}`,
			wantErr: ErrUnsupported,
		},
		{
			name:    "given a top-level $patch directive, then it is unsupported",
			pt:      types.StrategicMergePatchType,
			patch:   `{"$patch":"replace"}`,
			wantErr: ErrUnsupported,
		},
		{
			name:    "given a patch removing metadata, then it is unsupported",
			pt:      types.MergePatchType,
			patch:   `{"metadata":null}`,
			wantErr: ErrUnsupported,
		},
		{
			name:    "given a null patch, then it is unsupported",
			pt:      types.MergePatchType,
			patch:   `null`,
			wantErr: ErrUnsupported,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := grants
			if tc.grants != nil {
				g = tc.grants
			}
			got, err := guard([]byte(tc.patch), tc.pt, cur, g)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("guard(%s) = %s, %v; want %v", tc.patch, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("guard(%s): %v", tc.patch, err)
			}
			var gotV, wantV any
			if err := json.Unmarshal(got, &gotV); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.want), &wantV); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantV, gotV); diff != "" {
				t.Errorf("guard(%s) (-want +got):\n%s", tc.patch, diff)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name   string
		grants []Grant
		want   []string // substrings of the error
	}{
		{"given no grants", nil, []string{"grants: none"}},
		{"given an empty key", []Grant{{Key: "", Token: "1"}}, []string{"empty key"}},
		{"given a key twice", []Grant{{Key: keyA, Token: "1"}, {Key: keyA, Token: "2"}}, []string{"given twice"}},
		{"given a zero token", []Grant{{Key: keyA}}, []string{`parsing fencing token ""`}},
		{"given a malformed token", []Grant{{Key: keyA, Token: "01"}}, []string{`"01"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name+", then New names the problem and the nil client and reader", func(t *testing.T) {
			c, err := New(nil, nil, tc.grants...)
			if c != nil || err == nil {
				t.Fatalf("New = %v, %v; want an error", c, err)
			}
			for _, w := range append(tc.want, "client: nil", "reader: nil") {
				if !regexp.MustCompile(regexp.QuoteMeta(w)).MatchString(err.Error()) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}
