package conditions_test

import (
	"testing"
	"time"

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
			// FeatureGateError has a priority: Parked does not hide it.
			ready: ready("False", "FeatureGateError"), claim: parked,
			want: ready("False", "FeatureGateError"),
		},
		{name: "given a FeatureGateError and an InvalidKey claim then the tie keeps ready's reason", ready: ready("False", "FeatureGateError"), claim: invalid, want: ready("False", "FeatureGateError")},
		{name: "given a Creating component and a Parked claim then Parked (10) outranks Creating (6)", ready: ready("False", "Creating"), claim: parked, want: metav1.Condition{Type: "Ready", Status: "False", Reason: "Parked", Message: "Claimed: Held by b.", ObservedGeneration: 2}},
		{name: "given a TaskRunning ready and a Claimed claim then ready stays False with TaskRunning", ready: ready("False", "TaskRunning"), claim: claimed, want: ready("False", "TaskRunning")},
		{name: "given both True with ready Completed (1) then the claim's Claimed (2) wins", ready: ready("True", "Completed"), claim: claimed, want: metav1.Condition{Type: "Ready", Status: "True", Reason: "Claimed", Message: `Claimed: Holds key "k".`, ObservedGeneration: 2}},
		{name: "given both True with ready Healthy (3) then ready's reason wins", ready: ready("True", "Healthy"), claim: claimed, want: ready("True", "Healthy")},
		{name: "given both True at one tier then ready wins the tie", ready: ready("True", "Operational"), claim: claimed, want: ready("True", "Operational")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := conditions.FoldReady(tc.ready, tc.claim)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FoldReady (-want +got):\n%s", diff)
			}
		})
	}
}

// FoldReady aggregates as ocf does, with typed reasons, never Unknown.

// TestFoldReadyNeverReturnsAnUntypedReason: the claim condition an inner
// reconciler folds is State.Condition, which the middleware leaves zero on
// the deletion path (claimmw's finalize builds State{Deleting, Grants}
// only). Folding a True Ready with it must not produce a False Ready
// without a reason: kubebuilder CRDs reject it (reason minLength 1, pattern)
// and consumers keying on the reason get nothing.
func TestFoldReadyNeverReturnsAnUntypedReason(t *testing.T) {
	// Given a consumer's Ready that is True, with an ocf reason
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Operational", Message: "Every component is operational.", ObservedGeneration: 3}
	// When it is folded with the claim condition of a deletion pass (zero)
	got := conditions.FoldReady(ready, metav1.Condition{})
	// Then the result has a typed, non-empty reason and a message that is
	// not a bare ": "
	if got.Reason == "" {
		t.Errorf("FoldReady(True Ready, zero claim) = %+v: status %s with an empty reason", got, got.Status)
	}
	if got.Message == ": " {
		t.Errorf("FoldReady(True Ready, zero claim) message = %q", got.Message)
	}
}

// TestFoldReadyThenSetMovesLastTransitionTimeOnAFlip: FoldReady keeps
// ready's LastTransitionTime when it turns ready False; Set then stamps that
// old time on the transition (meta.SetStatusCondition uses a non-zero
// LastTransitionTime as given), so Ready reads as False since the moment it
// became True.
func TestFoldReadyThenSetMovesLastTransitionTimeOnAFlip(t *testing.T) {
	// Given an object whose Ready has been True since an hour ago
	since := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	stored := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Operational", Message: "ok", LastTransitionTime: since, ObservedGeneration: 1}
	conds := []metav1.Condition{stored}
	// When a pass folds the stored Ready with a Parked claim and sets it
	parked := conditions.New(conditions.Claimed, conditions.ReasonParked, "Another holds it.", 1)
	got := conditions.FoldReady(stored, parked)
	if !conditions.Set(&conds, got) {
		t.Fatal("Set reported no change for a True→False flip")
	}
	// Then Ready is False with a transition time of now, not an hour ago
	if lt := conds[0].LastTransitionTime; !lt.After(since.Add(30 * time.Minute)) {
		t.Errorf("Ready flipped True→False but its LastTransitionTime is %s, the time it became True (%s)", lt, since)
	}
}

// TestFoldReadyFoldsAsDocumented pins the documented folding: unanimity, priority with ready winning ties, the claim
// message prefixed with its type, never Unknown, the max generation.
func TestFoldReadyFoldsAsDocumented(t *testing.T) {
	claimed := conditions.New(conditions.Claimed, conditions.ReasonClaimed, "Holds key \"k\".", 7)
	parked := conditions.New(conditions.Claimed, conditions.ReasonParked, "Held by b.", 7)
	invalid := conditions.New(conditions.Claimed, conditions.ReasonInvalidKey, "Bad key.", 2)
	for _, tc := range []struct {
		name               string
		ready, claim       metav1.Condition
		status             metav1.ConditionStatus
		reason, message    string
		observedGeneration int64
	}{
		{"both true", metav1.Condition{Status: "True", Reason: "Operational", Message: "ok", ObservedGeneration: 5}, claimed, "True", "Operational", "ok", 7},
		{"ready Unknown never passes through", metav1.Condition{Status: "Unknown", Reason: "Unknown", Message: "?", ObservedGeneration: 9}, claimed, "False", "Unknown", "?", 9},
		{"ready true claim parked", metav1.Condition{Status: "True", Reason: "Operational", Message: "ok"}, parked, "False", "Parked", "Claimed: Held by b.", 7},
		{"scaling loses to parked", metav1.Condition{Status: "False", Reason: "Scaling", Message: "s"}, parked, "False", "Parked", "Claimed: Held by b.", 7},
		{"blocked ties parked: ready wins", metav1.Condition{Status: "False", Reason: "Blocked", Message: "b"}, parked, "False", "Blocked", "b", 7},
		{"error ties invalid: ready wins", metav1.Condition{Status: "False", Reason: "Error", Message: "e", ObservedGeneration: 4}, invalid, "False", "Error", "e", 4},
		{"invalid beats degraded", metav1.Condition{Status: "False", Reason: "Degraded", Message: "d"}, invalid, "False", "InvalidKey", "Claimed: Bad key.", 2},
		{"unknown-status ready with claim true", metav1.Condition{Status: "Unknown", Reason: "Unknown", Message: "u"}, claimed, "False", "Unknown", "u", 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := conditions.FoldReady(tc.ready, tc.claim)
			if got.Type != "Ready" || got.Status != tc.status || got.Reason != tc.reason || got.Message != tc.message || got.ObservedGeneration != tc.observedGeneration {
				t.Errorf("FoldReady = %s/%s/%s %q @%d, want Ready/%s/%s %q @%d", got.Type, got.Status, got.Reason, got.Message, got.ObservedGeneration,
					tc.status, tc.reason, tc.message, tc.observedGeneration)
			}
		})
	}
}
