package claimmw_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// TestStateConditionIsTheConditionTheMiddlewareSet pins State's contract
// ("Condition is the claim condition as the middleware set it", to be folded
// into Ready with conditions.FoldReady): the inner pass gets the condition
// as written, its message cut to conditions.MaxMessageLength, never the
// uncut one.
func TestStateConditionIsTheConditionTheMiddlewareSet(t *testing.T) {
	long := strings.Repeat("the storage reference names a backend that does not exist; ", 400) // ~24 KB
	keys := func(_ context.Context, _ client.Object) ([]string, error) { return nil, errors.New(long) }
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithKeys(keys), claimmw.WhileParked(claimmw.RunInnerWhileParked)}})
	// Given a Widget whose keys cannot be computed, with a long error
	f.createWidget(t, "w", "k")
	// When the middleware judges it InvalidKey and runs the inner pass
	written := f.waitForReason(t, "w", conditions.ReasonInvalidKey, 10*time.Second)
	eventually(t, 5*time.Second, func() (bool, string) { return len(f.inner.callsOf("w")) > 0, "no inner pass" })
	// Then the State's condition is the one written
	got := f.inner.callsOf("w")[0].state.Condition
	if got.Message != written.Message {
		t.Errorf("State.Condition.Message is %d bytes, the written condition's %d (MaxMessageLength %d): the inner pass folds a condition the middleware did not set",
			len(got.Message), len(written.Message), conditions.MaxMessageLength)
	}
}

// TestStateConditionOnTheDeletionPathFoldsIntoATypedReady: an ocf core
// computes Ready on every pass it runs, and the deletion pass is one (the
// example's ReconcileDatabase is called with Deleting). State.Condition
// there folds with FoldReady into a Ready with a typed reason, never a
// False Ready with an empty reason and the message ": ", which a kubebuilder
// CRD rejects.
func TestStateConditionOnTheDeletionPathFoldsIntoATypedReady(t *testing.T) {
	f := start(t, setup{})
	// Given w holds k
	f.createAndWait(t, "w", conditions.ReasonClaimed, "k")
	// When w is deleted
	f.deleteWidgetAsync(t, "w")
	var del *call
	eventually(t, 10*time.Second, func() (bool, string) {
		for _, c := range f.inner.callsOf("w") {
			if c.state.Deleting {
				del = &c
				return true, ""
			}
		}
		return false, "no deletion pass"
	})
	// Then the inner pass can fold its claim condition into a Ready with a
	// typed reason
	ready := conditions.FoldReady(metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Operational", Message: "ok"}, del.state.Condition)
	if ready.Reason == "" {
		t.Errorf("deletion pass: State.Condition = %+v; FoldReady gives Ready %s with reason %q and message %q",
			del.state.Condition, ready.Status, ready.Reason, ready.Message)
	}
}
