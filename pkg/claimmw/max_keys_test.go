package claimmw_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// At most WithMaxKeys (default 32) keys per object, InvalidKey beyond, no
// records written, even when the 33rd key is added by an edit to an object
// that already holds 32 (the pass starts from a holder that holds records).
func TestAThirtyThirdKeyAddedByEditWritesNoRecord(t *testing.T) {
	f := start(t, setup{})
	keys := make([]string, 32)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%02d", i)
	}
	// Given a widget that holds 32 keys
	f.createWidget(t, "w", keys...)
	f.waitForReason(t, "w", conditions.ReasonClaimed, 30*time.Second)
	// When a 33rd key is added by edit
	f.edit(t, "w", func(w *testcrd.Widget) { w.Spec.Keys = append(append([]string{}, keys...), "k32") })
	// Then it is InvalidKey and no record of the 33rd key is written
	cond := f.waitForReason(t, "w", conditions.ReasonInvalidKey, 20*time.Second)
	time.Sleep(time.Second)
	if f.leaseExists(t, "k32") {
		t.Errorf("a record of the 33rd key was written (condition %s: %s)", cond.Reason, cond.Message)
	}
	if len(cond.Message) > conditions.MaxMessageLength {
		t.Errorf("condition message is %d bytes", len(cond.Message))
	}
}
