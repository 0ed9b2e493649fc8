package claimmw

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ocf-claim/claim/pkg/conditions"
)

// TestAConditionWriteWithAnUnknownOutcomeCountsAsEitherAnswer pins the
// memory of the last condition written: after a write whose answer was an
// error (it may have been applied all the same), the object may say what
// was written or what it said before: a pass judges as if it may say
// Claimed when either does (it is told to stop) and as if it may not when
// either does not (a cached Claimed is read again uncached), until a write
// succeeds or an uncached read shows what it says.
func TestAConditionWriteWithAnUnknownOutcomeCountsAsEitherAnswer(t *testing.T) {
	obj := types.NamespacedName{Namespace: "ns", Name: "alpha"}
	claimed := conditions.ForKeys(conditions.Claimed, []string{"k"}, 1)
	parked := conditions.New(conditions.Claimed, conditions.ReasonParked, "Key k is held elsewhere.", 1)
	type judged struct{ StaleClaimed, SaidClaimed bool }
	for _, tc := range []struct {
		name  string
		steps func(w *writtenConditions)
		want  judged
	}{
		{"given nothing written then neither", func(*writtenConditions) {}, judged{}},
		{"given Claimed written then it said Claimed", func(w *writtenConditions) { w.note(obj, claimed) }, judged{SaidClaimed: true}},
		{"given Parked written then a cached Claimed is stale", func(w *writtenConditions) { w.note(obj, parked) }, judged{StaleClaimed: true}},
		{"given Claimed and then a Parked write whose answer was an error then both", func(w *writtenConditions) { w.note(obj, claimed); w.attempt(obj, parked) }, judged{true, true}},
		{"given Parked and then a Claimed write whose answer was an error then both", func(w *writtenConditions) { w.note(obj, parked); w.attempt(obj, claimed) }, judged{true, true}},
		{"given Parked and then a Parked write whose answer was an error then it did not say Claimed", func(w *writtenConditions) { w.note(obj, parked); w.attempt(obj, parked) }, judged{StaleClaimed: true}},
		{"given an unanswered write and then an uncached read of Claimed then it said Claimed", func(w *writtenConditions) { w.attempt(obj, parked); w.note(obj, claimed) }, judged{SaidClaimed: true}},
		{"given a forgotten object then neither", func(w *writtenConditions) { w.attempt(obj, claimed); w.forget(obj) }, judged{}},
		{"given a Claimed condition that is False then it did not say Claimed", func(w *writtenConditions) {
			c := claimed
			c.Status = metav1.ConditionFalse
			w.note(obj, c)
		}, judged{StaleClaimed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &writtenConditions{}
			tc.steps(w)
			if diff := cmp.Diff(tc.want, judged{w.staleClaimed(obj), w.saidClaimed(obj)}); diff != "" {
				t.Errorf("judged (-want +got):\n%s", diff)
			}
		})
	}
}

// TestACachedConditionOtherThanTheLastWrittenHereLags pins when a pass
// reads its object's condition again before it is told to release records:
// whenever the cache shows another condition than the one this process last
// wrote (or read uncached), whenever it wrote or read nothing for it (a
// restarted process), or a write's answer is not known.
func TestACachedConditionOtherThanTheLastWrittenHereLags(t *testing.T) {
	obj := types.NamespacedName{Namespace: "ns", Name: "alpha"}
	claimed := conditions.ForKeys(conditions.Claimed, []string{"k"}, 1)
	stopping := conditions.New(conditions.Claimed, conditions.ReasonStopping, stoppingOnly+`"j", "k". Waiting.`, 1)
	for _, tc := range []struct {
		name   string
		steps  func(w *writtenConditions)
		cached metav1.Condition
		want   bool
	}{
		{"given nothing written here (a restarted process) then it may lag", func(*writtenConditions) {}, stopping, true},
		{"given the cache shows the last write then it does not lag", func(w *writtenConditions) { w.note(obj, claimed) }, claimed, false},
		{"given the cache shows an earlier write then it lags", func(w *writtenConditions) { w.note(obj, stopping); w.note(obj, claimed) }, stopping, true},
		{"given a write whose answer is not known then it lags", func(w *writtenConditions) { w.note(obj, stopping); w.attempt(obj, claimed) }, stopping, true},
		{"given an uncached read after an unanswered write then the cache showing it does not lag", func(w *writtenConditions) { w.attempt(obj, claimed); w.note(obj, stopping) }, stopping, false},
		{"given the same condition for another generation then it lags", func(w *writtenConditions) {
			c := claimed
			c.ObservedGeneration = 2
			w.note(obj, c)
		}, claimed, true},
		{"given a forgotten object then it may lag", func(w *writtenConditions) { w.note(obj, claimed); w.forget(obj) }, stopping, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &writtenConditions{}
			tc.steps(w)
			if got := w.lags(obj, tc.cached); got != tc.want {
				t.Errorf("lags = %t, want %t", got, tc.want)
			}
		})
	}
}
