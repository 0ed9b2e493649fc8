package claim

import (
	"errors"
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

func TestValidateKey(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		wantErr string
	}{
		{"given a storage URL then it is valid", "elasticsearch|https://es.data.svc:9200", ""},
		{"given a database key then it is valid", "7291846512/orders", ""},
		{"given unicode then it is valid", "realm/ümlaut", ""},
		{"given an empty key then it is rejected", "", "key is empty"},
		{"given a huge key then it is rejected", strings.Repeat("k", MaxKeyLength+1), "the limit is 1024"},
		{"given a key of exactly the limit then it is valid", strings.Repeat("k", MaxKeyLength), ""},
		{"given non-UTF-8 then it is rejected", "a\xffb", "not valid UTF-8"},
		{"given a newline then it is rejected", "a\nb", "control character at byte 1"},
		{"given a NUL then it is rejected", "a\x00", "control character at byte 1"},
		{"given a C1 control then it is rejected", "a\u0085", "control character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateKey(tt.key)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("ValidateKey() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("ValidateKey() = %v, want error containing %q", err, tt.wantErr)
			case tt.wantErr != "" && !errors.Is(err, ErrInvalidKey):
				t.Fatalf("ValidateKey() = %v, does not wrap ErrInvalidKey", err)
			}
		})
	}
}

func FuzzNames(f *testing.F) {
	for _, seed := range []string{"", "a", "elasticsearch|https://es.data.svc:9200", strings.Repeat("a", 253), strings.Repeat("-.", 100), "ü\x00\xff"} {
		f.Add(seed)
	}
	cfg := Config{}.withDefaults()
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
		if v := LabelValue(s); len(validation.IsValidLabelValue(v)) > 0 && isDNSish(s) {
			t.Fatalf("label value %q of %q is invalid: %v", v, s, validation.IsValidLabelValue(v))
		}
		// Annotations round-trip for every valid key.
		if ValidateKey(s) == nil {
			rec := Record{Key: s, Holder: h}
			got, present, foreign := cfg.Annotations.Decode(s, cfg.Annotations.Encode(rec))
			if !present || foreign != "" || got.Key != s || got.Holder.Name != s {
				t.Fatalf("annotations of key %q do not round-trip: %+v present=%v foreign=%q", s, got, present, foreign)
			}
		}
	})
}

// isDNSish reports whether s is made of the characters Kubernetes names
// allow, the only input LabelValue promises to keep valid.
func isDNSish(s string) bool {
	for _, r := range s {
		lower, digit := r >= 'a' && r <= 'z', r >= '0' && r <= '9'
		if !lower && !digit && r != '-' && r != '.' {
			return false
		}
	}
	return true
}
