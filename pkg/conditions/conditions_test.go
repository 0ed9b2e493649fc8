package conditions_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

func TestForOutcomeMapsEveryReason(t *testing.T) {
	holder := claim.Holder{Kind: "Widget", Namespace: "ns", Name: "a", UID: "u-a"}
	// claimed is the condition of an object at generation 3.
	claimed := func(status metav1.ConditionStatus, reason, message string) metav1.Condition {
		return metav1.Condition{Type: "Claimed", Status: status, Reason: reason, Message: message, ObservedGeneration: 3}
	}
	for _, tc := range []struct {
		name string
		o    claim.Outcome
		want metav1.Condition
	}{
		{name: "given a fresh grant then Claimed True with a key message", o: claim.Outcome{Reason: claim.ReasonAcquired, Key: "k", Holder: holder, Message: "Key \"k\" acquired by Widget ns/a."}, want: claimed(metav1.ConditionTrue, "Claimed", `Holds key "k".`)},
		{name: "given a key already held then the same condition as a fresh grant", o: claim.Outcome{Reason: claim.ReasonHeld, Key: "k", Holder: holder, Message: "Key \"k\" is held by Widget ns/a."}, want: claimed(metav1.ConditionTrue, "Claimed", `Holds key "k".`)},
		{name: "given a takeover then Claimed True", o: claim.Outcome{Reason: claim.ReasonTakenOver, Key: "k", Holder: holder}, want: claimed(metav1.ConditionTrue, "Claimed", `Holds key "k".`)},
		{name: "given another live holder then Parked with the outcome's message", o: claim.Outcome{Reason: claim.ReasonHeldElsewhere, Key: "k", Message: "held by b"}, want: claimed(metav1.ConditionFalse, "Parked", "held by b")},
		{name: "given a closed gate then WaitingForHandover", o: claim.Outcome{Reason: claim.ReasonWaitingForHandover, Key: "k", Message: "waits"}, want: claimed(metav1.ConditionFalse, "WaitingForHandover", "waits")},
		{name: "given a foreign record then Foreign", o: claim.Outcome{Reason: claim.ReasonForeign, Key: "k", Message: "blocked"}, want: claimed(metav1.ConditionFalse, "Foreign", "blocked")},
		{name: "given an older sibling then NotFirst", o: claim.Outcome{Reason: claim.ReasonNotFirst, Key: "k", Message: "older"}, want: claimed(metav1.ConditionFalse, "NotFirst", "older")},
		{name: "given a reason this package does not know then ClaimError Unknown", o: claim.Outcome{Reason: "Invented", Key: "k", Message: "?"}, want: claimed(metav1.ConditionFalse, "ClaimError", "?")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := conditions.ForOutcome(conditions.Claimed, tc.o, 3)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ForOutcome (-want +got):\n%s", diff)
			}
		})
	}
}

func TestForKeys(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys []string
		want metav1.Condition
	}{
		{"given no keys then NoKeys True", nil, metav1.Condition{Type: "Claimed", Status: metav1.ConditionTrue, Reason: "NoKeys", Message: "Names no key to claim.", ObservedGeneration: 1}},
		{"given two keys then both named", []string{"a", "b"}, metav1.Condition{Type: "Claimed", Status: metav1.ConditionTrue, Reason: "Claimed", Message: `Holds keys "a", "b".`, ObservedGeneration: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, conditions.ForKeys(conditions.Claimed, tc.keys, 1)); diff != "" {
				t.Errorf("ForKeys (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPrioritiesAreOcfs(t *testing.T) {
	for _, tc := range []struct {
		reason string
		want   conditions.Priority
	}{
		// Given the claim's reasons, then they sit in ocf's tiers
		{"Claimed", 2}, {"NoKeys", 2},
		{"NotFirst", 10}, {"Parked", 10}, {"WaitingForHandover", 10},
		{"ClaimError", 20}, {"Foreign", 20}, {"InvalidKey", 20},
		// Given ocf's own status names, then they keep ocf's priorities
		{"Error", 20}, {"Down", 19}, {"Degraded", 18}, {"Failing", 13}, {"Blocked", 10},
		{"PrerequisiteNotMet", 10}, {"Scaling", 9}, {"Healthy", 3}, {"Completed", 1},
		// Given anything else, then it ranks 0
		{"Available", 0}, {"", 0},
	} {
		if got := conditions.PriorityOf(tc.reason); got != tc.want {
			t.Errorf("PriorityOf(%q) = %d, want %d", tc.reason, got, tc.want)
		}
	}
}

func TestNoReasonIsUnknown(t *testing.T) {
	for _, r := range []conditions.Reason{
		conditions.ReasonClaimed, conditions.ReasonNoKeys, conditions.ReasonNotFirst, conditions.ReasonParked,
		conditions.ReasonWaitingForHandover, conditions.ReasonForeign, conditions.ReasonClaimError, conditions.ReasonInvalidKey,
	} {
		if r.Status() == metav1.ConditionUnknown {
			t.Errorf("%s has status Unknown; ocf never writes Unknown", r)
		}
	}
}

func TestSetReportsChangesWithoutTimestampChurn(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	existing := metav1.Condition{Type: "Claimed", Status: metav1.ConditionTrue, Reason: "Claimed", Message: `Holds key "k".`, ObservedGeneration: 2, LastTransitionTime: then}
	for _, tc := range []struct {
		name        string
		next        metav1.Condition
		wantChanged bool
		wantMoved   bool // LastTransitionTime moved away from then
	}{
		{"given the same condition then nothing changes", conditions.ForKeys(conditions.Claimed, []string{"k"}, 2), false, false},
		{"given a new generation then changed, time kept", conditions.ForKeys(conditions.Claimed, []string{"k"}, 3), true, false},
		{"given a new message then changed, time kept", conditions.ForKeys(conditions.Claimed, []string{"k", "l"}, 2), true, false},
		{"given a new status then changed, time moved", conditions.New(conditions.Claimed, conditions.ReasonParked, "held", 2), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conds := []metav1.Condition{existing}
			changed := conditions.Set(&conds, tc.next)
			if changed != tc.wantChanged {
				t.Errorf("Set changed = %v, want %v", changed, tc.wantChanged)
			}
			if moved := !conds[0].LastTransitionTime.Equal(&then); moved != tc.wantMoved {
				t.Errorf("LastTransitionTime moved = %v, want %v", moved, tc.wantMoved)
			}
			want := tc.next
			if diff := cmp.Diff(want, conds[0], cmpopts.IgnoreFields(metav1.Condition{}, "LastTransitionTime")); diff != "" {
				t.Errorf("condition after Set (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFoldReady(t *testing.T) {
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Available", Message: "all pods ready", ObservedGeneration: 4}
	failing := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Error", Message: "the database refused the schema", ObservedGeneration: 4}
	scaling := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Scaling", Message: "1 of 3 pods ready", ObservedGeneration: 4}
	healthy := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Healthy", Message: "all pods ready", ObservedGeneration: 4}
	for _, tc := range []struct {
		name    string
		ready   metav1.Condition
		claimed metav1.Condition
		want    metav1.Condition
	}{
		{
			name:    "given a True claim and a True Ready that ranks higher (Healthy) then the consumer's Ready stands",
			ready:   healthy,
			claimed: conditions.ForKeys(conditions.Claimed, []string{"k"}, 4),
			want:    healthy,
		},
		{
			name:    "given a True claim and a True Ready with a reason of the consumer's own then the consumer's Ready stands",
			ready:   ready,
			claimed: conditions.ForKeys(conditions.Claimed, []string{"k"}, 4),
			want:    ready,
		},
		{
			name:    "given a parked claim and a True Ready then Ready is False with the claim's reason",
			ready:   ready,
			claimed: conditions.New(conditions.Claimed, conditions.ReasonParked, "Key \"k\" is held by Widget ns/b.", 4),
			want:    metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Parked", Message: "Claimed: Key \"k\" is held by Widget ns/b.", ObservedGeneration: 4},
		},
		{
			name:    "given a parked claim and a Ready in Error then the Error, which ranks higher, stands",
			ready:   failing,
			claimed: conditions.New(conditions.Claimed, conditions.ReasonParked, "held", 4),
			want:    failing,
		},
		{
			name:    "given an invalid key and a Scaling Ready then the invalid key, which ranks higher, is the reason",
			ready:   scaling,
			claimed: conditions.New(conditions.Claimed, conditions.ReasonInvalidKey, "bad", 4),
			want:    metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "InvalidKey", Message: "Claimed: bad", ObservedGeneration: 4},
		},
		{
			name:    "given a claim error then Ready is False, never Unknown",
			ready:   ready,
			claimed: conditions.New(conditions.Claimed, conditions.ReasonClaimError, "timeout", 5),
			want:    metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "ClaimError", Message: "Claimed: timeout", ObservedGeneration: 5},
		},
		{
			name:    "given a True claim and a consumer Ready that is Unknown then the result is False, never Unknown",
			ready:   metav1.Condition{Type: "Ready", Status: metav1.ConditionUnknown, Reason: "Unknown", Message: "not reconciled yet"},
			claimed: conditions.ForKeys(conditions.Claimed, []string{"k"}, 1),
			want:    metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Unknown", Message: "not reconciled yet", ObservedGeneration: 1},
		},
		{
			name:    "given no Ready of the consumer's own then a Ready is made",
			claimed: conditions.New(conditions.Claimed, conditions.ReasonInvalidKey, "bad", 1),
			want:    metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "InvalidKey", Message: "Claimed: bad", ObservedGeneration: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.ready
			got := conditions.FoldReady(tc.ready, tc.claimed)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("FoldReady (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.ready); diff != "" {
				t.Errorf("FoldReady changed its input (-before +after):\n%s", diff)
			}
		})
	}
}

func TestClaimedConditionsForDifferentKeySetsNeverReadAlike(t *testing.T) {
	long := strings.Repeat("p", conditions.MaxQuotedKeyLength)
	for _, tc := range []struct {
		name string
		a, b []string
	}{
		{"a key past the quoted ones", []string{"a", "b", "c", "d", "e", "f", "k"}, []string{"a", "b", "c", "d", "e", "f", "z"}},
		{"a long key that differs past the quoted bytes", []string{long + "-old"}, []string{long + "-new"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := conditions.ForKeys("Claimed", tc.a, 1).Message, conditions.ForKeys("Claimed", tc.b, 1).Message
			if a == b {
				t.Errorf("both key sets read %q", a)
			}
		})
	}
	// A key set that is quoted whole carries no digest.
	if got, want := conditions.ForKeys("Claimed", []string{"a", "b"}, 1).Message, `Holds keys "a", "b".`; got != want {
		t.Errorf("message = %q, want %q", got, want)
	}
}
