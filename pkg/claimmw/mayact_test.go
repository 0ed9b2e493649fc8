package claimmw

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/conditions"
)

func TestWhichConditionsMeanAnObjectMayActForItsKeys(t *testing.T) {
	cond := func(r conditions.Reason) metav1.Condition {
		return conditions.New(conditions.Claimed, r, "m", 1)
	}
	for _, tc := range []struct {
		name string
		c    metav1.Condition
		want bool
	}{
		{"given Claimed then it may act", cond(conditions.ReasonClaimed), true},
		{"given Stopping (lost, not yet stopped) then it may act", cond(conditions.ReasonStopping), true},
		{"given Parked (told, and stopped) then it does not act", cond(conditions.ReasonParked), false},
		{"given a claim error it was told of then it does not act", cond(conditions.ReasonClaimError), false},
		{"given WaitingForHandover then it does not act", cond(conditions.ReasonWaitingForHandover), false},
		{"given no keys then it acts for none", cond(conditions.ReasonNoKeys), false},
		{"given no condition then it never acted", metav1.Condition{}, false},
		{"given Claimed written False by hand then it does not act", metav1.Condition{Type: "Claimed", Reason: "Claimed", Status: metav1.ConditionFalse}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mayAct(tc.c); got != tc.want {
				t.Errorf("mayAct(%s/%s) = %t, want %t", tc.c.Status, tc.c.Reason, got, tc.want)
			}
		})
	}
}

func TestWhenAParkedPassMustTellTheInnerReconcilerToStop(t *testing.T) {
	for _, tc := range []struct {
		name     string
		was      previous
		givingUp int
		want     bool
	}{
		{"given it was Claimed then it is told", previous{claimed: true}, 0, true},
		{"given it is Stopping (an earlier told pass failed) then it is told again", previous{stopping: true}, 0, true},
		{"given it gives keys up then it is told", previous{}, 1, true},
		{"given it was parked and stopped then it is not told", previous{}, 0, false},
		{"given a claim error it was told of then it is not told again", previous{failed: true}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustTell(tc.was, tc.givingUp); got != tc.want {
				t.Errorf("mustTell(%+v, %d) = %t, want %t", tc.was, tc.givingUp, got, tc.want)
			}
		})
	}
}

func TestTheStoppingConditionKeepsWhatBlocksTheObject(t *testing.T) {
	parked := conditions.New(conditions.Claimed, conditions.ReasonParked, `Key "k" is held by Widget ns/other.`, 3)
	got := stopping(parked)
	if got.Reason != string(conditions.ReasonStopping) || got.Status != metav1.ConditionFalse || got.ObservedGeneration != 3 || got.Type != parked.Type {
		t.Errorf("stopping(parked) = %+v", got)
	}
	want := `Key "k" is held by Widget ns/other; its reconciler is told to stop acting for its keys until a pass succeeds.`
	if got.Message != want {
		t.Errorf("message = %q, want %q", got.Message, want)
	}
}
