package claimmw_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// Issue 17 item 3: with WithFairness a sibling counts only while it could
// take the key; a free key never waits for an older object parked
// elsewhere. Attack: the younger object's first pass sees the older one
// before the older one's first condition (no condition: it counts), so the
// younger yields (NotFirst). The older one then parks on another key. The
// younger must be woken and take the free key, not wait for a resync.
func TestAttack17_FairnessYieldToNotYetParkedSiblingDoesNotStarve(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithFairness()}})
	// Given z holds j
	f.createWidget(t, "z", "j")
	f.waitForReason(t, "z", conditions.ReasonClaimed, 10*time.Second)
	// When w (names j and k, so it parks on j) and x (names k) are created back to back
	f.createWidget(t, "w", "j", "k")
	f.createWidget(t, "x", "k")
	f.waitForReason(t, "w", conditions.ReasonParked, 10*time.Second)
	// Then x holds k soon, whatever its first pass saw
	eventually(t, wakeWithin, func() (bool, string) {
		c := f.claimed(t, "x")
		return c.Reason == string(conditions.ReasonClaimed), fmt.Sprintf("x %s: %s", c.Reason, c.Message)
	})
}

// TestAttack17_FairnessStaleParkedSiblingDoesNotStarve: a tenant edits its
// older, parked object (same keys, reordered: a new generation), so its
// condition is stale for a moment and it counts as a sibling again; the
// younger object created in that moment must still get the free key soon.
func TestAttack17_FairnessStaleParkedSiblingDoesNotStarve(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithFairness()}})
	// Given z holds j, and the older w (j, k) is parked on j
	f.createWidget(t, "z", "j")
	f.waitForReason(t, "z", conditions.ReasonClaimed, 10*time.Second)
	f.createWidget(t, "w", "j", "k")
	f.waitForReason(t, "w", conditions.ReasonParked, 10*time.Second)
	// When w's spec is edited (new generation, same keys) and x (k) is created at once
	f.edit(t, "w", func(w *testcrd.Widget) { w.Spec.Keys = []string{"k", "j"} })
	f.createWidget(t, "x", "k")
	// Then x holds k soon
	eventually(t, wakeWithin, func() (bool, string) {
		c := f.claimed(t, "x")
		return c.Reason == string(conditions.ReasonClaimed), fmt.Sprintf("x %s: %s", c.Reason, c.Message)
	})
}
