package claimmw_test

// The Stopping condition that names the keys its object may still act for:
// a waiter trusts it for exactly those keys, so every pass that acts for
// another key (told to release its record) must have said so first, in the
// API server.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// An object Stopping for exactly the keys it acted for (its told passes
// fail) keeps, while it waits, the record of a key it never acted for; when
// it stops naming that key its pass is told to release the record, which is
// acting for the key, and its condition must name the key first. When the
// write that names it is refused because the spec was edited meanwhile (an
// optimistic-lock conflict), the pass is told all the same, while the API
// server still says the object acts for no key but the one it held before: a
// person who deletes the record then lets the waiter act for the key beside
// the object's told pass, which has not succeeded.
func TestAKeyAStoppingObjectIsToldToReleaseIsNotGrantedToAWaiterWhenTheWriteNamingItMetASpecEdit(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given charlie holds z
	f.createAndWait(t, "charlie", conditions.ReasonClaimed, "z")
	// And xray holds a and acts for it
	f.createAndWait(t, "xray", conditions.ReasonClaimed, "a")
	f.waitForGrantedPass(t, "xray", "a")
	// And xray's passes that are told to stop fail (its workloads are still
	// stopping); the first one told to release b's record also finds that a
	// person deleted that record meanwhile
	var failing, toldB, deletedB atomic.Bool
	failing.Store(true)
	deleteErr := make(chan error, 1)
	f.inner.setHook(func(ctx context.Context, name string, c call) (reconcile.Result, error) {
		if name != "xray" || c.state.Granted && len(c.state.Releasing) == 0 {
			return reconcile.Result{}, nil
		}
		if namesKey(c.state.Releasing, "b") && toldB.CompareAndSwap(false, true) {
			deleteErr <- f.deleteRecordOf(ctx, "b")
			deletedB.Store(true)
		}
		if failing.Load() {
			return reconcile.Result{}, errNotStopped
		}
		return reconcile.Result{}, nil
	})
	// When xray is edited to name b and z: it holds b (free) without acting
	// for it and parks on z, Stopping for a alone; and whiskey, naming b,
	// waits for it
	f.xrayKeepsBStoppingForAWhileWhiskeyWaits(t)
	// And the first write of xray's condition once its spec names z alone
	// (the write that says it acts for b, before its pass is told to
	// release b) meets an edit of xray's spec made just before it (another
	// field than its keys)
	var edited atomic.Bool
	f.writes.beforeStatus.Store(func(obj client.Object) {
		w, ok := obj.(*testcrd.Widget)
		if !ok || w.Name != "xray" || !slices.Equal(w.Spec.Keys, []string{"z"}) || !edited.CompareAndSwap(false, true) {
			return
		}
		cur := &testcrd.Widget{}
		if err := env.APIReader.Get(context.Background(), client.ObjectKeyFromObject(w), cur); err != nil {
			t.Errorf("reading xray: %v", err)
			return
		}
		cur.Spec.HandTo = "nobody"
		if err := env.Client.Update(context.Background(), cur); err != nil {
			t.Errorf("editing xray's spec: %v", err)
		}
	})
	// And xray then stops naming b: it is told to release b's record, and a
	// person deletes that record while that told pass runs
	f.setKeys(t, "xray", "z")
	eventually(t, wakeWithin, func() (bool, string) { return deletedB.Load(), "xray was never told to release b" })
	if err := <-deleteErr; err != nil {
		t.Fatalf("deleting b's record: %v", err)
	}
	if !edited.Load() {
		t.Fatal("xray's condition was not written once its spec named z alone: the test did not reach the write it is about")
	}
	// Then whiskey is not granted b while xray's told passes fail: the pass
	// told to release b has not succeeded
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if c := f.claimed(t, "whiskey"); c.Status == "True" {
			t.Fatalf("whiskey is Claimed for b while xray, whose pass told to release b failed, may still act for it: whiskey %+v; xray %+v", c, f.claimed(t, "xray"))
		}
	}
	// And once a told pass of xray succeeds, whiskey gets b
	failing.Store(false)
	f.waitForReason(t, "whiskey", conditions.ReasonClaimed, wakeWithin)
}

// An object Stopping for exactly the keys it acted for (its told passes
// fail) keeps, while it waits, the record of a key it never acted for; when
// it stops naming that key its pass is told to release the record, which is
// acting for the key, and its condition names the key first. A waiter that
// read the object's condition before that write may have taken the key
// meanwhile (a person deleted its record) and act for it: the record is not
// the object's to clean up any more, and its pass must not be told to
// release it, as a pass that starts acting from a condition that said it
// acts for nothing is not.
func TestAKeyAWaiterActsForIsNotGivenToTheCleanupOfAStoppingObjectThatKeptItsRecord(t *testing.T) {
	t.Parallel()
	f := start(t, setup{workers: 2})
	// Given charlie holds z
	f.createAndWait(t, "charlie", conditions.ReasonClaimed, "z")
	// And xray holds a and acts for it
	f.createAndWait(t, "xray", conditions.ReasonClaimed, "a")
	f.waitForGrantedPass(t, "xray", "a")
	// And xray's passes that are told to stop fail (its workloads of a are
	// still stopping); whiskey's granted passes are recorded
	var whiskeyActs, toldBWhileWhiskeyActs atomic.Bool
	whiskeyGranted := make(chan struct{})
	var once sync.Once
	f.inner.setHook(func(_ context.Context, name string, c call) (reconcile.Result, error) {
		switch name {
		case "whiskey":
			if c.state.Granted && namesKey(c.state.Grants, "b") {
				whiskeyActs.Store(true)
				once.Do(func() { close(whiskeyGranted) })
			}
			return reconcile.Result{}, nil
		case "xray":
			if namesKey(c.state.Releasing, "b") && whiskeyActs.Load() {
				toldBWhileWhiskeyActs.Store(true)
			}
			if !c.state.Granted || len(c.state.Releasing) > 0 {
				return reconcile.Result{}, errNotStopped
			}
		}
		return reconcile.Result{}, nil
	})
	// When xray is edited to name b and z: it holds b (free) without acting
	// for it and parks on z, Stopping for a alone; and whiskey, naming b,
	// waits for it
	f.xrayKeepsBStoppingForAWhileWhiskeyWaits(t)
	// And xray then stops naming b; just before its pass writes the
	// condition that names b, a person deletes b's record, and whiskey,
	// which reads xray's condition before that write, takes b
	var reached atomic.Bool
	f.writes.beforeStatus.Store(func(obj client.Object) {
		w, ok := obj.(*testcrd.Widget)
		if !ok || w.Name != "xray" || !slices.Equal(w.Spec.Keys, []string{"z"}) || !reached.CompareAndSwap(false, true) {
			return
		}
		if err := f.deleteRecordOf(context.Background(), "b"); err != nil {
			t.Errorf("deleting b's record: %v", err)
			return
		}
		select {
		case <-whiskeyGranted:
		case <-time.After(3 * time.Second):
		}
	})
	f.setKeys(t, "xray", "z")
	eventually(t, wakeWithin, func() (bool, string) {
		return reached.Load(), "xray's condition was never written for its spec naming z alone"
	})
	// Then no pass of xray is told to release b once whiskey acts for b
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if toldBWhileWhiskeyActs.Load() {
			t.Fatalf("a pass of xray was told to release b (cleaning up for it) while whiskey acts for b: xray %+v; whiskey %+v", f.claimed(t, "xray"), f.claimed(t, "whiskey"))
		}
	}
}

// xrayKeepsBStoppingForAWhileWhiskeyWaits edits xray, which acted for a
// and whose told passes fail, to name b and z (z held by another): it
// keeps b, the first of its keys, without acting for it, and is Stopping
// for a alone; then whiskey, naming b, is created and waits for it.
func (f *fixture) xrayKeepsBStoppingForAWhileWhiskeyWaits(t *testing.T) {
	t.Helper()
	f.setKeys(t, "xray", "b", "z")
	stopping := f.waitForReason(t, "xray", conditions.ReasonStopping, wakeWithin)
	f.waitForInnerCall(t, "xray", "a told pass", func(s claimmw.State) bool { return !s.Granted })
	if !f.leaseExists(t, "b") {
		t.Fatalf("the parked xray does not keep b, the first of its keys (xray: %+v)", stopping)
	}
	f.createAndWait(t, "whiskey", conditions.ReasonParked, "b")
}

// An object Stopping for the keys it acted for, told to release their
// records, has a told pass that succeeds: it says Parked (it acts for no
// key), and the release of the records then fails. Its next passes read a
// cache that has not yet shown that Parked write, which still says Stopping
// for those keys: they must not be told to release the records (acting for
// their keys) on the word of that cache while the API server says it acts
// for no key (a person who deletes one of those records meanwhile would let
// a waiter, which reads the API server, act for the key beside such a told
// pass). The API server's word decides: the records go untold, and the
// waiter gets the key once they can be deleted. (A restarted process does
// not know that the release failed and tells the object once more, judged
// from the API server too: the test of a restarted operator below.)
func TestAPassJudgedFromACacheThatStillShowsItsObjectStoppingIsNotToldToReleaseARecordWhoseReleaseFailed(t *testing.T) {
	t.Parallel()
	f := start(t, setup{workers: 2})
	// Given charlie holds z, and xray, which acted for a and kept b without
	// acting for it, stops naming b: its told passes, which fail for now,
	// are told to release the records of a and b, and its condition names
	// both; whiskey, naming b, waits for it
	failing := f.xrayIsToldToReleaseAAndBWhileWhiskeyWaits(t)
	// And the release of Leases fails for a while; when xray's told pass
	// succeeds and it writes Parked, the manager's cache goes on showing it
	// as it was just before (Stopping for a and b)
	lagging := f.xraysCacheLagsFromItsParkedWrite(t, nil)
	// And while a pass of xray judged from that cache is told to release
	// b's record, a person deletes that record
	told := f.recordDeletedWhileToldFromTheLaggingCache(t, "b", lagging)
	failing.Store(false)
	// Then no pass of xray judged from that cache is told to release b; and
	// once the cache caught up and Leases can be deleted, whiskey gets b
	told.neverWhileTheCacheLags(t, f, lagging)
}

// A holder of b and c loses b (taken over for charlie) and parks on it,
// giving up c, the key after it: its told pass succeeds, it writes Parked,
// and the release of c's record then fails. Its next passes read a cache
// that has not yet shown that Parked write and still shows it Claimed for
// b and c: they must not be told to release c's record (acting for c) on
// the word of that cache while the API server says it acts for no key (a
// person who deletes c's record meanwhile would let a waiter, which reads
// the API server, act for c beside such a told pass). The record goes
// untold, and the waiter gets c once it can be deleted.
func TestAPassJudgedFromACacheThatStillShowsItsObjectClaimedIsNotToldToReleaseARecordWhoseReleaseFailed(t *testing.T) {
	t.Parallel()
	f := start(t, setup{workers: 2})
	// Given xray holds b and c and acts for them, and the cache's view of it
	// then is kept
	f.createAndWait(t, "xray", conditions.ReasonClaimed, "b", "c")
	f.waitForGrantedPass(t, "xray", "c")
	claimedThen, err := f.widget(t, "xray")
	if err != nil {
		t.Fatal(err)
	}
	// And whiskey, naming c, waits for it
	f.createAndWait(t, "whiskey", conditions.ReasonParked, "c")
	// And the release of Leases fails for a while; when xray's told pass
	// succeeds and it writes Parked, the manager's cache goes on showing it
	// Claimed for b and c
	lagging := f.xraysCacheLagsFromItsParkedWrite(t, claimedThen)
	// And while a pass of xray judged from that cache is told to release
	// c's record, a person deletes that record
	told := f.recordDeletedWhileToldFromTheLaggingCache(t, "c", lagging)
	// When b is taken over for charlie, which names it: xray parks on b and
	// is told to stop, and to release c
	f.createAndWait(t, "charlie", conditions.ReasonParked, "b")
	f.takeOverFor(t, "b", "charlie")
	// Then no pass of xray judged from that cache is told to release c; and
	// once the cache caught up and Leases can be deleted, whiskey gets c
	told.neverWhileTheCacheLags(t, f, lagging)
}

// neverWhileTheCacheLags waits until the cache lags and a release was tried
// (and refused) since, fails t if a pass of xray judged from that cache is
// told to release the key within 2 s, and then has the cache catch up and
// Leases be deleted again: whiskey must get the key.
func (told *toldFromTheLaggingCache) neverWhileTheCacheLags(t *testing.T, f *fixture, lagging *atomic.Bool) {
	t.Helper()
	eventually(t, 10*time.Second, func() (bool, string) {
		return lagging.Load() && f.writes.snapshot()["delete Lease"] >= 1, fmt.Sprintf("xray's Parked write, and a release after it, never happened (xray %+v)", f.claimed(t, "xray"))
	})
	time.Sleep(2 * time.Second)
	if told.reached.Load() {
		<-told.judged
		t.Fatalf("a pass of xray judged from the lagging cache was told to release %s, whose release had failed after its told pass succeeded (xray in the API server then: %+v; whiskey acted meanwhile: %v)",
			told.key, told.xrayThen.Load(), told.whiskeyActed.Load())
	}
	f.writes.staleWidget.Store((*testcrd.Widget)(nil))
	f.writes.failLeaseDeletes.Store(false)
	f.waitForReason(t, "whiskey", conditions.ReasonClaimed, 10*time.Second)
}

// xraysCacheLagsFromItsParkedWrite has Lease deletes fail and, from xray's
// first write of Parked on, the manager's cache show xray as view (nil: as
// the API server had it just before that write) until the test resets it.
// The flag returned says whether the cache lags.
func (f *fixture) xraysCacheLagsFromItsParkedWrite(t *testing.T, view *testcrd.Widget) *atomic.Bool {
	t.Helper()
	f.writes.failLeaseDeletes.Store(true)
	var lagging atomic.Bool
	f.writes.beforeStatus.Store(func(obj client.Object) {
		w, ok := obj.(*testcrd.Widget)
		if !ok || w.Name != "xray" || lagging.Load() {
			return
		}
		if c := meta.FindStatusCondition(w.Status.Conditions, string(conditions.Claimed)); c == nil || c.Reason != string(conditions.ReasonParked) {
			return
		}
		shown := view
		if shown == nil {
			shown = &testcrd.Widget{}
			if err := env.APIReader.Get(context.Background(), client.ObjectKeyFromObject(w), shown); err != nil {
				t.Errorf("reading xray: %v", err)
				return
			}
		}
		f.writes.staleWidget.Store(shown)
		lagging.Store(true)
	})
	t.Cleanup(func() {
		f.writes.staleWidget.Store((*testcrd.Widget)(nil))
		f.writes.failLeaseDeletes.Store(false)
	})
	return &lagging
}

// toldFromTheLaggingCache is what happened in the first pass of xray told,
// while its cache lagged, to release the record of key.
type toldFromTheLaggingCache struct {
	key string
	// reached: such a pass ran; judged is closed once it ended.
	reached atomic.Bool
	judged  chan struct{}
	// whiskeyActed: whiskey acted for key during that pass; xrayThen is
	// xray's condition in the API server then.
	whiskeyActed atomic.Bool
	xrayThen     atomic.Value
}

// recordDeletedWhileToldFromTheLaggingCache has a person delete key's record
// during the first pass of xray told to release it while lagging is set,
// and that pass wait up to 3 s for whiskey to act for key (its cleanup
// still runs).
func (f *fixture) recordDeletedWhileToldFromTheLaggingCache(t *testing.T, key string, lagging *atomic.Bool) *toldFromTheLaggingCache {
	t.Helper()
	told := &toldFromTheLaggingCache{key: key, judged: make(chan struct{})}
	var whiskeyActs atomic.Bool
	var once sync.Once
	f.inner.setHook(func(ctx context.Context, name string, c call) (reconcile.Result, error) {
		switch name {
		case "whiskey":
			if c.state.Granted && namesKey(c.state.Grants, key) {
				whiskeyActs.Store(true)
			}
		case "xray":
			if lagging.Load() && namesKey(c.state.Releasing, key) {
				once.Do(func() {
					defer close(told.judged)
					told.reached.Store(true)
					if err := f.deleteRecordOf(ctx, key); err != nil {
						t.Errorf("deleting %s's record: %v", key, err)
						return
					}
					for end := time.Now().Add(3 * time.Second); time.Now().Before(end) && !whiskeyActs.Load(); time.Sleep(10 * time.Millisecond) {
					}
					if whiskeyActs.Load() {
						told.xrayThen.Store(f.claimed(t, "xray"))
						told.whiskeyActed.Store(true)
					}
				})
			}
		}
		return reconcile.Result{}, nil
	})
	return told
}

// whiskeyDidNotActMeanwhile asserts the Then "whiskey did not act for the
// key while the pass of xray told to release it from the cache (showing
// xray cached) ran, and once the cache caught up and Leases can be
// deleted, whiskey gets it".
func (told *toldFromTheLaggingCache) whiskeyDidNotActMeanwhile(t *testing.T, f *fixture, cached string) {
	t.Helper()
	<-told.judged
	if told.whiskeyActed.Load() {
		t.Fatalf("whiskey acted for %s while a pass of xray told to release %s ran (judged from a cache still showing xray %s; xray in the API server meanwhile: %+v); whiskey %+v",
			told.key, told.key, cached, told.xrayThen.Load(), f.claimed(t, "whiskey"))
	}
	f.writes.staleWidget.Store((*testcrd.Widget)(nil))
	f.writes.failLeaseDeletes.Store(false)
	f.waitForReason(t, "whiskey", conditions.ReasonClaimed, 10*time.Second)
}

// As above, but the operator restarts between the told pass that succeeded
// (and wrote Parked) and the next pass: the new process wrote nothing for
// the object, and its cache, behind the API server (an API server replica
// whose watch cache lags serves its first List), still shows the object
// Stopping for the keys whose records it is told to release. That pass must
// not be told to release them (acting for their keys) on the word of that
// cache while the API server says the object acts for no key.
func TestAKeyIsNotGrantedToAWaiterWhileAPassOfARestartedOperatorJudgedFromACacheThatStillShowsItsObjectStoppingIsToldToReleaseItsRecord(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	f, stop := startIn(t, ns, setup{workers: 2})
	// Given charlie holds z, and xray, which acted for a and kept b without
	// acting for it, stops naming b: its told passes, which fail for now,
	// are told to release the records of a and b, and its condition names
	// both; whiskey, naming b, waits for it
	failing := f.xrayIsToldToReleaseAAndBWhileWhiskeyWaits(t)
	// And the release of Leases fails; a told pass of xray succeeds and
	// writes Parked, and the release of its records then fails
	stoppingThen, stopHeld := f.xrayWritesParkedAndItsReleaseFails(t, failing, stop)
	// When the operator restarts, and the new process's cache shows xray as
	// it was just before its Parked write (Stopping for a and b)
	stopHeld()
	gate := make(chan struct{})
	var open sync.Once
	letGo := func() { open.Do(func() { close(gate) }) }
	t.Cleanup(letGo)
	f, _ = startIn(t, ns, setup{workers: 2, beforeWidgetGet: func(key client.ObjectKey) {
		if key.Name == "xray" {
			<-gate
		}
	}})
	f.writes.staleWidget.Store(stoppingThen)
	// And while the new process's first pass of xray, judged from that
	// cache, is told to release b's record, a person deletes that record
	var lagging atomic.Bool
	lagging.Store(true)
	told := f.recordDeletedWhileToldFromTheLaggingCache(t, "b", &lagging)
	letGo()
	eventually(t, wakeWithin, func() (bool, string) {
		return told.reached.Load(), fmt.Sprintf("no pass of xray in the new process was told to release b (xray %+v)", f.claimed(t, "xray"))
	})
	// Then whiskey does not act for b while that pass of xray, told to
	// release b, runs; and once the cache caught up, whiskey gets b
	told.whiskeyDidNotActMeanwhile(t, f, "Stopping")
}

// xrayWritesParkedAndItsReleaseFails has Lease deletes fail and the told
// passes of xray succeed (failing cleared); it waits until xray's pass wrote
// Parked and its release failed, holds every later pass of xray in this
// process at its first read, and returns xray as the API server had it just
// before the Parked write, and what stops the process (stop) and lets the
// held pass end.
func (f *fixture) xrayWritesParkedAndItsReleaseFails(t *testing.T, failing *atomic.Bool, stop func()) (*testcrd.Widget, func()) {
	t.Helper()
	f.writes.failLeaseDeletes.Store(true)
	var then atomic.Pointer[testcrd.Widget]
	held := make(chan struct{})
	var heldOnce sync.Once
	stopped := make(chan struct{})
	f.writes.beforeStatus.Store(func(obj client.Object) {
		w, ok := obj.(*testcrd.Widget)
		if !ok || w.Name != "xray" || then.Load() != nil {
			return
		}
		if c := meta.FindStatusCondition(w.Status.Conditions, string(conditions.Claimed)); c == nil || c.Reason != string(conditions.ReasonParked) {
			return
		}
		cur := &testcrd.Widget{}
		if err := env.APIReader.Get(context.Background(), client.ObjectKeyFromObject(w), cur); err != nil {
			t.Errorf("reading xray: %v", err)
			return
		}
		then.Store(cur)
		f.writes.beforeWidgetGet.Store(func(key client.ObjectKey) {
			if key.Name != "xray" {
				return
			}
			heldOnce.Do(func() { close(held) })
			select {
			case <-stopped:
			case <-time.After(15 * time.Second):
			}
		})
	})
	failing.Store(false)
	eventually(t, wakeWithin, func() (bool, string) {
		select {
		case <-held:
			return true, ""
		default:
			return false, fmt.Sprintf("xray's pass after its Parked write never began (xray %+v)", f.claimed(t, "xray"))
		}
	})
	if c := f.claimed(t, "xray"); c.Reason != string(conditions.ReasonParked) {
		t.Fatalf("xray says %s (%s), want Parked after its told pass succeeded", c.Reason, c.Message)
	}
	if !f.leaseExists(t, "a") || !f.leaseExists(t, "b") {
		t.Fatal("xray's records were released: the test did not reach the failed release it is about")
	}
	// The process's stop waits for its workers: the held pass is let go
	// once the manager's context is cancelled, and ends at its first request.
	return then.Load(), func() {
		go func() {
			time.Sleep(300 * time.Millisecond)
			close(stopped)
		}()
		stop()
	}
}

// xrayIsToldToReleaseAAndBWhileWhiskeyWaits makes charlie hold z and xray
// act for a; xray's told passes fail until the returned flag is cleared;
// xray then names b and z (keeping b without acting, Stopping for a, while
// whiskey waits for b) and then z alone: its told passes are told to
// release a and b, and its condition names both.
func (f *fixture) xrayIsToldToReleaseAAndBWhileWhiskeyWaits(t *testing.T) (failing *atomic.Bool) {
	t.Helper()
	f.createAndWait(t, "charlie", conditions.ReasonClaimed, "z")
	f.createAndWait(t, "xray", conditions.ReasonClaimed, "a")
	f.waitForGrantedPass(t, "xray", "a")
	failing = f.failToldPassesOf("xray")
	f.xrayKeepsBStoppingForAWhileWhiskeyWaits(t)
	f.setKeys(t, "xray", "z")
	f.waitForInnerCall(t, "xray", "a pass told to release b", func(s claimmw.State) bool { return namesKey(s.Releasing, "b") })
	if keys, ok := claimmw.ActsFor(f.claimed(t, "xray")); !ok || !slices.Contains(keys, "b") {
		t.Fatalf("xray, told to release b's record, does not say it acts for b: %+v", f.claimed(t, "xray"))
	}
	return failing
}
