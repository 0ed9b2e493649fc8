package claimmw_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// Promise 4 (and "no leak"): a key no longer named is released whenever it
// is held, even when the holder-uid label of the record was removed by hand
// (or written by an older HolderLabels) while the record still names the
// holder in its annotations, so Acquire grants the key to it.
func TestARecordWithoutItsHolderLabelIsStillReleasedWhenNoLongerNamed(t *testing.T) {
	f := start(t, setup{})
	// Given a holds k and b waits for it
	f.aHoldsKAndBWaits(t)
	// And someone removed the holder-uid label from k's Lease
	f.stripHolderLabel(t, "k")
	a, _ := f.widget(t, "a")
	if rec := f.record(t, "k"); !rec.Ours() || rec.Holder.UID != a.UID {
		t.Fatalf("record of k after relabel = %+v, want still a's", rec)
	}
	f.touch(t, "a")
	time.Sleep(500 * time.Millisecond)
	if c := f.claimed(t, "a"); c.Reason != string(conditions.ReasonClaimed) {
		t.Fatalf("a after relabel: %+v, want still Claimed (it still holds k)", c)
	}
	// When a stops naming k
	f.edit(t, "a", func(w *testcrd.Widget) { w.Spec.Keys = []string{"other"} })
	// Then a gives k up and b gets it
	eventually(t, 10*time.Second, func() (bool, string) {
		c := f.claimed(t, "b")
		return c.Reason == string(conditions.ReasonClaimed),
			fmt.Sprintf("b: %+v; record of k: %+v", c, f.record(t, "k"))
	})
}

// Promise 3: no deadlock across key-set edits; an object waiting for a key
// gives up every key after it, even when the later key's Lease lost its
// holder-uid label, so the listing of the object's records misses it.
func TestKeySetEditsConvergeWhenARecordLostItsHolderLabel(t *testing.T) {
	f := start(t, setup{})
	// Given x holds b (its Lease's holder label removed) and y holds a
	f.createAndWait(t, "x", conditions.ReasonClaimed, "b")
	f.stripHolderLabel(t, "b")
	f.createAndWait(t, "y", conditions.ReasonClaimed, "a")
	// When both are edited to name a and b
	f.edit(t, "x", func(w *testcrd.Widget) { w.Spec.Keys = []string{"a", "b"} })
	f.edit(t, "y", func(w *testcrd.Widget) { w.Spec.Keys = []string{"a", "b"} })
	// Then one of them ends up holding both
	f.oneOfXAndYHoldsBoth(t)
}

// Promise 8: the deletion path tells the inner reconciler the keys the
// object still holds, and releases them before the finalizer comes off.
// This holds when the record lost its holder-uid label while its
// annotations still name the object, and Acquire still grants it to the
// object.
func TestTheDeletionPathReleasesARecordThatLostItsHolderLabel(t *testing.T) {
	f := start(t, setup{})
	// Given x holds k, and k's Lease lost its holder label
	f.createAndWait(t, "x", conditions.ReasonClaimed, "k")
	f.stripHolderLabel(t, "k")
	// When x is deleted
	f.deleteWidgetAsync(t, "x")
	f.waitGone(t, "x", 10*time.Second)
	// Then its deletion pass was told it holds k, and the record is gone
	del := deletionCalls(f, "x")
	if len(del) == 0 || len(del[0].Grants) != 1 || del[0].Grants[0].Key != "k" {
		t.Errorf("deletion passes %+v, want the first with Grants [k]", del)
	}
	if rec := f.record(t, "k"); rec.Exists {
		t.Errorf("record of k outlives its deleted holder x: %+v", rec)
	}
}

// A record that names its holder in its annotations but lacks the holder's
// selector label (removed by hand, or written under an older HolderLabels
// while the operator was down) is found by no listing of the holder's
// records. When the holder stops naming its key before any pass of the
// running operator acquired it again (which would stamp the label back),
// the key is still given up, so that a waiter for it is not parked behind
// a holder that no longer names it (docs/middleware.md, Upgrades: "when the
// object stopped naming it, in the pass after the spec change").
func TestARecordWithoutItsHolderLabelIsReleasedWhenItsHolderStopsNamingItWhileTheOperatorIsDown(t *testing.T) {
	ns := env.Namespace(t)
	f, stop := startIn(t, ns, setup{})
	// Given a holds k and b waits for it
	f.aHoldsKAndBWaits(t)
	// And, while the operator is down, k's Lease loses its holder label and
	// a's spec moves to other
	stop()
	f.stripHolderLabel(t, "k")
	f.setKeys(t, "a", "other")
	// When the operator starts again
	f, _ = startIn(t, ns, setup{})
	// Then a acts for other only
	eventually(t, wakeWithin, func() (bool, string) {
		c := f.claimed(t, "a")
		return c.Reason == string(conditions.ReasonClaimed) && !strings.Contains(c.Message, "may still act"),
			fmt.Sprintf("a: %+v", c)
	})
	// And a gave k up, and b gets it
	eventually(t, 10*time.Second, func() (bool, string) {
		c := f.claimed(t, "b")
		return c.Reason == string(conditions.ReasonClaimed),
			fmt.Sprintf("b: %+v; a: %+v; record of k: %+v", c, f.claimed(t, "a"), f.record(t, "k"))
	})
}

// No deadlock across key-set edits, whatever the records were written
// with: an object waiting for a key gives up every key after it, even one
// whose record lacks the holder's selector label and whose holder has not
// acquired it again since (edits made while the operator was down).
func TestKeySetEditsMadeWhileTheOperatorIsDownConvergeWhenARecordLostItsHolderLabel(t *testing.T) {
	ns := env.Namespace(t)
	f, stop := startIn(t, ns, setup{})
	// Given x holds b and y holds a
	f.createAndWait(t, "x", conditions.ReasonClaimed, "b")
	f.createAndWait(t, "y", conditions.ReasonClaimed, "a")
	// And, while the operator is down, b's Lease loses its holder label and
	// both are edited to name a and b
	stop()
	f.stripHolderLabel(t, "b")
	f.setKeys(t, "x", "a", "b")
	f.setKeys(t, "y", "a", "b")
	// When the operator starts again
	f, _ = startIn(t, ns, setup{})
	// Then one of them ends up holding both
	f.oneOfXAndYHoldsBoth(t)
}

// oneOfXAndYHoldsBoth waits until x or y, both edited once to name a and b,
// is Claimed for that spec: no deadlock between them.
func (f *fixture) oneOfXAndYHoldsBoth(t *testing.T) {
	t.Helper()
	eventually(t, 10*time.Second, func() (bool, string) {
		x, y := f.claimed(t, "x"), f.claimed(t, "y")
		holdsBoth := func(c metav1.Condition) bool {
			return c.ObservedGeneration == 2 && c.Reason == string(conditions.ReasonClaimed)
		}
		return holdsBoth(x) || holdsBoth(y),
			fmt.Sprintf("deadlock: x %s %q; y %s %q", x.Reason, x.Message, y.Reason, y.Message)
	})
}
