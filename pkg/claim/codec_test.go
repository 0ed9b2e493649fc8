package claim

import (
	"strings"
	"testing"
	"time"
)

// TestTheRenewTimeRoundTripsThroughAnnotations: Given a record renewed at a
// time with nanoseconds, When it is encoded and decoded, Then the renew time
// comes back to the microsecond, as a Lease's spec.renewTime does; And a
// renew-time annotation that is not a time makes the record foreign.
func TestTheRenewTimeRoundTripsThroughAnnotations(t *testing.T) {
	a := Config{}.withDefaults().Annotations
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
	cfg := Config{}.withDefaults()
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
