package backends

import (
	"strings"
	"testing"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestBound(t *testing.T) {
	long := strings.Repeat("a", 253)
	tests := []struct {
		name  string
		in    string
		limit int
		want  string
	}{
		{"given a name that fits then it is kept", "ns/name", 128, "ns/name"},
		{"given a name of exactly the limit then it is kept", strings.Repeat("b", 63), 63, strings.Repeat("b", 63)},
		{"given a long name then it is cut and hashed", long, 63, strings.Repeat("a", 52) + "-" + hashHead(long)},
		{"given a cut ending in dots and dashes then they are trimmed", strings.Repeat("a", 50) + "-.-" + strings.Repeat("z", 20), 63, strings.Repeat("a", 50) + "-" + hashHead(strings.Repeat("a", 50)+"-.-"+strings.Repeat("z", 20))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Bound(tt.in, tt.limit); got != tt.want {
				t.Errorf("Bound() = %q, want %q", got, tt.want)
			}
		})
	}
}

func hashHead(s string) string { return HashName("", s)[:boundSuffixLen] }

func TestBoundDistinguishesLongNamesWithACommonPrefix(t *testing.T) {
	a := strings.Repeat("x", 200) + "a"
	b := strings.Repeat("x", 200) + "b"
	if Bound(a, 63) == Bound(b, 63) {
		t.Fatalf("Bound made %q of two different names", Bound(a, 63))
	}
}

func TestBoundNeverSplitsARune(t *testing.T) {
	s := strings.Repeat("é", 100)
	for limit := 12; limit < 80; limit++ {
		got := Bound(s, limit)
		if len(got) > limit || !utf8.ValidString(got) {
			t.Fatalf("Bound(limit=%d) = %q (%d bytes, valid UTF-8: %v)", limit, got, len(got), utf8.ValidString(got))
		}
	}
}

func TestHashName(t *testing.T) {
	got := HashName("claim-", "elasticsearch|https://es.data.svc:9200")
	if len(got) != len("claim-")+40 || !strings.HasPrefix(got, "claim-") {
		t.Fatalf("HashName() = %q", got)
	}
	if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
		t.Fatalf("HashName() = %q is not a valid name: %v", got, errs)
	}
	// Pinned: records written by earlier releases must keep their names.
	if want := "claim-4cccf41785289fed5fc192f2a7475c228d8b84fd"; got != want {
		t.Fatalf("HashName() = %q, want %q", got, want)
	}
}

func FuzzNames(f *testing.F) {
	for _, seed := range []string{"", "a", "elasticsearch|https://es.data.svc:9200", strings.Repeat("a", 253), strings.Repeat("-.", 100), "ü\x00\xff"} {
		f.Add(seed)
	}
	cfg := Config{Annotations: Annotations{}.WithDefaults()}
	f.Fuzz(func(t *testing.T, s string) {
		// Every key yields a valid record name.
		if name := cfg.RecordName(s); len(validation.IsDNS1123Subdomain(name)) > 0 {
			t.Fatalf("record name %q of key %q is invalid", name, s)
		}
		// Every holder name yields a bounded identity and valid labels.
		h := Holder{Kind: "CamundaCluster", Namespace: "ns", Name: s, UID: "0000"}
		if id := h.Identity(128); len(id) > 128 {
			t.Fatalf("identity of %q is %d bytes", s, len(id))
		}
		if v := LabelValue(s); len(validation.IsValidLabelValue(v)) > 0 {
			t.Fatalf("label value %q of %q is invalid: %v", v, s, validation.IsValidLabelValue(v))
		}
		// Values made of label characters come out as earlier releases made
		// them: records written then still match their holder's selector.
		if onlyLabelChars(s) && (len(s) > validation.LabelValueMaxLength || strings.Trim(s, "-._") == s) {
			if v, old := LabelValue(s), strings.Trim(Bound(s, validation.LabelValueMaxLength), "-._"); v != old {
				t.Fatalf("label value of %q changed from %q to %q", s, old, v)
			}
		}
		// Annotations round-trip for every holder that has a name.
		if s != "" {
			rec := Record{Key: s, Holder: h}
			got, present, foreign := cfg.Annotations.Decode(s, cfg.Annotations.Encode(rec))
			if !present || foreign != "" || got.Key != s || got.Holder.Name != s {
				t.Fatalf("annotations of key %q do not round-trip: %+v present=%v foreign=%q", s, got, present, foreign)
			}
		}
	})
}

// onlyLabelChars reports whether s is made of the characters label values
// allow, the input earlier releases made valid label values of.
func onlyLabelChars(s string) bool {
	for _, r := range s {
		if !isLabelChar(r) {
			return false
		}
	}
	return true
}

func TestLabelValue(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"given a valid value then it is kept", "6f1c1d2e-8b51-4c1e-9a57-2a3b4c5d6e7f", "6f1c1d2e-8b51-4c1e-9a57-2a3b4c5d6e7f"},
		{"given namespace/name then the slash is replaced and a hash keeps it distinct", "team-a/orders", "team-a-orders-" + hashHead("team-a/orders")},
		{"given spaces and non-ASCII then they are replaced", "Zürich cluster", "Z-rich-cluster-" + hashHead("Zürich cluster")},
		{"given only invalid characters then the hash remains", "//", hashHead("//")},
		{"given label characters with dashes at the ends then they are trimmed and hashed, so that they are not abc's value", "-abc.", "abc-" + hashHead("-abc.")},
		{"given label characters too long then they are bounded as before", strings.Repeat("a", 70), strings.Trim(Bound(strings.Repeat("a", 70), 63), "-._")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := LabelValue(tt.in)
			if got != tt.want {
				t.Fatalf("LabelValue(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Fatalf("LabelValue(%q) = %q is not a valid label value: %v", tt.in, got, errs)
			}
		})
	}
	if LabelValue("team-a/orders") == LabelValue("team-a-orders") {
		t.Fatal("two holders' values became one label value")
	}
	long := strings.Repeat("ns/", 40)
	if got := LabelValue(long); len(got) > 63 || len(validation.IsValidLabelValue(got)) > 0 {
		t.Fatalf("LabelValue of a long value with slashes = %q", got)
	}
}

// TestAConfigWithoutDefaultsNamesAndSelectsRecords: Given a Config that did
// not pass through claim.New (a tool's Config{Prefix: ...}), When it names a
// record or selects a holder's records, Then it answers as the defaults do
// instead of panicking on a nil function.
func TestAConfigWithoutDefaultsNamesAndSelectsRecords(t *testing.T) {
	raw := Config{Prefix: "lock-"}
	if got, want := raw.RecordName("k"), HashName("lock-", "k"); got != want {
		t.Fatalf("RecordName() = %q, want %q", got, want)
	}
	if got, want := (Config{}).RecordName("k"), HashName(DefaultPrefix, "k"); got != want {
		t.Fatalf("zero Config RecordName() = %q, want %q", got, want)
	}
	h := Holder{Name: "a", UID: "u-a"}
	if got := raw.SelectorLabels(h); got[DefaultHolderUIDLabel] != "u-a" || len(got) != 1 {
		t.Fatalf("SelectorLabels() = %v, want the default UID label", got)
	}
	if got := raw.RecordLabels(h); got[DefaultHolderUIDLabel] != "u-a" {
		t.Fatalf("RecordLabels() = %v, want the default UID label", got)
	}
}

// TestLabelValueKeepsDistinctInputsDistinct: LabelValue maps distinct inputs
// to distinct label values, also a value made only of label characters but
// with a leading or trailing '-', '_' or '.': trimmed without a hash, it
// would become the very value another input is passed through as, and two
// holders whose HolderLabels values are "-abc" and "abc" would select each
// other's records.
func TestLabelValueKeepsDistinctInputsDistinct(t *testing.T) {
	for _, pair := range [][2]string{
		{"-abc", "abc"},
		{"abc.", "abc"},
		{"_team_", "team"},
		{"-abc", "abc-"},
	} {
		if a, b := LabelValue(pair[0]), LabelValue(pair[1]); a == b {
			t.Errorf("LabelValue(%q) = LabelValue(%q) = %q: distinct inputs became one label value", pair[0], pair[1], a)
		}
	}
}
