package conditions_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/conditions"
)

// TestFoldReadyRanksAsOCFAggregates pins FoldReady against ocf's Aggregate
// for the statuses and cases ocf's reference names: every status has its
// priority, and when both are True the higher priority's reason wins.
func TestFoldReadyRanksAsOCFAggregates(t *testing.T) {
	claimed := conditions.New(conditions.Claimed, conditions.ReasonClaimed, `Holds key "k".`, 2)
	parked := conditions.New(conditions.Claimed, conditions.ReasonParked, "Held by b.", 2)
	invalid := conditions.New(conditions.Claimed, conditions.ReasonInvalidKey, "Bad key.", 2)
	ready := func(status metav1.ConditionStatus, reason string) metav1.Condition {
		return metav1.Condition{Type: "Ready", Status: status, Reason: reason, Message: "mine", ObservedGeneration: 2}
	}
	for _, tc := range []struct {
		name         string
		ready, claim metav1.Condition
		want         metav1.Condition
	}{
		{
			name: "given a FeatureGateError and a Parked claim then FeatureGateError outranks it",
			// FeatureGateError ranked 0 before: Parked hid it.
			ready: ready("False", "FeatureGateError"), claim: parked,
			want: ready("False", "FeatureGateError"),
		},
		{
			name:  "given a FeatureGateError and an InvalidKey claim then the tie keeps ready's reason",
			ready: ready("False", "FeatureGateError"), claim: invalid,
			want: ready("False", "FeatureGateError"),
		},
		{
			name:  "given a Creating component and a Parked claim then Parked (10) outranks Creating (6)",
			ready: ready("False", "Creating"), claim: parked,
			want: metav1.Condition{Type: "Ready", Status: "False", Reason: "Parked", Message: "Claimed: Held by b.", ObservedGeneration: 2},
		},
		{
			name:  "given a TaskRunning ready and a Claimed claim then ready stays False with TaskRunning",
			ready: ready("False", "TaskRunning"), claim: claimed,
			want: ready("False", "TaskRunning"),
		},
		{
			name:  "given both True with ready Completed (1) then the claim's Claimed (2) wins",
			ready: ready("True", "Completed"), claim: claimed,
			want: metav1.Condition{Type: "Ready", Status: "True", Reason: "Claimed", Message: `Claimed: Holds key "k".`, ObservedGeneration: 2},
		},
		{
			name:  "given both True with ready Healthy (3) then ready's reason wins",
			ready: ready("True", "Healthy"), claim: claimed,
			want: ready("True", "Healthy"),
		},
		{
			name:  "given both True at one tier then ready wins the tie",
			ready: ready("True", "Operational"), claim: claimed,
			want: ready("True", "Operational"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := conditions.FoldReady(tc.ready, tc.claim)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FoldReady (-want +got):\n%s", diff)
			}
		})
	}
}
