package claimmw

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// TestSiblingCountsOnlyForItsGraceWithoutACondition pins the fairness
// decision: a sibling without a claim condition for its current generation
// counts for the grace after it was created or changed, and no longer; one
// whose condition says it cannot take the key never counts; any other
// counts with no bound.
func TestSiblingCountsOnlyForItsGraceWithoutACondition(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const grace = time.Minute
	cond := func(reason conditions.Reason, status metav1.ConditionStatus, gen int64) *metav1.Condition {
		return &metav1.Condition{Type: string(conditions.Claimed), Reason: string(reason), Status: status, ObservedGeneration: gen}
	}
	type want struct {
		Counts bool
		Until  time.Time
	}
	tests := []struct {
		name string
		c    *metav1.Condition
		gen  int64
		now  time.Time
		want want
	}{
		{"given no condition within the grace then it counts until the grace ends", nil, 1, t0.Add(30 * time.Second), want{true, t0.Add(grace)}},
		{"given no condition after the grace then it does not count", nil, 1, t0.Add(grace), want{false, t0.Add(grace)}},
		{"given a stale condition within the grace then it counts", cond(conditions.ReasonParked, metav1.ConditionFalse, 1), 2, t0.Add(time.Second), want{true, t0.Add(grace)}},
		{"given a stale condition after the grace then it does not count", cond(conditions.ReasonParked, metav1.ConditionFalse, 1), 2, t0.Add(time.Hour), want{false, t0.Add(grace)}},
		{"given a current Parked condition then it does not count", cond(conditions.ReasonParked, metav1.ConditionFalse, 1), 1, t0, want{}},
		{"given a current ClaimError condition then it does not count", cond(conditions.ReasonClaimError, metav1.ConditionFalse, 1), 1, t0, want{}},
		{"given a current Claimed condition then it counts without bound", cond(conditions.ReasonClaimed, metav1.ConditionTrue, 1), 1, t0.Add(time.Hour), want{Counts: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counts, until := siblingCounts(tt.c, tt.gen, t0, grace, tt.now)
			if diff := cmp.Diff(tt.want, want{counts, until}); diff != "" {
				t.Errorf("siblingCounts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestYieldingAFreeKeyIsBounded: an object yields a free key (NotFirst)
// for at most the grace after its claim condition turned false.
func TestYieldingAFreeKeyIsBounded(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	const grace = time.Minute
	notFirst := &metav1.Condition{Reason: string(conditions.ReasonNotFirst), Status: metav1.ConditionFalse, ObservedGeneration: 3, LastTransitionTime: metav1.NewTime(t0)}
	tests := []struct {
		name      string
		c         *metav1.Condition
		gen       int64
		now       time.Time
		wantDone  bool
		wantUntil time.Time
	}{
		{"given NotFirst within the grace then it still yields", notFirst, 3, t0.Add(59 * time.Second), false, t0.Add(grace)},
		{"given NotFirst for the whole grace then it yields no more", notFirst, 3, t0.Add(grace), true, t0.Add(grace)},
		{"given NotFirst for an older generation then the bound starts again", notFirst, 4, t0.Add(time.Hour), false, time.Time{}},
		{"given no condition then it may yield", nil, 1, t0, false, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done, until := yieldedEnough(tt.c, tt.gen, grace, tt.now)
			if done != tt.wantDone || !until.Equal(tt.wantUntil) {
				t.Errorf("yieldedEnough = %v, %s; want %v, %s", done, until, tt.wantDone, tt.wantUntil)
			}
		})
	}
}

// TestADeletedObjectWakesOnlyYieldersItGoesBefore pins the order a deletion
// wakes NotFirst objects by: the deleted object goes before an object, in
// any namespace, when it was created earlier, or at the same time with a
// smaller namespace/name; one without a creation time goes before nobody.
func TestADeletedObjectWakesOnlyYieldersItGoesBefore(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	widget := func(ns, name string, created time.Time) *testcrd.Widget {
		return &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created)}}
	}
	tests := []struct {
		name    string
		deleted *testcrd.Widget
		yielder *testcrd.Widget
		wakesIt bool
	}{
		{"older, another namespace", widget("a", "old", t0), widget("b", "young", t0.Add(time.Second)), true},
		{"younger, another namespace (a tenant's short-lived object)", widget("a", "noise", t0.Add(time.Second)), widget("b", "victim", t0), false},
		{"same time, smaller namespace/name", widget("a", "x", t0), widget("b", "x", t0), true},
		{"same time, larger namespace/name", widget("b", "x", t0), widget("a", "x", t0), false},
		{"no creation time", widget("a", "x", time.Time{}), widget("b", "x", t0), false},
		{"yielder without a creation time", widget("a", "x", t0), widget("b", "x", time.Time{}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := goesBefore(tt.deleted, tt.yielder); got != tt.wakesIt {
				t.Errorf("goesBefore(%s, %s) = %t, want %t", tt.deleted.Name, tt.yielder.Name, got, tt.wakesIt)
			}
		})
	}
}
