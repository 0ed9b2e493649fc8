package claimmw_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

func TestTwoWidgetsNamingOneKeyOneHoldsTheOtherParks(t *testing.T) {
	f := start(t, setup{})
	// Given Widget a holding key k
	f.createAndWait(t, "a", conditions.ReasonClaimed, "k")
	// When Widget b names k too
	f.createWidget(t, "b", "k")
	// Then b is parked with a message naming a as the holder
	c := f.waitForReason(t, "b", conditions.ReasonParked, 10*time.Second)
	if c.Status != metav1.ConditionFalse {
		t.Errorf("b: status %s, want False", c.Status)
	}
	mustContain(t, "b's message", c.Message, `"k"`, "Widget "+f.ns+"/a")
	// And a is Claimed and its inner reconciler ran with its grant
	a := f.claimed(t, "a")
	if a.Status != metav1.ConditionTrue {
		t.Errorf("a: claim condition %+v, want True", a)
	}
	calls := f.inner.callsOf("a")
	if len(calls) == 0 {
		t.Fatal("inner reconciler never ran for the holder a")
	}
	grants := claimmw.GrantsFrom(ctxWith(calls[0].state))
	if len(grants) != 1 || grants[0].Key != "k" || grants[0].Token.IsZero() {
		t.Errorf("a's grants = %+v, want key k with a token", grants)
	}
	// And the inner reconciler was never called for b
	if calls := f.inner.callsOf("b"); len(calls) != 0 {
		t.Errorf("inner reconciler ran %d times for the parked b", len(calls))
	}
}

func TestParkedWidgetRunsInnerInParkedModeWhenAskedTo(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WhileParked(claimmw.RunInnerWhileParked)}})
	// Given a holds k
	f.createAndWait(t, "a", conditions.ReasonClaimed, "k")
	// When b names k
	f.createAndWait(t, "b", conditions.ReasonParked, "k")
	// Then b's inner reconciler ran with a parked state and no grants
	eventually(t, 5*time.Second, func() (bool, string) {
		return len(f.inner.callsOf("b")) > 0, "inner reconciler never ran for the parked b"
	})
	got := f.inner.callsOf("b")[0]
	if !got.hasState || got.state.Granted || len(got.state.Grants) != 0 {
		t.Fatalf("b's state = %+v (present %v), want not granted, no grants", got.state, got.hasState)
	}
	if diff := cmp.Diff(string(conditions.ReasonParked), got.state.Condition.Reason); diff != "" {
		t.Errorf("b's state condition reason (-want +got):\n%s", diff)
	}
}

func ctxWith(s claimmw.State) context.Context {
	return claimmw.WithStateForTest(context.Background(), s)
}
