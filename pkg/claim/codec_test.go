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
