package conditions

import (
	"errors"

	"github.com/ocf-claim/claim/pkg/claim"
)

// reasonRow is one row of the claim's reason vocabularies: an Acquire
// outcome (none for the rows of a failed call), the condition reason a user
// reads for it, the event the middleware records when it grants the key
// afresh (none for a grant that changed nothing or a key not granted: a
// parked object's event is recorded under its condition reason when the
// condition changes), and the "reason" label of the acquire counter.
type reasonRow struct {
	outcome   claim.Reason
	condition Reason
	event     string
	metric    string
}

// reasons is the one table every reason mapping is derived from:
// [ReasonFor], [GrantEvent] and [MetricLabel]. Every [claim.Reason] is in it
// exactly once. The values are stable: users and alerting rules match on
// them.
var reasons = []reasonRow{
	{outcome: claim.ReasonAcquired, condition: ReasonClaimed, event: "Claimed", metric: "Acquired"},
	{outcome: claim.ReasonHeld, condition: ReasonClaimed, metric: "Held"},
	{outcome: claim.ReasonTakenOver, condition: ReasonClaimed, event: "TakenOver", metric: "TakenOver"},
	{outcome: claim.ReasonHeldElsewhere, condition: ReasonParked, metric: "HeldElsewhere"},
	{outcome: claim.ReasonWaitingForHandover, condition: ReasonWaitingForHandover, metric: "WaitingForHandover"},
	{outcome: claim.ReasonForeign, condition: ReasonForeign, metric: "Foreign"},
	{outcome: claim.ReasonNotFirst, condition: ReasonNotFirst, metric: "NotFirst"},
	// A failed Acquire: a key that is not acceptable, or any other error.
	{condition: ReasonInvalidKey, metric: "InvalidKey"},
	{condition: ReasonClaimError, metric: "Error"},
}

// rowOf returns the row of outcome r, or the ClaimError row for a reason
// the table does not know.
func rowOf(r claim.Reason) reasonRow {
	for _, row := range reasons {
		if row.outcome != "" && row.outcome == r {
			return row
		}
	}
	return rowOfCondition(ReasonClaimError)
}

func rowOfCondition(c Reason) reasonRow {
	for _, row := range reasons {
		if row.outcome == "" && row.condition == c {
			return row
		}
	}
	return reasonRow{condition: c}
}

// ReasonFor maps an Acquire outcome to the reason a user reads.
func ReasonFor(o claim.Outcome) Reason { return rowOf(o.Reason).condition }

// GrantEvent is the reason of the event recorded when an Acquire with
// outcome r grants a key afresh ("Claimed", "TakenOver"), or "" when the
// outcome records no grant event.
func GrantEvent(r claim.Reason) string { return rowOf(r).event }

// MetricLabel is the "reason" label of the acquire counter for an Acquire
// that returned (r, err): the outcome reason, "InvalidKey" for a key that is
// not acceptable ([claim.ErrInvalidKey]), "Error" for any other error.
func MetricLabel(r claim.Reason, err error) string {
	switch {
	case errors.Is(err, claim.ErrInvalidKey):
		return rowOfCondition(ReasonInvalidKey).metric
	case err != nil:
		return rowOfCondition(ReasonClaimError).metric
	}
	for _, row := range reasons {
		if row.outcome != "" && row.outcome == r {
			return row.metric
		}
	}
	return string(r)
}
