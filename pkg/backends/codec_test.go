package backends

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestTheRenewTimeRoundTripsThroughAnnotations: Given a record renewed at a
// time with nanoseconds, When it is encoded and decoded, Then the renew time
// comes back to the microsecond, as a Lease's spec.renewTime does; And a
// renew-time annotation that is not a time makes the record foreign.
func TestTheRenewTimeRoundTripsThroughAnnotations(t *testing.T) {
	a := Annotations{}.WithDefaults()
	renewed := time.Date(2026, 11, 29, 12, 0, 0, 123456789, time.FixedZone("CET", 3600))
	rec := Record{Key: "k", Holder: Holder{Namespace: "ns", Name: "n", UID: "u"}, RenewTime: renewed}

	got, _, foreign := a.Decode("k", a.Encode(rec))

	if foreign != "" || !got.RenewTime.Equal(renewed.Truncate(time.Microsecond)) {
		t.Fatalf("decoded renew time %v (foreign %q), want %v", got.RenewTime, foreign, renewed.Truncate(time.Microsecond))
	}
	forged := a.Encode(rec)
	forged[a.RenewTime] = "yesterday"
	if _, _, foreign := a.Decode("k", forged); !strings.Contains(foreign, `renew-time annotation "yesterday" is not a time`) {
		t.Fatalf("foreign = %q, want the malformed renew time named", foreign)
	}
}

func TestDecodeStoredRefusesRecordsNoClaimerWrote(t *testing.T) {
	cfg := Config{Annotations: Annotations{}.WithDefaults()}
	a := cfg.Annotations
	complete := func(token string, withKind bool) map[string]string {
		m := a.Encode(Record{Key: "k", Holder: Holder{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "n", UID: "u"}, Token: Token(token)})
		if !withKind {
			delete(m, a.HolderAPIVersion)
			delete(m, a.HolderKind)
		}
		return m
	}
	tests := []struct {
		name    string
		stored  Stored
		foreign string
	}{
		{"given a token older than the object then the record is ours", Stored{Version: "120", Annotations: complete("100", true)}, ""},
		{"given a token equal to the object's version then the record is foreign (a stored token is always older than the write that stores it)", Stored{Version: "100", Annotations: complete("100", true)}, "token annotation 100 is not older than the object's own resourceVersion 100"},
		{"given a token older than the object's version then the record is ours", Stored{Version: "101", Annotations: complete("100", true)}, ""},
		{"given a token newer than the object then the record is foreign", Stored{Version: "120", Annotations: complete("999999999999", true)}, "token annotation 999999999999 is not older than the object's own resourceVersion 120"},
		{"given no kind on an object of the claim's own then the record is ours", Stored{Version: "120", Annotations: complete("", false)}, ""},
		{"given no kind on a shared object then the record is foreign", Stored{Version: "120", Annotations: complete("", false), Shared: true}, "has no apiVersion or kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cfg.DecodeStored("k", tt.stored)
			if tt.foreign == "" && got.Foreign != "" || tt.foreign != "" && !strings.Contains(got.Foreign, tt.foreign) {
				t.Fatalf("Foreign = %q, want %q", got.Foreign, tt.foreign)
			}
		})
	}
}

func TestDecodeAnnotations(t *testing.T) {
	a := Annotations{}.WithDefaults()
	full := a.Encode(Record{Key: "k", Holder: Holder{Namespace: "ns", Name: "n", UID: "u", Kind: "K", APIVersion: "g/v1"}, Token: "7", HandedOverBy: "u-prev"})
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for kk, vv := range full {
			m[kk] = vv
		}
		if v == "\x00delete" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name        string
		annotations map[string]string
		wantPresent bool
		wantForeign string
	}{
		{"given a complete record then it is ours", full, true, ""},
		{"given no annotations then nothing is present", nil, false, "missing annotations"},
		{"given unrelated annotations then nothing is present", map[string]string{"other": "x"}, false, "missing annotations"},
		{"given a missing holder UID then it is foreign", with(a.HolderUID, "\x00delete"), true, "missing annotations " + a.HolderUID},
		{"given another key then it is foreign", with(a.Key, "other"), true, `written for key "other"`},
		{"given an empty UID then it is foreign", with(a.HolderUID, ""), true, "holder name or UID is empty"},
		{"given a garbage token then it is foreign", with(a.Token, "x1"), true, "token annotation"},
		{"given a malformed successor then it is foreign", with(a.Successor, "{"), true, "successor annotation"},
		{"given no kind then it is still ours", with(a.HolderKind, "\x00delete"), true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, present, foreign := a.Decode("k", tt.annotations)
			if present != tt.wantPresent || !strings.HasPrefix(foreign, tt.wantForeign) || (tt.wantForeign == "") != (foreign == "") {
				t.Fatalf("Decode() present=%v foreign=%q; want present=%v foreign starting %q", present, foreign, tt.wantPresent, tt.wantForeign)
			}
		})
	}
}

func FuzzDecodeAnnotations(f *testing.F) {
	f.Add("k", "ns", "n", "u", "7", `{"name":"s","uid":"v"}`)
	f.Add("", "", "", "", "", "")
	f.Add("k", "ns", "n", "u", "01", "{")
	a := Annotations{}.WithDefaults()
	f.Fuzz(func(t *testing.T, key, ns, name, uid, token, successor string) {
		m := map[string]string{a.Key: key, a.HolderNamespace: ns, a.HolderName: name, a.HolderUID: uid, a.Token: token, a.Successor: successor}
		rec, _, foreign := a.Decode(key, m)
		if foreign != "" {
			return
		}
		// Whatever Decode accepts is a usable record: a holder with name and
		// UID, a parseable token, and it encodes back to the same fields.
		if rec.Holder.Name == "" || rec.Holder.UID == "" {
			t.Fatalf("accepted a holder without name or UID: %+v", rec.Holder)
		}
		if _, err := ParseToken(rec.Token.String()); !rec.Token.IsZero() && err != nil {
			t.Fatalf("accepted token %q", rec.Token)
		}
		again, _, foreign2 := a.Decode(key, a.Encode(rec))
		if foreign2 != "" || again.Holder != rec.Holder || again.Token != rec.Token {
			t.Fatalf("re-encoding changed the record: %+v -> %+v (%q)", rec, again, foreign2)
		}
	})
}

// TestEveryClaimFieldRoundTripsThroughAnnotations: Given a record with every
// claim field set, When it is encoded and decoded, Then every claim field
// comes back (times to the microsecond, as stored).
func TestEveryClaimFieldRoundTripsThroughAnnotations(t *testing.T) {
	a := Annotations{}.WithDefaults()
	at := time.Date(2026, 11, 30, 10, 0, 0, 123456000, time.UTC)
	rec := Record{
		Key:          "k",
		Holder:       Holder{APIVersion: "g/v1", Kind: "K", Namespace: "ns", Name: "n", UID: "u"},
		Successor:    &Holder{APIVersion: "g/v1", Kind: "K", Namespace: "ns", Name: "s", UID: "u-s"},
		Token:        "7",
		RenewTime:    at,
		Set:          "set-a",
		HandedOverBy: "u-prev",
	}
	got, present, foreign := a.Decode("k", a.Encode(rec))
	if !present || foreign != "" {
		t.Fatalf("Decode: present=%v foreign=%q", present, foreign)
	}
	// AcquireTime and Transitions live outside the annotations (the backend's
	// own fields).
	if diff := cmp.Diff(rec, got); diff != "" {
		t.Fatalf("round trip (-encoded +decoded):\n%s", diff)
	}
}

// TestDecodeStoredTakesATokenEqualToItsOwnObjectsVersionForForeign: a record
// is Foreign when its token is greater than the storing object's own
// resourceVersion "or otherwise impossible". The protocol never writes a
// token annotation equal to the version of the write that stores it: a grant
// writes no token (it defaults to the object's version), and a write that
// keeps a grant passes on the token it read, the version of an earlier write,
// so the stored annotation is always strictly older than the object. A token
// equal to the object's own resourceVersion can only come from someone who
// predicted the resourceVersion of their own write (on a quiet cluster: the
// current revision plus one), i.e. a forger.
func TestDecodeStoredTakesATokenEqualToItsOwnObjectsVersionForForeign(t *testing.T) {
	a := Annotations{
		Key: DefaultKeyAnnotation, HolderAPIVersion: DefaultHolderAPIVersionAnnotation,
		HolderKind: DefaultHolderKindAnnotation, HolderNamespace: DefaultHolderNamespaceAnnotation,
		HolderName: DefaultHolderNameAnnotation, HolderUID: DefaultHolderUIDAnnotation,
		Token: DefaultTokenAnnotation, Successor: DefaultSuccessorAnnotation,
		Set: DefaultSetAnnotation, RenewTime: DefaultRenewTimeAnnotation,
	}
	cfg := Config{Namespace: "claims", Annotations: a}
	// Given a complete record whose token annotation is exactly the object's resourceVersion
	ann := a.Encode(Record{
		Key:    "k",
		Holder: Holder{APIVersion: "v1", Kind: "ConfigMap", Namespace: "tenant", Name: "squatter", UID: "u"},
		Token:  "4711",
	})
	// When the backend decodes it from the object that stores it
	rec := cfg.DecodeStored("k", Stored{Version: "4711", Annotations: ann, Shared: true})
	// Then it is Foreign: no Claimer could have written it
	if rec.Foreign == "" {
		t.Errorf("record with token %s on an object at resourceVersion 4711 is trusted (holder %s); want Foreign: the token annotation cannot name the write that stores it", rec.Token, rec.Holder)
	}
}
