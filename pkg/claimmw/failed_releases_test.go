package claimmw_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// A release that keeps failing (the operator lost the right to delete
// Leases, say) after a pass that knew the record goes succeeded leaves the
// object's condition as that pass left it: while nothing else changes, the
// status writes stop and the passes back off, rather than each pass saying
// the object acts for the key again, being told of it once more, and saying
// it stopped, its own two writes waking it at once for the next. Once the
// release succeeds, the record goes.

// writesWhileReleasesFail waits until a release was tried after Lease
// deletes started failing, lets a second pass, then fails t when more than
// two status writes of Widgets happen in the next 3 s.
func (f *fixture) writesWhileReleasesFail(t *testing.T, name, key string) {
	t.Helper()
	eventually(t, wakeWithin, func() (bool, string) {
		return f.writes.snapshot()["delete Lease"] >= 1, name + "'s release of " + key + " was never tried"
	})
	time.Sleep(time.Second)
	before := f.writes.snapshot()
	time.Sleep(3 * time.Second)
	after := f.writes.snapshot()
	if writes := after["patch/status Widget"] - before["patch/status Widget"]; writes > 2 {
		t.Errorf("%d status writes in 3 s while %s's release of %s keeps failing (%d failed Lease deletes, %d inner passes of %s so far); %s now %+v",
			writes, name, key, after["delete Lease"]-before["delete Lease"], len(f.inner.callsOf(name)), name, name, f.claimed(t, name))
	}
	if !f.leaseExists(t, key) {
		t.Fatalf("%s's record of %s was released although Lease deletes fail", name, key)
	}
}

// xStopsNamingBWhileReleasesFail is the Given "x holds a and b and acts
// for them; deleting Leases fails from then on; x stops naming b, and its
// pass told to release b succeeds", with the Then of writesWhileReleasesFail.
func (f *fixture) xStopsNamingBWhileReleasesFail(t *testing.T) {
	t.Helper()
	f.createAndWait(t, "x", conditions.ReasonClaimed, "a", "b")
	f.waitForGrantedPass(t, "x", "b")
	f.writes.failLeaseDeletes.Store(true)
	f.setKeys(t, "x", "a")
	f.writesWhileReleasesFail(t, "x", "b")
}

func TestAHolderWhoseReleaseKeepsFailingStopsWritingItsCondition(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given x holds a and b and acts for them, and deleting Leases fails
	// from now on
	// When x stops naming b, and its pass told to release b succeeds
	// Then the status writes stop while the release of b fails
	f.xStopsNamingBWhileReleasesFail(t)
	// And once Leases can be deleted again, b's record goes and x says it
	// holds a alone
	f.writes.failLeaseDeletes.Store(false)
	eventually(t, 10*time.Second, func() (bool, string) {
		return !f.leaseExists(t, "b"), "b's record outlives x's told pass once Leases can be deleted"
	})
	if c := f.waitForReason(t, "x", conditions.ReasonClaimed, wakeWithin); c.Message != `Holds key "a".` {
		t.Errorf("x says %q once b was released, want that it holds a", c.Message)
	}
}

func TestAParkedObjectWhoseReleaseOfAKeptRecordKeepsFailingStopsWritingItsCondition(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given z holds j, and x (naming a and j) is parked on j keeping a
	f.createAndWait(t, "z", conditions.ReasonClaimed, "j")
	f.parksKeepingItsFirstKey(t, "x", "a", "j")
	// And deleting Leases fails from now on
	f.writes.failLeaseDeletes.Store(true)
	// When x stops naming a, and its pass told to release a succeeds
	f.setKeys(t, "x", "j")
	f.waitForInnerCall(t, "x", "a pass told to release a", func(s claimmw.State) bool { return namesKey(s.Releasing, "a") })
	// Then the status writes stop while the release of a fails
	f.writesWhileReleasesFail(t, "x", "a")
	// And once Leases can be deleted again, a's record goes, and x is
	// parked on j
	f.writes.failLeaseDeletes.Store(false)
	eventually(t, 10*time.Second, func() (bool, string) {
		return !f.leaseExists(t, "a"), "a's record outlives x's told pass once Leases can be deleted"
	})
	f.waitForReason(t, "x", conditions.ReasonParked, wakeWithin)
}

func TestADeletedObjectWhoseReleaseKeepsFailingStopsWritingItsCondition(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given a holds k and b waits for it
	f.aHoldsKAndBWaits(t)
	// And deleting Leases fails from now on
	f.writes.failLeaseDeletes.Store(true)
	// When a is deleted, and its deletion pass given k succeeds
	f.deleteWidgetAsync(t, "a")
	// Then the status writes stop while the release of k fails
	f.writesWhileReleasesFail(t, "a", "k")
	// And once Leases can be deleted again, b gets k, and a goes
	f.writes.failLeaseDeletes.Store(false)
	f.waitForReason(t, "b", conditions.ReasonClaimed, 10*time.Second)
	f.waitGone(t, "a", wakeWithin)
}

// Releases that fail for a while (the operator lost the right to delete
// Leases, and a person restores it half a minute later): once Leases can be
// deleted again, the record of the key the object stopped naming goes within
// seconds (a failed release is tried again at most 5 s apart), and the
// object waiting for that key gets it, rather than after an error backoff
// that grew for as long as the outage lasted (up to the controller's
// 1000 s cap).
func TestAKeyAnObjectStoppedNamingGoesSoonOnceReleasesWorkAgainAfterAnOutage(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given x holds a and b, and w waits for b
	f.createAndWait(t, "x", conditions.ReasonClaimed, "a", "b")
	f.waitForGrantedPass(t, "x", "b")
	f.createAndWait(t, "w", conditions.ReasonParked, "b")
	// And deleting Leases fails from now on
	f.writes.failLeaseDeletes.Store(true)
	// When x stops naming b, its pass told to release b succeeds, and
	// Leases cannot be deleted for 30 s
	f.setKeys(t, "x", "a")
	f.waitForInnerCall(t, "x", "a pass told to release b", func(s claimmw.State) bool { return namesKey(s.Releasing, "b") })
	time.Sleep(30 * time.Second)
	if !f.leaseExists(t, "b") {
		t.Fatal("b's record was released although Lease deletes fail")
	}
	// Then once Leases can be deleted again, w gets b within seconds
	f.writes.failLeaseDeletes.Store(false)
	eventually(t, 8*time.Second, func() (bool, string) {
		c := f.claimed(t, "w")
		return c.Reason == string(conditions.ReasonClaimed), fmt.Sprintf("w still waits for b after Lease deletes work again: %s; b's record still there: %v", c.Message, f.leaseExists(t, "b"))
	})
}

// A key whose release failed after the object was told to release it, that
// the object then named again and acted for (its record, never released,
// was granted to it once more), is given up again later: the object is told
// to release it (State.Releasing, where its reconciler drops what it keeps
// for the key) before the record goes, as it acted for the key since it was
// last told. Here it stops acting for the key first in a pass told to stop
// while its spec is invalid (its records are kept), and then its fixed spec
// no longer names the key.
func TestAKeyActedForAgainAfterItsReleaseFailedIsToldAgainBeforeItGoes(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given x holds a and b and acts for them, deleting Leases fails, x
	// stops naming b, its pass told to release b succeeds, and the release
	// of b fails
	f.xStopsNamingBWhileReleasesFail(t)
	// And x names b again, is granted its record once more and acts for b
	n := len(f.inner.callsOf("x"))
	f.setKeys(t, "x", "a", "b")
	eventually(t, wakeWithin, func() (bool, string) {
		for _, c := range f.inner.callsOf("x")[n:] {
			if c.state.Granted && grants(c.state, "b") {
				return true, ""
			}
		}
		return false, "x never acted for b again"
	})
	acted := len(f.inner.callsOf("x"))
	// And its spec turns invalid: it is told to stop, and keeps its records
	f.setKeys(t, "x", "a", "b", failKeysFuncKey)
	f.waitForReason(t, "x", conditions.ReasonInvalidKey, wakeWithin)
	// When Leases can be deleted again and x's fixed spec names a alone
	f.writes.failLeaseDeletes.Store(false)
	f.setKeys(t, "x", "a")
	eventually(t, 10*time.Second, func() (bool, string) {
		return !f.leaseExists(t, "b"), "b's record outlives x's spec that no longer names it"
	})
	// Then a pass of x after it acted for b again was told to release b
	told := false
	var states []string
	for _, c := range f.inner.callsOf("x")[acted:] {
		states = append(states, fmt.Sprintf("{Granted:%v Grants:%v Releasing:%v}", c.state.Granted, c.state.Grants, c.state.Releasing))
		if namesKey(c.state.Releasing, "b") {
			told = true
		}
	}
	if !told {
		t.Errorf("b's record went without x being told to release it, though x acted for b since it was last told; x's passes since: %v; x now %+v", states, f.claimed(t, "x"))
	}
}

// A failed release is tried again after a delay that doubles from 50 ms up
// to 5 s, whatever else the object's passes do: while the
// release keeps failing (the operator lost the right to delete Leases), the
// object's passes slow down, rather than run its reconciler, read the
// record and try the delete, and log an error, twenty times a second for
// as long as the outage lasts.
//
// Here the object gives up two keys in one key-set edit: the handover gate
// lets one go (its workloads of it are gone) and keeps the other (its
// workloads of that one still run). The release of the one the gate lets
// go fails, and keeps failing.
func TestAFailedReleaseIsTriedAgainLessOftenWhileTheGateKeepsAnotherKeyTheObjectGaveUp(t *testing.T) {
	t.Parallel()
	var keepC atomic.Bool
	gate := claim.GateFunc(func(_ context.Context, key string, _ claim.Holder) (bool, string, error) {
		if key == "c" && keepC.Load() {
			return false, "a workload of c still runs", nil
		}
		return true, "", nil
	})
	f := start(t, setup{claimOpts: []claim.Option{claim.WithHandoverGate(gate)}})
	// Given x holds a, b and c and acts for them
	f.createAndWait(t, "x", conditions.ReasonClaimed, "a", "b", "c")
	f.waitForGrantedPass(t, "x", "c")
	// And x's workloads of c still run (the gate keeps c), and deleting
	// Leases fails from now on
	keepC.Store(true)
	f.writes.failLeaseDeletes.Store(true)
	// When x stops naming b and c, and its pass told to release them
	// succeeds
	f.setKeys(t, "x", "a")
	f.waitForInnerCall(t, "x", "a pass told to release b and c", func(s claimmw.State) bool {
		return namesKey(s.Releasing, "b") && namesKey(s.Releasing, "c")
	})
	eventually(t, wakeWithin, func() (bool, string) {
		return f.writes.snapshot()["delete Lease"] >= 1, "x's release of b was never tried"
	})
	// Then, once the delay had a second to grow, b's release is tried
	// again at most a few times in the next 3 s (50 ms doubling: by then
	// at least 800 ms apart), and x's reconciler is not run at that pace
	time.Sleep(time.Second)
	before, calls := f.writes.snapshot(), len(f.inner.callsOf("x"))
	time.Sleep(3 * time.Second)
	after, callsAfter := f.writes.snapshot(), len(f.inner.callsOf("x"))
	deletes := after["delete Lease"] - before["delete Lease"]
	if deletes > 8 {
		t.Errorf("%d Lease deletes tried in 3 s while b's release keeps failing (and %d passes of x's reconciler, each told to release b and c again), a failed release being tried again after a delay that doubles from 50 ms; %d status writes meanwhile; x now %+v",
			deletes, callsAfter-calls, after["patch/status Widget"]-before["patch/status Widget"], f.claimed(t, "x"))
	}
	if !f.leaseExists(t, "b") || !f.leaseExists(t, "c") {
		t.Fatal("a record was released although Lease deletes fail")
	}
	// And once Leases can be deleted again and x's workloads of c are gone,
	// both records go
	f.writes.failLeaseDeletes.Store(false)
	keepC.Store(false)
	eventually(t, 10*time.Second, func() (bool, string) {
		return !f.leaseExists(t, "b") && !f.leaseExists(t, "c"), "b's or c's record outlives x's told pass once Leases can be deleted and the gate opened"
	})
}

// releaseRefusingWriter is the Claimer's writer with every ConfigMap patch
// refused while refuse is set, as a lost "patch" right on the claimed kind
// would: on the annotation backend a release is such a patch.
type releaseRefusingWriter struct {
	client.Client
	refuse  *atomic.Bool
	refused *atomic.Int32
}

func (w releaseRefusingWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if _, ok := obj.(*corev1.ConfigMap); ok && w.refuse.Load() {
		w.refused.Add(1)
		return apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, obj.GetName(), errors.New("injected: patch refused"))
	}
	return w.Client.Patch(ctx, obj, patch, opts...)
}

// refusingReleases is onStorageObjects whose writer refuses the patches of
// the storage objects while refuse is set.
func refusingReleases(ns *string, refuse *atomic.Bool, refused *atomic.Int32) backends.Factory {
	inner := onStorageObjects(ns)
	return func(r client.Reader, w client.Client, cfg backends.Config) (backends.Backend, error) {
		return inner(r, releaseRefusingWriter{Client: w, refuse: refuse, refused: refused}, cfg)
	}
}

// On the annotation backend the record of a key lives on the claimed object
// itself, and the holder's cleanup of the key (its pass told to release it)
// naturally writes that object: it undoes what it configured there. A
// release that keeps failing after that told pass succeeded must still stop
// the status writes (docs/middleware.md, the key-set edit row: the record is
// released untold in later passes while the condition says the object does
// not act for the key), rather than have the object say it acts for the key
// again, be told once more, write the claimed object once more and say it
// stopped, two status writes per pass for as long as the release fails.
func TestAHolderWhoseReleaseOfAnAnnotationRecordKeepsFailingStopsWritingItsConditionThoughItsCleanupWritesTheClaimedObject(t *testing.T) {
	t.Parallel()
	var ns string
	var refuse atomic.Bool
	var refused atomic.Int32
	f := start(t, setup{claimOpts: []claim.Option{claim.WithBackend(refusingReleases(&ns, &refuse, &refused))}})
	ns = f.ns
	c := direct(t)
	for _, k := range []string{"a", "b"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storage-" + k}}
		if err := c.Create(context.Background(), cm); err != nil {
			t.Fatal(err)
		}
	}
	// x's reconciler, told to release b, cleans up what it configured on
	// b's claimed object
	var cleanups atomic.Int32
	f.inner.setHook(func(_ context.Context, name string, cl call) (reconcile.Result, error) {
		if name != "x" || !namesKey(cl.state.Releasing, "b") {
			return reconcile.Result{}, nil
		}
		n := cleanups.Add(1)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storage-b"}}
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"data":{"cleanup":"%d"}}`, n))
		return reconcile.Result{}, c.Patch(context.Background(), cm, patch)
	})
	// Given x holds a and b and acts for them
	f.createAndWait(t, "x", conditions.ReasonClaimed, "a", "b")
	f.waitForGrantedPass(t, "x", "b")
	// And patching the claimed objects fails from now on
	refuse.Store(true)
	// When x stops naming b, and its pass told to release b succeeds
	f.setKeys(t, "x", "a")
	eventually(t, wakeWithin, func() (bool, string) {
		return refused.Load() >= 1, "x's release of b was never tried"
	})
	// Then the status writes stop while the release of b fails
	time.Sleep(time.Second)
	before, told := f.writes.snapshot(), cleanups.Load()
	time.Sleep(3 * time.Second)
	after, toldAfter := f.writes.snapshot(), cleanups.Load()
	if writes := after["patch/status Widget"] - before["patch/status Widget"]; writes > 2 {
		t.Errorf("%d status writes in 3 s while x's release of b keeps failing; x was told to release b %d times meanwhile (%d in all, each writing b's claimed object), %d refused release patches in all; x now %+v",
			writes, toldAfter-told, toldAfter, refused.Load(), f.claimed(t, "x"))
	}
	if rec := f.record(t, "b"); !rec.Exists {
		t.Fatal("x's record of b was released although patches of the claimed objects fail")
	}
	// And once the claimed objects can be patched again, b's record goes and
	// x says it holds a alone
	refuse.Store(false)
	eventually(t, 10*time.Second, func() (bool, string) {
		return !f.record(t, "b").Exists, "b's record outlives x's told pass once the claimed objects can be patched"
	})
	if cond := f.waitForReason(t, "x", conditions.ReasonClaimed, wakeWithin); cond.Message != `Holds key "a".` {
		t.Errorf("x says %q once b was released, want that it holds a", cond.Message)
	}
}

// A cache that lags behind the object's own writes may still show the
// condition that said it acts for the key whose release failed (written
// before its told pass), while the API server says it stopped: the record
// is judged from the API server all the same, and released untold, rather
// than have each pass, judged from that cache, say again that the object
// acts for the key and write twice.
func TestAHolderWhoseReleaseKeepsFailingStopsWritingItsConditionWhileItsCacheLags(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given x holds a and b and acts for them
	f.createAndWait(t, "x", conditions.ReasonClaimed, "a", "b")
	f.waitForGrantedPass(t, "x", "b")
	// And deleting Leases fails from now on, and from x's write that says
	// it holds a alone on, the manager's cache shows x as it was just
	// before that write (saying it also acts for b)
	f.writes.failLeaseDeletes.Store(true)
	onlyA := conditions.ForKeys(conditions.Claimed, []string{"a"}, 0).Message
	var lagging atomic.Bool
	f.writes.beforeStatus.Store(func(obj client.Object) {
		w, ok := obj.(*testcrd.Widget)
		if !ok || w.Name != "x" || lagging.Load() {
			return
		}
		if c := meta.FindStatusCondition(w.Status.Conditions, string(conditions.Claimed)); c == nil || c.Message != onlyA {
			return
		}
		shown := &testcrd.Widget{}
		if err := env.APIReader.Get(context.Background(), client.ObjectKeyFromObject(w), shown); err != nil {
			t.Errorf("reading x: %v", err)
			return
		}
		f.writes.staleWidget.Store(shown)
		lagging.Store(true)
	})
	// When x stops naming b, and its pass told to release b succeeds
	f.setKeys(t, "x", "a")
	eventually(t, wakeWithin, func() (bool, string) { return lagging.Load(), "x never said it holds a alone" })
	// Then the status writes stop while the release of b fails
	f.writesWhileReleasesFail(t, "x", "b")
	// And once the cache caught up and Leases can be deleted again, b's
	// record goes and x says it holds a alone
	f.writes.staleWidget.Store((*testcrd.Widget)(nil))
	f.writes.failLeaseDeletes.Store(false)
	eventually(t, 10*time.Second, func() (bool, string) {
		return !f.leaseExists(t, "b"), "b's record outlives x's told pass once Leases can be deleted"
	})
	if c := f.waitForReason(t, "x", conditions.ReasonClaimed, wakeWithin); c.Message != onlyA {
		t.Errorf("x says %q once b was released, want that it holds a", c.Message)
	}
}
