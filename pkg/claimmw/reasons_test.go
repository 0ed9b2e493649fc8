package claimmw

import (
	"testing"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// The middleware's grant events and acquire counter labels come from the one
// reason table in pkg/conditions; its exported event reasons must be the
// table's values.
func TestGrantEventsAndMetricLabelsComeFromTheReasonTable(t *testing.T) {
	for _, tc := range []struct {
		outcome claim.Reason
		want    EventReason
	}{
		{claim.ReasonAcquired, EventClaimed},
		{claim.ReasonTakenOver, EventTakenOver},
		{claim.ReasonHeld, ""},
		{claim.ReasonHeldElsewhere, ""},
		{claim.ReasonWaitingForHandover, ""},
		{claim.ReasonForeign, ""},
		{claim.ReasonNotFirst, ""},
	} {
		// Given an Acquire with the outcome, then the grant event is the constant users match on
		if got := EventReason(conditions.GrantEvent(tc.outcome)); got != tc.want {
			t.Errorf("grant event of %s = %q, want %q", tc.outcome, got, tc.want)
		}
		// And the acquire counter's label is the outcome's value
		if got := conditions.MetricLabel(tc.outcome, nil); got != string(tc.outcome) {
			t.Errorf("metric label of %s = %q", tc.outcome, got)
		}
	}
}
