package claimmw_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// refuseWritesOf is a client interceptor under which every write of the
// Widget named name fails, as when its tenant made it too large for a
// finalizer patch or a policy refuses its updates: its claim condition is
// never written.
func refuseWritesOf(name string) *interceptor.Funcs {
	refuse := func(obj client.Object) error {
		if _, ok := obj.(*testcrd.Widget); ok && obj.GetName() == name {
			return apierrors.NewRequestEntityTooLargeError("injected: the object is too large")
		}
		return nil
	}
	return &interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			if err := refuse(obj); err != nil {
				return err
			}
			return c.Patch(ctx, obj, p, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := refuse(obj); err != nil {
				return err
			}
			return c.Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			if err := refuse(obj); err != nil {
				return err
			}
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if err := refuse(obj); err != nil {
				return err
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}
}

// TestFairnessSiblingWithoutAConditionCountsOnlyForItsGrace: an older
// sibling that never gets a claim condition (every write of it fails) counts
// only for the grace after it was created: a younger object in another
// namespace yields the free key meanwhile, with a message that names what
// it yields to as far as the disclosure rule allows, and takes the key
// when the grace ends, woken then (the requeue is an hour).
func TestFairnessSiblingWithoutAConditionCountsOnlyForItsGrace(t *testing.T) {
	const grace = 3 * time.Second
	r := startTenantRig(t, true, refuseWritesOf("stuck"), claimmw.WithFairness(), claimmw.WithFairnessGrace(grace))
	ctx := context.Background()
	dc := direct(t)
	// Given an older Widget in namespace a whose writes all fail, naming key k
	stuck := &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: r.a, Name: "stuck"}, Spec: testcrd.WidgetSpec{Keys: []string{"free-key"}}}
	if err := dc.Create(ctx, stuck); err != nil {
		t.Fatal(err)
	}
	// Creation times have a one-second resolution: the next object must be younger.
	time.Sleep(1100 * time.Millisecond)
	// When a younger Widget in namespace b names k at once
	if err := dc.Create(ctx, &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: r.b, Name: "young"}, Spec: testcrd.WidgetSpec{Keys: []string{"free-key"}}}); err != nil {
		t.Fatal(err)
	}
	// Then it first yields, told the kind and age of what it yields to, not its name
	r.waitReason(t, r.b, "young", conditions.ReasonNotFirst)
	msg := r.claimedIn(t, r.b, "young").Message
	if !strings.Contains(msg, "older Widget outside this namespace, created ") || strings.Contains(msg, r.a) || strings.Contains(msg, "stuck") {
		t.Errorf("NotFirst message %q: want the kind and creation time of the object yielded to, and neither its namespace nor its name", msg)
	}
	// And it holds the key soon after the grace, though the stuck Widget never gets a condition
	eventually(t, grace+10*time.Second, func() (bool, string) {
		c := r.claimedIn(t, r.b, "young")
		return c.Reason == string(conditions.ReasonClaimed), fmt.Sprintf("young %s: %s", c.Reason, c.Message)
	})
	if c := r.claimedIn(t, r.a, "stuck"); c.Reason != "" {
		t.Fatalf("the stuck Widget got a condition (%s): the test did not refuse its writes", c.Reason)
	}
	if took, end := time.Now(), stuck.CreationTimestamp.Add(grace); took.Before(end) {
		t.Errorf("young took the key at %s, within the older sibling's grace (until %s)", took, end)
	}
}

// With WithFairness a sibling counts only while it could take the key; a
// free key never waits for an older object parked elsewhere. Even when the
// younger object's first pass sees the older one before the older one's
// first condition (no condition: it counts), so the younger yields
// (NotFirst), and the older one then parks on another key, the younger is
// woken and takes the free key, not waiting for a resync.
func TestFairnessYieldingToANotYetParkedSiblingDoesNotStarve(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithFairness()}})
	// Given z holds j
	f.createAndWait(t, "z", conditions.ReasonClaimed, "j")
	// When w (names j and k, so it parks on j) and x (names k) are created back to back
	f.createWidget(t, "w", "j", "k")
	f.createWidget(t, "x", "k")
	f.waitForReason(t, "w", conditions.ReasonParked, 10*time.Second)
	// Then x holds k soon, whatever its first pass saw
	f.waitForReason(t, "x", conditions.ReasonClaimed, wakeWithin)
}

// TestFairnessAStaleParkedSiblingDoesNotStarve: a tenant edits its
// older, parked object (same keys, reordered: a new generation), so its
// condition is stale for a moment and it counts as a sibling again; the
// younger object created in that moment still gets the free key soon.
func TestFairnessAStaleParkedSiblingDoesNotStarve(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithFairness()}})
	// Given z holds j, and the older w (j, k) is parked on j
	f.createAndWait(t, "z", conditions.ReasonClaimed, "j")
	f.createAndWait(t, "w", conditions.ReasonParked, "j", "k")
	// When w's spec is edited (new generation, same keys) and x (k) is created at once
	f.edit(t, "w", func(w *testcrd.Widget) { w.Spec.Keys = []string{"k", "j"} })
	f.createWidget(t, "x", "k")
	// Then x holds k soon
	f.waitForReason(t, "x", conditions.ReasonClaimed, wakeWithin)
}

// TestFairnessAYielderIsWokenWhenItsOlderSiblingParksElsewhere: a younger
// object that yields a free key to an older sibling (NotFirst) is woken as
// soon as that sibling stops counting, because it parks on another key, and
// takes the key then, not when its grace ends.
func TestFairnessAYielderIsWokenWhenItsOlderSiblingParksElsewhere(t *testing.T) {
	// When alpha comes to name j too, and its passes run: it parks on j
	aYielderIsWokenWhenItsOlderSiblingParksOnJ(t, "j", "k")
}

// TestFairnessAYielderIsWokenWhenItsOlderSiblingStopsNamingTheKey: a
// younger object that yields a free key to an older sibling (NotFirst) is
// woken as soon as that sibling's spec stops naming the key, and takes the
// key then, not when its grace ends: the sibling's new keys are not the
// ones the yielder waits for.
func TestFairnessAYielderIsWokenWhenItsOlderSiblingStopsNamingTheKey(t *testing.T) {
	// When alpha's spec names j instead of k, and its passes run: it parks on j
	aYielderIsWokenWhenItsOlderSiblingParksOnJ(t, "j")
}

// aYielderIsWokenWhenItsOlderSiblingParksOnJ: while z holds j, the younger
// bravo yields k to the older alpha, whose passes are held back; alpha's
// spec then names siblingKeys (j first) and its passes run, so that it
// parks on j; bravo must take k at once, not when its grace ends.
func aYielderIsWokenWhenItsOlderSiblingParksOnJ(t *testing.T, siblingKeys ...string) {
	t.Helper()
	f := start(t, setup{workers: 2, opts: []claimmw.Option{claimmw.WithFairness(), claimmw.WithFairnessGrace(time.Hour)}})
	// Given z holds j
	f.createAndWait(t, "z", conditions.ReasonClaimed, "j")
	// And the older alpha names k, its passes held back: it has no
	// condition yet, so it counts as a sibling that could take k
	release := f.holdBackPasses("alpha")
	f.createWidget(t, "alpha", "k")
	// Creation times have a one-second resolution: the next object must be younger.
	time.Sleep(1100 * time.Millisecond)
	// And the younger bravo, naming k, yields it to alpha
	f.createWidget(t, "bravo", "k")
	f.waitForReason(t, "bravo", conditions.ReasonNotFirst, 10*time.Second)
	// When alpha's keys change, and its passes run: it parks on j
	f.setKeys(t, "alpha", siblingKeys...)
	time.Sleep(500 * time.Millisecond) // the manager's cache shows the new keys
	release()
	f.waitForReason(t, "alpha", conditions.ReasonParked, 10*time.Second)
	// Then bravo takes k at once
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
}

// TestFairnessAYielderIsWokenWhenItsOlderSiblingIsDeletedBeforeItsOwnNotFirstIsCached:
// the older sibling a younger object yields a free key to is deleted
// between the younger one's reading of its siblings and its NotFirst
// write, so that the deletion reaches the manager's cache before that
// write does; the younger object (whose own status writes wake nobody) is
// woken all the same and takes the key at once, not when its grace ends.
func TestFairnessAYielderIsWokenWhenItsOlderSiblingIsDeletedBeforeItsOwnNotFirstIsCached(t *testing.T) {
	f := start(t, setup{workers: 2, statusChangesWakeNobody: true, opts: []claimmw.Option{claimmw.WithFairness(), claimmw.WithFairnessGrace(time.Hour)}})
	ctx := context.Background()
	// Given the older alpha names k, its passes held back: it has no
	// condition yet, so it counts as a sibling that could take k
	release := f.holdBackPasses("alpha")
	alpha := f.createWidget(t, "alpha", "k")
	// Creation times have a one-second resolution: the next object must be younger.
	time.Sleep(1100 * time.Millisecond)
	// And alpha is deleted while the younger bravo's first pass, which saw
	// alpha and yields k to it, writes its NotFirst condition
	var once sync.Once
	var yielded atomic.Bool // bravo's NotFirst write is on its way, alpha deleted
	f.writes.beforeStatus.Store(func(obj client.Object) {
		w, ok := obj.(*testcrd.Widget)
		if !ok || w.Name != "bravo" {
			return
		}
		c := meta.FindStatusCondition(w.Status.Conditions, string(conditions.Claimed))
		if c == nil || c.Reason != string(conditions.ReasonNotFirst) {
			return
		}
		once.Do(func() {
			if err := direct(t).Delete(ctx, alpha); err != nil {
				t.Errorf("deleting alpha: %v", err)
			}
			time.Sleep(time.Second) // the manager's cache and handlers see the deletion
			release()
			yielded.Store(true)
		})
	})
	f.createWidget(t, "bravo", "k")
	// (bravo's NotFirst is seen as its write is sent: woken at once, it
	// may say Claimed before a poll of its condition would see NotFirst)
	eventually(t, 10*time.Second, func() (bool, string) {
		return yielded.Load(), "bravo never wrote NotFirst"
	})
	if _, err := f.widget(t, "alpha"); !apierrors.IsNotFound(err) {
		t.Fatalf("alpha still there (%v): the test did not delete it during bravo's pass", err)
	}
	// Then bravo, the only object naming k now, takes k at once
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
}

func TestFairnessNeverLetsAFreeKeyWaitForAnOlderObjectParkedElsewhere(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithFairness()}})
	// Given z holds A, and the older y names A and B, so it is parked on A
	f.createAndWait(t, "z", conditions.ReasonClaimed, "A")
	f.createAndWait(t, "y", conditions.ReasonParked, "A", "B")
	time.Sleep(1100 * time.Millisecond) // creation timestamps have seconds
	// When the younger x names only B, which is free
	f.createWidget(t, "x", "B")
	// Then x takes B: y, parked on A, could not take B now, so it is no
	// sibling x must yield to
	cond := f.waitForReason(t, "x", conditions.ReasonClaimed, 10*time.Second)
	mustContain(t, "x's message", cond.Message, `"B"`)
}
