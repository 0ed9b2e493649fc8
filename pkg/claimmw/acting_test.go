package claimmw_test

// The acting window: an object acts for a key from its first granted pass
// until a pass told to stop returned success, or until it is gone, and no
// other object is granted the key while that window may be open. One test
// per route by which a key is freed or its holder told.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
	"github.com/ocf-claim/claim/pkg/expiry"
)

// failPassesThatStop makes every pass of the Widget named name fail, while
// the returned switch is on, that a level-triggered reconciler would use to
// stop its workloads for key: a pass not granted, or granted without key.
func (f *fixture) failPassesThatStop(name, key string) *atomic.Bool {
	return f.failPassesOf(name, func(s claimmw.State) bool { return !s.Granted || !grants(s, key) })
}

// failDeletionPassesOf makes every deletion pass of name (its cleanup) fail
// while the returned flag is set.
func (f *fixture) failDeletionPassesOf(name string) *atomic.Bool {
	return f.failPassesOf(name, func(s claimmw.State) bool { return s.Deleting })
}

// holderOf returns the claim holder of the Widget named name.
func (f *fixture) holderOf(t *testing.T, name string) claim.Holder {
	t.Helper()
	w := f.widgetNow(t, name)
	h, err := f.mw.Claimer().HolderOf(w)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// parksKeepingItsFirstKey is the Given "name, naming first and then, is
// parked on then's holder and keeps the record of first": it creates
// Widget name and fails t unless name is Parked within wakeWithin and
// first's record exists.
func (f *fixture) parksKeepingItsFirstKey(t *testing.T, name, first, then string) {
	t.Helper()
	f.createWidget(t, name, first, then)
	f.waitForReason(t, name, conditions.ReasonParked, wakeWithin)
	if !f.leaseExists(t, first) {
		t.Fatalf("the parked %s does not keep %s, the first of its keys", name, first)
	}
}

// takeOverFor takes key over for the Widget named to, as another replica
// judging the holder expired would: one write fenced on the record's version.
func (f *fixture) takeOverFor(t *testing.T, key, to string) {
	t.Helper()
	takeOver(t, f.expiredReplica(t), key, f.holderOf(t, to))
}

// expiredReplica is another replica of f's claimer that judges every holder
// expired, as one whose expiry.Liveness saw no renewal would.
func (f *fixture) expiredReplica(t *testing.T) *claim.Claimer {
	t.Helper()
	expired := claim.LivenessFunc(func(context.Context, claim.Record) (bool, error) { return false, nil })
	replica, err := claim.New(env.APIReader, direct(t), f.mw.Claimer().Config(), claim.WithBackend(lease.Backend), claim.WithLiveness(expired))
	if err != nil {
		t.Fatal(err)
	}
	return replica
}

// takeOver makes replica take key over for h and fails t unless that is a
// takeover.
func takeOver(t *testing.T, replica *claim.Claimer, key string, h claim.Holder) {
	t.Helper()
	if _, o, err := replica.Acquire(context.Background(), key, h); err != nil || o.Reason != claim.ReasonTakenOver {
		t.Fatalf("taking %s over for %s: %+v, %v", key, h.Name, o, err)
	}
}

// toldPasses counts the inner passes of name that were not granted.
func (f *fixture) toldPasses(name string) int {
	n := 0
	for _, c := range f.inner.callsOf(name) {
		if !c.state.Granted {
			n++
		}
	}
	return n
}

// neverClaimed fails the test if name's condition is Claimed=True at any
// poll during d.
func (f *fixture) neverClaimed(t *testing.T, name string, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if c := f.claimed(t, name); c.Status == "True" {
			t.Fatalf("%s is Claimed while another object may still act for its key: %+v", name, c)
		}
	}
}

// claimedOnlyOnceStopped asserts the Then "waiter is not granted its key
// for d while the earlier holder may still act for it, and once stop lets
// that holder's pass succeed, the waiter is Claimed".
func (f *fixture) claimedOnlyOnceStopped(t *testing.T, waiter string, d time.Duration, stop func()) {
	t.Helper()
	f.neverClaimed(t, waiter, d)
	stop()
	f.waitForReason(t, waiter, conditions.ReasonClaimed, wakeWithin)
}

// waitsForHandoverFrom asserts the Then "waiter waits for holder and is not
// granted the key": its reason is WaitingForHandover, its message names
// holder, and it is not Claimed for a second.
func (f *fixture) waitsForHandoverFrom(t *testing.T, waiter, holder string) {
	t.Helper()
	cond := f.waitForReason(t, waiter, conditions.ReasonWaitingForHandover, wakeWithin)
	mustContain(t, waiter+"'s message", cond.Message, holder)
	f.neverClaimed(t, waiter, time.Second)
}

// alphaLostJAndStopsWhileBravoWaitsForK is the Given of the tests of a
// stopping holder of a second key: alpha holds j and k, xray and bravo wait
// for them, and j is taken over for xray, so alpha is Stopping (its told or
// stopping passes set to fail by the test) while it keeps k.
func (f *fixture) alphaLostJAndStopsWhileBravoWaitsForK(t *testing.T) {
	t.Helper()
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "j", "k")
	f.createAndWait(t, "xray", conditions.ReasonParked, "j")
	f.createAndWait(t, "bravo", conditions.ReasonParked, "k")
	f.takeOverFor(t, "j", "xray")
	f.waitForReason(t, "alpha", conditions.ReasonStopping, lossWithin)
}

// bravoGetsKOnlyOnceAlphaStops is the When and Then of the tests of a
// stopping alpha that may still act for k, its passes failing while failing
// is set: a person deletes k's record, bravo waits for alpha's handover and
// is not granted k; once alpha's passes succeed, bravo is granted k.
func (f *fixture) bravoGetsKOnlyOnceAlphaStops(t *testing.T, failing *atomic.Bool) {
	t.Helper()
	f.deleteLease(t, "k")
	f.waitsForHandoverFrom(t, "bravo", "alpha")
	failing.Store(false)
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
}

// grants reports whether s grants key.
func grants(s claimmw.State, key string) bool {
	return namesKey(s.Grants, key)
}

// waitForGrantedPass waits for a pass of name granted key.
func (f *fixture) waitForGrantedPass(t *testing.T, name, key string) {
	t.Helper()
	f.waitForInnerCall(t, name, "a pass granted "+key, func(s claimmw.State) bool { return s.Granted && grants(s, key) })
}

// waitForDeletionPassGiven waits for a deletion pass of name given key.
func (f *fixture) waitForDeletionPassGiven(t *testing.T, name, key string) {
	t.Helper()
	f.waitForInnerCall(t, name, "a deletion pass given "+key, func(s claimmw.State) bool { return s.Deleting && grants(s, key) })
}

// holderHoldsAAndWaiterWaits is the Given of the tests of a holder that may
// still act for a after its spec or its condition moved on: Widget holder
// holds a, and Widget waiter is parked on it.
func (f *fixture) holderHoldsAAndWaiterWaits(t *testing.T) {
	t.Helper()
	f.createWidget(t, "holder", "a")
	f.waitForReason(t, "holder", conditions.ReasonClaimed, wakeWithin)
	f.createWidget(t, "waiter", "a")
	f.waitForReason(t, "waiter", conditions.ReasonParked, wakeWithin)
}

// waiterWaitsOnceAIsDeletedFromOutside is the When and Then of those tests:
// holder's record of a is deleted from outside, and waiter must wait for the
// holder's told pass, which never succeeds.
func (f *fixture) waiterWaitsOnceAIsDeletedFromOutside(t *testing.T) {
	t.Helper()
	f.deleteLease(t, "a")
	f.neverClaimed(t, "waiter", 4*time.Second)
	if c := f.claimed(t, "waiter"); c.Reason != string(conditions.ReasonWaitingForHandover) {
		t.Errorf("waiter: claim condition %+v, want reason %s", c, conditions.ReasonWaitingForHandover)
	}
}

func TestALostKeyIsToldInEveryPassUntilAToldPassSucceeds(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	failing := f.failToldPassesOf("alpha")
	// Given alpha holds k (default mode: its inner is skipped while parked)
	// and other waits for it
	f.holdsAndWaits(t, "alpha", "k", "other")
	// When k is taken over for other and alpha's passes told to stop fail
	f.takeOverFor(t, "k", "other")
	// Then alpha says Stopping, not Parked, and is told again and again
	cond := f.waitForReason(t, "alpha", conditions.ReasonStopping, lossWithin)
	if cond.Status != "False" {
		t.Errorf("alpha while stopping: status %s, want False", cond.Status)
	}
	eventually(t, wakeWithin, func() (bool, string) {
		return f.toldPasses("alpha") >= 3, fmt.Sprintf("alpha was told %d times, want a retry after each failure", f.toldPasses("alpha"))
	})
	if got := f.claimed(t, "alpha").Reason; got != string(conditions.ReasonStopping) {
		t.Fatalf("alpha after failed told passes: reason %s, want Stopping", got)
	}
	// When its told pass succeeds, it says what blocks it, and is told no more
	failing.Store(false)
	f.waitForReason(t, "alpha", conditions.ReasonParked, wakeWithin)
	told := f.toldPasses("alpha")
	time.Sleep(300 * time.Millisecond)
	if got := f.toldPasses("alpha"); got != told {
		t.Errorf("alpha was told %d more times after it stopped", got-told)
	}
}

func TestAToldPassRunsWhenTheStatusWriteFails(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	f.holdsAndWaits(t, "alpha", "k", "other")
	// Given alpha's status cannot be written (an admission policy, RBAC)
	f.writes.failStatusOf.Store("alpha")
	// When alpha loses k
	f.takeOverFor(t, "k", "other")
	// Then its inner reconciler is told to stop all the same
	eventually(t, wakeWithin, func() (bool, string) {
		return f.toldPasses("alpha") >= 1 && f.writes.failedStatus.Load() >= 1,
			fmt.Sprintf("alpha told %d times, %d status writes refused", f.toldPasses("alpha"), f.writes.failedStatus.Load())
	})
	// And once its status can be written, it says Parked
	f.writes.failStatusOf.Store("")
	f.touch(t, "alpha")
	f.waitForReason(t, "alpha", conditions.ReasonParked, wakeWithin)
}

func TestAKeyErasedFromOutsideGoesBackToItsLiveHolderNotToTheWaiter(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k")
	alpha, _ := f.widget(t, "alpha")
	f.createAndWait(t, "bravo", conditions.ReasonParked, "k")
	for round := range 5 {
		// When a person deletes the record of k while alpha acts for it
		f.deleteLease(t, "k")
		// Then bravo is never granted k, and alpha holds it again
		f.neverClaimed(t, "bravo", 400*time.Millisecond)
		eventually(t, wakeWithin, func() (bool, string) {
			rec := f.record(t, "k")
			return rec.Exists && rec.Holder.UID == alpha.UID, fmt.Sprintf("round %d: record of k: exists %t, holder %s", round, rec.Exists, rec.Holder)
		})
		f.waitForReason(t, "bravo", conditions.ReasonParked, wakeWithin)
	}
}

func TestAKeyFreedFromOutsideGoesToAWaiterOnlyOnceItsStoppingHolderSucceeded(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	failing := f.failToldPassesOf("alpha")
	// Given alpha holds j and k, and xray and bravo wait for them
	// When j is taken over for xray, so alpha must stop and give k up, but
	// its told passes fail: it keeps k
	f.alphaLostJAndStopsWhileBravoWaitsForK(t)
	alpha, _ := f.widget(t, "alpha")
	if rec := f.record(t, "k"); !rec.Exists || rec.Holder.UID != alpha.UID {
		t.Fatalf("record of k while alpha's told pass fails: exists %t, holder %s; want alpha's", rec.Exists, rec.Holder)
	}
	// And a person deletes k's record: then bravo waits for alpha to stop,
	// and is granted k only once alpha's told pass succeeds
	f.bravoGetsKOnlyOnceAlphaStops(t, failing)
	// And alpha is Parked
	f.waitForReason(t, "alpha", conditions.ReasonParked, wakeWithin)
}

func TestAKeyFreedFromOutsideIsNotGrantedWhileAHolderThatNoLongerNamesItHasNotStopped(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	failing := f.failPassesThatStop("alpha", "k")
	// Given alpha holds j and k, and bravo waits for k
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "j", "k")
	f.createAndWait(t, "bravo", conditions.ReasonParked, "k")
	// When alpha's spec stops naming k but every pass that would stop its
	// workloads for k fails, so it may still act for k though its spec no
	// longer names it
	f.setKeys(t, "alpha", "j")
	f.waitForInnerCall(t, "alpha", "a pass told to give k up", func(s claimmw.State) bool { return len(s.Releasing) > 0 })
	// And a person deletes k's record, so no pass names k in Releasing
	// again: then bravo waits for alpha, and is granted k only once alpha's
	// told pass succeeds
	f.bravoGetsKOnlyOnceAlphaStops(t, failing)
}

func TestAWaiterIsNotLeftWaitingWhenItsPredecessorStopsWhileItsConditionIsBeingWritten(t *testing.T) {
	t.Parallel()
	// Two workers: bravo's pass is held in its status write while alpha's
	// runs.
	f := start(t, setup{statusChangesWakeNobody: true, workers: 2})
	failing := f.failToldPassesOf("alpha")
	// Given alpha holds j and k, and xray and bravo wait for them
	// And alpha, which lost j, is stopping and keeps k
	f.alphaLostJAndStopsWhileBravoWaitsForK(t)
	// When k's record is deleted, and alpha's told pass succeeds after
	// bravo decided to wait for it but before bravo's condition says so
	var once sync.Once
	f.writes.beforeStatus.Store(func(obj client.Object) {
		w, ok := obj.(*testcrd.Widget)
		if !ok || w.Name != "bravo" || !strings.Contains(fmt.Sprint(w.Status.Conditions), string(conditions.ReasonWaitingForHandover)) {
			return
		}
		once.Do(func() {
			failing.Store(false)
			f.edit(t, "alpha", func(w *testcrd.Widget) { w.Spec.HandTo = "nobody" }) // a spec change: reconciled at once
			eventually(t, wakeWithin, func() (bool, string) {
				c := f.claimed(t, "alpha")
				return c.Reason != string(conditions.ReasonStopping), "alpha still stopping: " + c.Reason
			})
			time.Sleep(300 * time.Millisecond) // alpha's change reaches the cache and its wake-ups ran
		})
	})
	f.deleteLease(t, "k")
	// Then bravo is granted k
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
}

func TestAStoppingHolderWhoseSpecChangesStillCountsForTheKeysItActedForUntilItsPassSucceeds(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	failing := f.failPassesThatStop("alpha", "k")
	// Given alpha holds j and k, and xray and bravo wait for them
	// And alpha lost j and is stopping, its passes that would stop its
	// workloads for k failing
	f.alphaLostJAndStopsWhileBravoWaitsForK(t)
	// When its spec moves to a free key m, granted at once, while its pass
	// for the new spec has not yet succeeded
	f.setKeys(t, "alpha", "m")
	f.waitForGrantedPass(t, "alpha", "m")
	// And a person deletes k's record: then bravo waits for alpha, and is
	// granted k only once alpha's pass succeeds
	f.bravoGetsKOnlyOnceAlphaStops(t, failing)
	// And alpha holds m
	f.waitForReason(t, "alpha", conditions.ReasonClaimed, wakeWithin)
}

func TestALostKeyIsToldEvenWhenTheCacheStillShowsTheConditionFromBeforeTheGrant(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given alpha waits for k behind bravo, and the cache's view of it then
	// is kept
	f.holdsAndWaits(t, "bravo", "k", "alpha")
	parked := f.widgetNow(t, "alpha")
	// And alpha then holds k and acts for it
	f.deleteWidget(t, "bravo")
	f.waitForReason(t, "alpha", conditions.ReasonClaimed, wakeWithin)
	f.createAndWait(t, "charlie", conditions.ReasonParked, "k")
	// When k is taken over for charlie while alpha's passes read the
	// Parked condition from before its grant, as a cache that has not yet
	// shown its own Claimed write would
	f.writes.staleWidget.Store(parked)
	f.takeOverFor(t, "k", "charlie")
	time.Sleep(time.Second)
	// Then, once the cache catches up, alpha is told to stop: no stale pass
	// wrote Parked over its Claimed condition
	f.writes.staleWidget.Store((*testcrd.Widget)(nil))
	f.waitForInnerCall(t, "alpha", "a pass told to stop", func(s claimmw.State) bool { return !s.Granted && !s.Deleting })
}

func TestAWaiterGetsAKeyErasedFromOutsideOnceItsDeletedPredecessorsDeletionPassSucceeded(t *testing.T) {
	t.Parallel()
	// Nothing but the predecessor's change may wake the waiter: its own
	// status writes do not reconcile it again.
	f := start(t, setup{statusChangesWakeNobody: true})
	// Given alpha keeps k while it waits for z, and bravo waits for k
	f.createWidget(t, "charlie", "z")
	f.waitForReason(t, "charlie", conditions.ReasonClaimed, wakeWithin)
	f.createWidget(t, "alpha", "k", "z")
	f.waitForReason(t, "alpha", conditions.ReasonParked, wakeWithin)
	f.createWidget(t, "bravo", "k")
	f.waitForReason(t, "bravo", conditions.ReasonParked, wakeWithin)
	// And alpha is deleted, its cleanup of k failing for now
	failing := f.failDeletionPassesOf("alpha")
	f.deleteWidgetAsync(t, "alpha")
	f.waitForDeletionPassGiven(t, "alpha", "k")
	// When k's record is deleted from outside, bravo waits for alpha
	f.deleteLease(t, "k")
	f.waitForReason(t, "bravo", conditions.ReasonWaitingForHandover, wakeWithin)
	// Then once alpha's deletion pass succeeds, bravo is granted k
	failing.Store(false)
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
}

// renewTimeOf returns the renew time of key's Lease.
func (f *fixture) renewTimeOf(t *testing.T, key string) time.Time {
	t.Helper()
	l := f.leaseOf(t, key)
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// waitForInnerCall waits until the inner reconciler of name ran a pass
// whose state is what.
func (f *fixture) waitForInnerCall(t *testing.T, name, what string, is func(claimmw.State) bool) {
	t.Helper()
	eventually(t, wakeWithin, func() (bool, string) {
		for _, c := range f.inner.callsOf(name) {
			if is(c.state) {
				return true, ""
			}
		}
		return false, name + " never ran " + what
	})
}

// renewedWhileWaiting checks that key's record is renewed, and waiter not
// granted it, for longer than a whole lease duration of shortRenewal.
func (f *fixture) renewedWhileWaiting(t *testing.T, key, waiter string) {
	t.Helper()
	first := f.renewTimeOf(t, key)
	f.neverClaimed(t, waiter, 4*time.Second)
	if later := f.renewTimeOf(t, key); !later.After(first) {
		t.Errorf("%s was not renewed while its holder stopped using it: renew time %v, then %v", key, first, later)
	}
}

// shortRenewal is a real-clock renewal short enough for a test to outlive a
// whole lease duration.
func shortRenewal(t *testing.T) setup {
	t.Helper()
	return renewalOf(t, 3*time.Second)
}

// renewalOf is the setup of time-based claims with a lease of duration,
// renewed every tenth of it, each renewal given two thirds of it.
func renewalOf(t *testing.T, duration time.Duration) setup {
	t.Helper()
	exp, err := expiry.New(duration, nil)
	if err != nil {
		t.Fatal(err)
	}
	return setup{
		opts:      []claimmw.Option{claimmw.WithRenewal(expiry.KeeperConfig{Duration: duration, RenewEvery: duration / 10, RenewDeadline: duration * 2 / 3})},
		claimOpts: []claim.Option{claim.WithLiveness(exp)},
	}
}

func TestAKeyBeingGivenUpStaysRenewedUntilItsToldPassSucceeds(t *testing.T) {
	t.Parallel()
	f := start(t, shortRenewal(t))
	failing := f.failToldPassesOf("alpha")
	// Given alpha holds k1 on time-based liveness and bravo waits for it
	f.holdsAndWaits(t, "alpha", "k1", "bravo")
	// When alpha swaps to k2 and its passes that stop using k1 fail
	f.setKeys(t, "alpha", "k2")
	f.waitForInnerCall(t, "alpha", "a pass told to give k1 up", func(s claimmw.State) bool { return len(s.Releasing) > 0 })
	// Then k1 is renewed all along, and bravo does not take it over even
	// after a whole lease duration
	f.renewedWhileWaiting(t, "k1", "bravo")
	// When alpha's told pass succeeds, bravo gets k1
	failing.Store(false)
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
}

// TestAHolderWhoseKeysTurnInvalidWhileItsClaimsCannotBeListedKeepsItsRecordRenewed:
// a pass that cannot compute the object's keys keeps, and renews, what the
// object holds; when it cannot list what that is either, it must not stop
// renewing everything: the object may still act for its keys.
func TestAHolderWhoseKeysTurnInvalidWhileItsClaimsCannotBeListedKeepsItsRecordRenewed(t *testing.T) {
	t.Parallel()
	var failLeaseLists atomic.Bool
	reader := interceptor.NewClient(env.TestClient(t), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, isLease := list.(*coordinationv1.LeaseList); isLease && failLeaseLists.Load() {
				return apierrors.NewServiceUnavailable("leases cannot be listed now")
			}
			return c.List(ctx, list, opts...)
		},
	})
	s := shortRenewal(t)
	s.opts = append(s.opts, claimmw.WithAPIReader(reader))
	f := start(t, s)
	failing := f.failToldPassesOf("alpha")
	// Given alpha holds k on time-based liveness and bravo waits for it
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	// When alpha's keys become unknown while the claims it holds cannot be
	// listed, and its passes told to stop fail
	failLeaseLists.Store(true)
	f.setKeys(t, "alpha", "k", failKeysFuncKey)
	f.waitForInnerCall(t, "alpha", "a pass told to stop", func(s claimmw.State) bool { return !s.Granted && !s.Deleting })
	// Then k stays renewed, and bravo does not take it over even after a
	// whole lease duration
	f.renewedWhileWaiting(t, "k", "bravo")
	failing.Store(false)
	failLeaseLists.Store(false)
}

func TestTheDeletionPathKeepsRenewingWhatTheObjectStillHolds(t *testing.T) {
	t.Parallel()
	f := start(t, shortRenewal(t))
	failing := f.failToldPassesOf("alpha")
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	// When alpha is deleted and its deletion pass (its cleanup) keeps failing
	f.deleteWidgetAsync(t, "alpha")
	f.waitForInnerCall(t, "alpha", "a deletion pass", func(s claimmw.State) bool { return s.Deleting })
	// Then k stays renewed, and bravo does not take it over while alpha cleans up
	f.renewedWhileWaiting(t, "k", "bravo")
	failing.Store(false)
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
}

func TestAHandoverIsCommittedOnlyToASuccessorWaitingForThatKey(t *testing.T) {
	t.Parallel()
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithHandover(handTo)}})
	// Given alpha holds k, charlie holds a, and bravo names a and k, so it
	// waits for a (held by charlie) before it could wait for k
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k")
	alpha, _ := f.widget(t, "alpha")
	f.createAndWait(t, "charlie", conditions.ReasonClaimed, "a")
	f.createAndWait(t, "bravo", conditions.ReasonParked, "a", "k")
	// When alpha hands k to bravo
	before := f.writes.snapshot()["update Lease"]
	f.edit(t, "alpha", func(w *testcrd.Widget) { w.Spec.HandTo = "bravo" })
	// Then alpha keeps k while bravo waits for a, and the handover does not
	// loop: a prepare, and nothing more
	time.Sleep(2 * time.Second)
	if rec := f.record(t, "k"); rec.Holder.UID != alpha.UID {
		t.Fatalf("record of k: holder %s, want alpha while bravo waits for another key", rec.Holder)
	}
	if n := f.writes.snapshot()["update Lease"] - before; n > 2 {
		t.Errorf("%d Lease updates while bravo could not take k, want the prepare only", n)
	}
	// When charlie lets a go, bravo takes a, waits for k, and alpha commits
	f.deleteWidgetAsync(t, "charlie")
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, 2*wakeWithin)
	f.waitForReason(t, "alpha", conditions.ReasonParked, wakeWithin)
}

// labelledSetup is a fixture whose claim records carry team=x and whose
// Lease cache sees only records with that label, as the docs recommend.
// The stamp a starting process gives the records of its set whose labels
// differ from what it writes leaves a record without a set alone: a stamp
// writes the set too, and which middleware of the kind such a record
// belongs to (it may be another's, written before sets existed) is decided
// by its holder's passes, not by whichever middleware starts first.
func TestTheStampAtStartLeavesARecordWithoutASetToItsHoldersPasses(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	f, stop := startIn(t, ns, setup{})
	// Given alpha holds k under a release without claim labels, its record
	// as a version without sets wrote it
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k")
	l := f.leaseOf(t, "k")
	delete(l.Annotations, backends.DefaultSetAnnotation)
	if err := direct(t).Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	// When the operator is upgraded to claim labels and has not got to
	// alpha's first pass yet
	f, _ = restartHoldingBack(t, ns, stop, labelledSetup(), named("alpha"))
	// Then the record still carries no set, and no labels of the new
	// release, until alpha's pass decides
	time.Sleep(2 * time.Second)
	if l := f.leaseOf(t, "k"); l.Annotations[backends.DefaultSetAnnotation] != "" || l.Labels["team"] != "" {
		t.Fatalf("the record of k was stamped before alpha's pass: labels %v, set %q", l.Labels, l.Annotations[backends.DefaultSetAnnotation])
	}
}

func labelledSetup() setup {
	labels := map[string]string{"team": "x"}
	return setup{claimCfg: &claim.Config{Labels: labels}, leaseLabels: labels}
}

// recordBeforeLabels writes key's record for the Widget name as a release of
// the operator before Config.Labels was set did: without the labels.
func (f *fixture) recordBeforeLabels(t *testing.T, key, name string) {
	t.Helper()
	h := f.holderOf(t, name)
	cfg := f.mw.Claimer().Config()
	old, err := claim.New(env.APIReader, direct(t), claim.Config{Namespace: f.ns, Set: cfg.Set}, claim.WithBackend(lease.Backend))
	if err != nil {
		t.Fatal(err)
	}
	if _, o, err := old.Acquire(context.Background(), key, h); err != nil || !o.Granted() {
		t.Fatalf("writing %s's record of %s without labels: %+v, %v", name, key, o, err)
	}
}

func TestAKeySwappedAfterAnUpgradeIsReleasedThoughTheCacheCannotSeeItsOldRecord(t *testing.T) {
	t.Parallel()
	f := start(t, labelledSetup())
	// Given alpha holds old through a record written before the labels
	// existed, invisible to the manager's Lease cache, and bravo names old
	f.createAndWait(t, "alpha", conditions.ReasonNoKeys)
	f.recordBeforeLabels(t, "old", "alpha")
	f.createAndWait(t, "bravo", conditions.ReasonParked, "old")
	// When alpha's spec moves to new
	f.setKeys(t, "alpha", "new")
	// Then alpha gives old up and bravo gets it: no deadlock
	f.waitForReason(t, "alpha", conditions.ReasonClaimed, wakeWithin)
	f.touch(t, "bravo")
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
}

// A key an object gave up under a release without claim labels, whose
// record that release did not get to delete (its Lease deletes failed, or
// it was stopped for the upgrade between the told pass and the release),
// is released by the release that adds claim.Config.Labels and restricts
// its Lease cache to them (docs/middleware.md, Upgrades; "no leak"): the
// holder's condition already speaks of its current keys when the new
// release starts, so no pass after a spec change lists its records
// uncached for it, and its cache cannot show that record.
func TestAKeyGivenUpJustBeforeAnUpgradeThatAddsClaimLabelsIsReleasedAfterIt(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	f, stop := startIn(t, ns, setup{})
	// Given, under a release without claim labels, alpha held old and bravo
	// waited for it
	f.holdsAndWaits(t, "alpha", "old", "bravo")
	// And alpha moved to k: its told pass succeeded and it says Claimed for
	// k, but the release of old failed
	f.writes.failLeaseDeletes.Store(true)
	f.setKeys(t, "alpha", "k")
	eventually(t, 10*time.Second, func() (bool, string) {
		c := f.claimed(t, "alpha")
		return c.Reason == string(conditions.ReasonClaimed) && c.ObservedGeneration == 2 && !strings.Contains(c.Message, "may still act"),
			fmt.Sprintf("alpha: %+v", c)
	})
	if !f.leaseExists(t, "old") {
		t.Fatal("old was released although its Lease deletes fail")
	}

	// When the operator is upgraded to claim labels, its Lease cache
	// restricted to them, and both objects are reconciled
	stop()
	f, _ = startIn(t, ns, labelledSetup())
	f.touch(t, "alpha")
	f.touch(t, "bravo")

	// Then alpha's record of old, a key it no longer names, is released,
	// and bravo gets it
	eventually(t, 10*time.Second, func() (bool, string) {
		c := f.claimed(t, "bravo")
		return c.Reason == string(conditions.ReasonClaimed),
			fmt.Sprintf("bravo: %+v; alpha: %+v; record of old: %+v", c, f.claimed(t, "alpha"), f.record(t, "old"))
	})
}

func TestAReenteredRecordWrittenBeforeTheLabelsIsStampedWithThem(t *testing.T) {
	t.Parallel()
	f := start(t, labelledSetup())
	f.createAndWait(t, "alpha", conditions.ReasonNoKeys)
	f.recordBeforeLabels(t, "k", "alpha")
	// When alpha names k, which it already holds
	f.setKeys(t, "alpha", "k")
	f.waitForReason(t, "alpha", conditions.ReasonClaimed, wakeWithin)
	// Then its record carries the labels, so the cache and its wake-ups see it
	l := &coordinationv1.Lease{}
	name := f.mw.Claimer().Config().NameFunc("k")
	eventually(t, wakeWithin, func() (bool, string) {
		if err := env.APIReader.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, l); err != nil {
			return false, err.Error()
		}
		return l.Labels["team"] == "x", fmt.Sprintf("labels of k's Lease: %v", l.Labels)
	})
}

func TestTheDeletionPassIsToldEveryRecordTheObjectHoldsEvenOnesTheCacheCannotSee(t *testing.T) {
	t.Parallel()
	f := start(t, labelledSetup())
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k")
	// Given alpha also holds old through a record the cache cannot see
	f.recordBeforeLabels(t, "old", "alpha")
	// When alpha is deleted
	f.deleteWidgetAsync(t, "alpha")
	// Then a deletion pass is told each of both keys before it is released
	// (a pass lists uncached, so the first usually sees both), and both
	// are released
	eventually(t, wakeWithin, func() (bool, string) {
		_, err := f.widget(t, "alpha")
		return err != nil, "alpha is still there"
	})
	told := map[string]bool{}
	for _, c := range f.inner.callsOf("alpha") {
		if c.state.Deleting {
			for _, g := range c.state.Grants {
				told[g.Key] = true
			}
		}
	}
	if !told["k"] || !told["old"] {
		t.Errorf("deletion passes were told %v, want k and old", told)
	}
	if f.leaseExists(t, "old") || f.leaseExists(t, "k") {
		t.Error("a record of alpha outlived it")
	}
}

func TestYieldingToAnOlderObjectWritesNoRecord(t *testing.T) {
	t.Parallel()
	// Given an older sibling that wants k2 and could take it
	older := claim.Holder{APIVersion: testcrd.GroupVersion.String(), Kind: "Widget", Namespace: "elsewhere", Name: "older", UID: types.UID("older-uid"), Created: time.Now().Add(-time.Hour)}
	siblings := claim.SiblingsFunc(func(_ context.Context, key string, _ claim.Holder) ([]claim.Holder, error) {
		if key == "k2" {
			return []claim.Holder{older}, nil
		}
		return nil, nil
	})
	f := start(t, setup{claimOpts: []claim.Option{claim.WithSiblings(siblings)}})
	// When young names k1 and k2, both free
	f.createWidget(t, "young", "k1", "k2")
	// Then it yields, without creating k1's record and deleting it again
	f.waitForReason(t, "young", conditions.ReasonNotFirst, 10*time.Second)
	f.touch(t, "young")
	time.Sleep(time.Second)
	counts := f.writes.snapshot()
	if counts["create Lease"] != 0 || counts["delete Lease"] != 0 {
		t.Errorf("a yielding object wrote records: %d created, %d deleted", counts["create Lease"], counts["delete Lease"])
	}
}

func TestAKeyDeletedFromOutsideWhileItsHolderCleansUpIsNotGrantedToAWaiter(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	failing := f.failToldPassesOf("alpha")
	// Given alpha holds k and bravo waits for it
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	// When alpha is deleted and its deletion pass, given k, keeps failing
	// (its cleanup of k's workloads is not done)
	f.deleteWidgetAsync(t, "alpha")
	f.waitForDeletionPassGiven(t, "alpha", "k")
	// And a person deletes k's record while alpha still cleans up
	f.deleteLease(t, "k")
	// Then bravo is not granted k while alpha's window for k is open, and
	// once alpha's cleanup succeeds and alpha is gone, bravo gets k
	f.claimedOnlyOnceStopped(t, "bravo", 2*time.Second, func() { failing.Store(false) })
}

func TestAKeyDeletedFromOutsideIsNotGrantedThroughAnotherMiddlewareWhileItsHolderActs(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	// Two middlewares of one kind in one claim namespace: storage claims
	// spec.keys, network claims spec.handTo; both may name one key.
	st, nw := storageAndNetwork(t, ns)
	reason := func(f *fixture, name string, ct conditions.Type) metav1.Condition {
		return f.conditionOfType(t, name, ct)
	}
	// Given x acts for k through the storage middleware
	st.createWidget(t, "x", "k")
	eventually(t, 10*time.Second, func() (bool, string) {
		c := reason(st, "x", "StorageClaimed")
		return c.Reason == string(conditions.ReasonClaimed), fmt.Sprintf("x: %+v", c)
	})
	x, _ := st.widget(t, "x")
	// And y names k through the network middleware and waits for it
	y := &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "y"}, Spec: testcrd.WidgetSpec{HandTo: "k"}}
	if err := direct(t).Create(context.Background(), y); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		c := reason(nw, "y", "NetworkClaimed")
		return c.Reason == string(conditions.ReasonParked), fmt.Sprintf("y: %+v", c)
	})
	for round := range 8 {
		// When a person deletes k's record while x acts for it
		st.deleteLease(t, "k")
		// Then y is never granted k, and x holds it again
		for end := time.Now().Add(400 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if c := reason(nw, "y", "NetworkClaimed"); c.Status == metav1.ConditionTrue {
				t.Fatalf("round %d: y was granted k, freed from outside while x acted for it through the other middleware (x now: %+v)", round, reason(st, "x", "StorageClaimed"))
			}
		}
		eventually(t, wakeWithin, func() (bool, string) {
			rec := st.record(t, "k")
			return rec.Exists && rec.Holder.UID == x.UID, fmt.Sprintf("round %d: record of k: exists %t, holder %s", round, rec.Exists, rec.Holder)
		})
	}
}

// keysForbiddenLabel makes forbiddenKeys fail with an API error, as a keys
// function whose read of a referenced object is refused (RBAC) would.
const keysForbiddenLabel = "keys-forbidden"

// forbiddenKeys is specKeys, failing with Forbidden while the Widget carries
// keysForbiddenLabel: a claim error, not an invalid key.
func forbiddenKeys(ctx context.Context, obj client.Object) ([]string, error) {
	if obj.GetLabels()[keysForbiddenLabel] == "true" {
		return nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "storage-credentials", errors.New("injected: the keys function may not read its reference"))
	}
	return specKeys(ctx, obj)
}

func TestAHolderStoppingAfterAClaimErrorKeepsItsRecordRenewedAcrossARestart(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	s := shortRenewal(t)
	s.opts = append(s.opts, claimmw.WithKeys(forbiddenKeys))
	// alpha's passes told to stop fail: its workloads cannot be stopped yet
	s.innerFail = func(name string, c call) error {
		if name == "alpha" && !c.state.Granted {
			return errNotStopped
		}
		return nil
	}
	f, stop := startIn(t, ns, s)
	// Given alpha holds k on time-based liveness and bravo waits for it
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	// When alpha's keys function meets an API error: alpha is Stopping, and
	// its told passes fail
	f.edit(t, "alpha", func(w *testcrd.Widget) {
		if w.Labels == nil {
			w.Labels = map[string]string{}
		}
		w.Labels[keysForbiddenLabel] = "true"
	})
	f.waitForReason(t, "alpha", conditions.ReasonStopping, wakeWithin)
	// And the operator restarts
	stop()
	f, _ = startIn(t, ns, s)
	// Then alpha's record of k stays renewed while alpha is Stopping, and
	// bravo does not take k over, even after two lease durations
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if c := f.claimed(t, "bravo"); c.Status == metav1.ConditionTrue {
			t.Fatalf("bravo took k over while alpha may still act for it (alpha: %+v)", f.claimed(t, "alpha"))
		}
	}
	if got := f.claimed(t, "alpha").Reason; got != string(conditions.ReasonStopping) {
		t.Fatalf("alpha: reason %s, want Stopping while its told passes fail", got)
	}
}

func TestAClaimedHolderWhoseStatusWritesFailKeepsItsRecordRenewedAcrossARestart(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	s := shortRenewal(t)
	f, stop := startIn(t, ns, s)
	// Given alpha holds k on time-based liveness and bravo waits for it
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	// When the operator restarts, alpha's spec changed meanwhile (its keys
	// did not), and alpha's status can no longer be written (an admission
	// policy, RBAC on /status)
	stop()
	f.edit(t, "alpha", func(w *testcrd.Widget) { w.Spec.HandTo = "nobody" })
	s.failStatusOf = "alpha"
	f, _ = startIn(t, ns, s)
	eventually(t, wakeWithin, func() (bool, string) {
		return f.writes.failedStatus.Load() >= 1, "alpha's status write was never refused"
	})
	// Then alpha, still Claimed and never told to stop, keeps k renewed, and
	// bravo does not take k over, even after two lease durations
	for end := time.Now().Add(8 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if c := f.claimed(t, "bravo"); c.Status == metav1.ConditionTrue {
			t.Fatalf("bravo took k over while alpha acts for it (alpha: %+v)", f.claimed(t, "alpha"))
		}
	}
}

func TestAKeyDeletedFromOutsideIsNotGrantedWhileItsHolderWithUnknownKeysIsStopping(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	failing := f.failToldPassesOf("alpha")
	// Given alpha holds k and bravo waits for it
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k")
	alpha, _ := f.widget(t, "alpha")
	f.createAndWait(t, "bravo", conditions.ReasonParked, "k")
	// When alpha's spec, still naming k, gets a reference its keys function
	// cannot resolve: alpha keeps k, is Stopping, and its told passes fail
	f.setKeys(t, "alpha", "k", failKeysFuncKey)
	f.waitForReason(t, "alpha", conditions.ReasonStopping, wakeWithin)
	if rec := f.record(t, "k"); !rec.Exists || rec.Holder.UID != alpha.UID {
		t.Fatalf("record of k while alpha's keys are unknown: exists %t, holder %s; want alpha's", rec.Exists, rec.Holder)
	}
	// And a person deletes k's record
	f.deleteLease(t, "k")
	// Then bravo is not granted k while alpha may still act for it
	f.neverClaimed(t, "bravo", 2*time.Second)
	// And once alpha's told pass succeeds, bravo gets k
	failing.Store(false)
	f.touch(t, "alpha")
	f.waitForReason(t, "alpha", conditions.ReasonInvalidKey, wakeWithin)
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
}

// A holder Stopping after a claim error whose spec then moves to a free key
// has not yet had a told pass succeed for its old key: until one does, its
// condition must not say Claimed for the new spec, or a waiter that finds the
// old key's record deleted from outside takes the key while the holder may
// still act for it.
func TestAStoppingHolderThatMovesToAFreeKeyStillCountsForItsOldKeyUntilAToldPassSucceeds(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithKeys(forbiddenKeys)}})
	f.holderHoldsAAndWaiterWaits(t)

	// Its workloads for a do not stop: every pass not granted a fails.
	f.failPassesThatStop("holder", "a")
	f.edit(t, "holder", func(w *testcrd.Widget) {
		if w.Labels == nil {
			w.Labels = map[string]string{}
		}
		w.Labels[keysForbiddenLabel] = "true"
	})
	f.waitForReason(t, "holder", conditions.ReasonStopping, wakeWithin)

	// The claim error clears and its spec moves to the free key b at once.
	f.edit(t, "holder", func(w *testcrd.Widget) {
		delete(w.Labels, keysForbiddenLabel)
		w.Spec.Keys = []string{"b"}
	})
	f.waitForGrantedPass(t, "holder", "b")

	f.waiterWaitsOnceAIsDeletedFromOutside(t)
}

// A holder whose key-set edit parks it is Stopping for its new spec; once
// the key it waits for frees, its granted pass must not say Claimed for the
// new spec before a pass that stops its old key succeeded, or a waiter that
// finds the old key's record deleted from outside takes it while the holder
// may still act for it.
func TestAHolderParkedByAKeyEditStillCountsForItsOldKeyOnceTheNewKeysAreGranted(t *testing.T) {
	f := start(t, setup{})
	f.holderHoldsAAndWaiterWaits(t)
	f.createWidget(t, "blocker", "z")
	f.waitForReason(t, "blocker", conditions.ReasonClaimed, wakeWithin)

	// Its workloads for a do not stop: every pass not granted a fails.
	f.failPassesThatStop("holder", "a")
	f.setKeys(t, "holder", "b", "z")
	f.waitForReason(t, "holder", conditions.ReasonStopping, wakeWithin)

	// z frees: the holder is granted b and z, still not having stopped a.
	f.deleteWidget(t, "blocker")
	f.waitForGrantedPass(t, "holder", "z")

	f.waiterWaitsOnceAIsDeletedFromOutside(t)
}

// A deletion pass given a record is inside the object's acting window for
// that key, whatever its condition said before: a parked object that holds
// the first of its keys while it waits for the next acts for it in its
// deletion pass. Until a deletion pass succeeded, a waiter that finds that
// key's record deleted from outside must wait.
func TestAKeyDeletedFromOutsideIsNotGrantedWhileAParkedObjectsDeletionPassGivenItHasNotSucceeded(t *testing.T) {
	f := start(t, setup{})
	f.createWidget(t, "blocker", "z")
	f.waitForReason(t, "blocker", conditions.ReasonClaimed, wakeWithin)
	f.parksKeepingItsFirstKey(t, "holder", "a", "z")
	f.createWidget(t, "waiter", "a")
	f.waitForReason(t, "waiter", conditions.ReasonParked, wakeWithin)

	// Its cleanup does not finish: every deletion pass fails.
	f.failDeletionPassesOf("holder")
	f.deleteWidgetAsync(t, "holder")
	f.waitForDeletionPassGiven(t, "holder", "a")

	f.deleteLease(t, "a")
	f.neverClaimed(t, "waiter", 4*time.Second)
}

// A deletion pass that is given a record again, after an earlier one
// succeeded but the release failed (in a process restarted since: the one
// that saw the release fail releases the record untold), reopens the
// object's window for that key: it acts for State.Grants. Until that pass
// succeeded too, a waiter that finds the record deleted from outside must
// wait, though the object's condition already said Released.
func TestAKeyDeletedFromOutsideIsNotGrantedWhileALaterDeletionPassGivenItAgainHasNotSucceeded(t *testing.T) {
	// The holder's first deletion pass succeeds, and every later one fails
	var deletionPasses atomic.Int32
	s := setup{innerFail: func(n string, c call) error {
		if n == "holder" && c.state.Deleting && deletionPasses.Add(1) > 1 {
			return errNotStopped
		}
		return nil
	}}
	f, stop := startIn(t, env.Namespace(t), s)
	f.holderHoldsAAndWaiterWaits(t)
	// Its first deletion pass succeeds (it says Released), the release of a
	// fails, and the operator restarts
	f.writes.failLeaseDeletes.Store(true)
	f.deleteWidgetAsync(t, "holder")
	f.releaseFailedOnceItSaid(t, "holder", func(c metav1.Condition) bool { return c.Reason == string(conditions.ReasonReleased) })
	stop()
	f, _ = startIn(t, f.ns, s)
	// A later deletion pass is given a again (the condition said Released,
	// which that pass replaces at once)
	f.waitForDeletionPassGiven(t, "holder", "a")
	if got := f.claimed(t, "holder").Reason; got == string(conditions.ReasonReleased) {
		t.Fatalf("holder acts again for a in its deletion pass while its condition says %s", got)
	}

	f.deleteLease(t, "a")
	f.neverClaimed(t, "waiter", 4*time.Second)
}

// A record overwritten from outside with one that names a holder since gone
// (a Lease manifest saved earlier and applied again, a backup restored over
// it) frees the key of its live holder just as a deletion does: a waiter must
// not take it over while the object that held it may still act for it.
func TestAKeyWhoseRecordIsOverwrittenFromOutsideWithAGoneHolderIsNotTakenOverWhileItsHolderActs(t *testing.T) {
	f := start(t, setup{workers: 2})
	ghost := f.createWidget(t, "ghost")
	f.deleteWidget(t, "ghost")
	f.createWidget(t, "holder", "k")
	f.waitForReason(t, "holder", conditions.ReasonClaimed, wakeWithin)
	f.createWidget(t, "waiter", "k")
	f.waitForReason(t, "waiter", conditions.ReasonParked, wakeWithin)

	// The holder is in a granted pass, acting for k, until the test ends.
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { close(release) })
	f.inner.setHook(func(ctx context.Context, name string, c call) (reconcile.Result, error) {
		if name == "holder" && c.state.Granted {
			once.Do(func() { close(entered) })
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return reconcile.Result{}, nil
	})
	f.touch(t, "holder")
	select {
	case <-entered:
	case <-time.After(wakeWithin):
		t.Fatal("the holder never ran a granted pass")
	}

	l := f.leaseOf(t, "k")
	l.Annotations[backends.DefaultHolderNameAnnotation] = ghost.Name
	l.Annotations[backends.DefaultHolderUIDAnnotation] = string(ghost.UID)
	if err := direct(t).Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	f.neverClaimed(t, "waiter", 4*time.Second)
}

// referencedKeys is specKeys unless a ConfigMap named after the Widget with
// the suffix "-storage" exists: then its "keys" entry, comma-separated, as a
// keys function that resolves a storage reference would return.
func referencedKeys(ctx context.Context, obj client.Object) ([]string, error) {
	cm := &corev1.ConfigMap{}
	err := env.APIReader.Get(ctx, client.ObjectKey{Namespace: obj.GetNamespace(), Name: obj.GetName() + "-storage"}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return specKeys(ctx, obj)
	case err != nil:
		return nil, err
	}
	return strings.Split(cm.Data["keys"], ","), nil
}

// keysChangeWithoutANewGeneration pins the promise of the tests below: a
// keys function may resolve a reference, so an object's keys may change with
// its generation unchanged, from named to referenced. The object then still
// acts for dropped until a pass that stops it succeeded, and a waiter that
// finds dropped's record deleted from outside must wait for it.
func keysChangeWithoutANewGeneration(t *testing.T, named, referenced []string, dropped, gained string) {
	t.Helper()
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithKeys(referencedKeys)}})
	f.createWidget(t, "holder", named...)
	f.waitForReason(t, "holder", conditions.ReasonClaimed, wakeWithin)
	f.createWidget(t, "waiter", dropped)
	f.waitForReason(t, "waiter", conditions.ReasonParked, wakeWithin)

	// Its workloads for dropped do not stop: every pass not granted it fails.
	f.failPassesThatStop("holder", dropped)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "holder-storage"}, Data: map[string]string{"keys": strings.Join(referenced, ",")}}
	if err := direct(t).Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	f.touch(t, "holder")
	f.waitForInnerCall(t, "holder", "a pass granted the key it gained", func(s claimmw.State) bool {
		return s.Granted && namesKey(s.Grants, gained)
	})

	f.deleteLease(t, dropped)
	f.neverClaimed(t, "waiter", 4*time.Second)
}

func TestAHolderWhoseKeysChangeWithoutANewGenerationStillCountsForItsOldKeyUntilAToldPassSucceeds(t *testing.T) {
	keysChangeWithoutANewGeneration(t, []string{"a"}, []string{"b"}, "a", "b")
}

// A condition quotes at most five keys and counts the rest: two key sets that
// share their first five keys and their size must not read the same.
func TestAHolderOfMoreKeysThanItsConditionQuotesStillCountsForAnUnquotedKeyItDroppedUntilAToldPassSucceeds(t *testing.T) {
	keysChangeWithoutANewGeneration(t, []string{"a", "b", "c", "d", "e", "f", "k"}, []string{"a", "b", "c", "d", "e", "f", "z"}, "k", "z")
}

// A condition quotes each key cut to 256 bytes: two long keys that share
// their first 256 bytes must not read the same.
func TestAHolderOfALongKeyStillCountsForItWhenItsKeyChangesPastTheQuotedBytesUntilAToldPassSucceeds(t *testing.T) {
	prefix := strings.Repeat("p", conditions.MaxQuotedKeyLength)
	old, renamed := prefix+"-old", prefix+"-new"
	keysChangeWithoutANewGeneration(t, []string{old}, []string{renamed}, old, renamed)
}

func TestAnObjectBeingDeletedCountsForAKeyItStillHoldsButNoLongerNamesAfterARestart(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	// alpha's deletion passes fail while failing is set: its cleanup of
	// what it still holds is not done yet
	var failing atomic.Bool
	failing.Store(true)
	s := setup{innerFail: func(name string, c call) error {
		if name == "alpha" && c.state.Deleting && failing.Load() {
			return errNotStopped
		}
		return nil
	}}
	f, stop := startIn(t, ns, s)
	// Given alpha held k and stopped naming it, its told pass succeeded but
	// the release of k's record fails, and bravo waits for k
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	f.writes.failLeaseDeletes.Store(true)
	f.setKeys(t, "alpha")
	f.releaseFailedOnceItSaid(t, "alpha", func(c metav1.Condition) bool { return c.Reason == string(conditions.ReasonNoKeys) })
	// When alpha is deleted while the operator is stopped (the process that
	// saw the release fail releases k untold; a restarted one gives it to
	// the deletion pass once more), and its deletion pass, given k, fails
	stop()
	f.deleteWidgetAsync(t, "alpha")
	f, stop = startIn(t, ns, s)
	f.waitForDeletionPassGiven(t, "alpha", "k")
	// And the operator stops, a person deletes k's record meanwhile, and
	// the operator starts again (it never saw alpha hold k)
	stop()
	f.deleteLease(t, "k")
	f, _ = startIn(t, ns, s)
	// Then bravo is not granted k while alpha's deletion pass has not
	// succeeded
	f.neverClaimed(t, "bravo", 2*time.Second)
	// And once it succeeded, bravo is
	failing.Store(false)
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, 10*time.Second)
}

// A waiter that waits for a predecessor to stop (its record of k written,
// the predecessor still Stopping) is woken when the predecessor's told pass
// succeeds, whatever the predecessor says next: here that it waits for a
// handover of another key, prepared for it by a holder of another kind.
func TestAWaiterForAPredecessorIsWokenWhenThePredecessorStopsAndThenWaitsForAHandoverOfAnotherKey(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	ctx := context.Background()
	// Given xray acts for a and k, and sierra waits for k
	f.createAndWait(t, "xray", conditions.ReasonClaimed, "a", "k")
	xray := f.holderOf(t, "xray")
	f.createAndWait(t, "sierra", conditions.ReasonParked, "k")
	// And xray's passes told to stop fail for a while
	failing := f.failToldPassesOf("xray")
	// When a's record is taken over for a ConfigMap tango (a live holder of
	// another kind) that prepares a handover of a to xray: xray, blocked on
	// a, says Stopping
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "tango"}}
	if err := direct(t).Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	tango := claim.Holder{APIVersion: "v1", Kind: "ConfigMap", Namespace: f.ns, Name: "tango", UID: cm.UID}
	replica := f.expiredReplica(t)
	takeOver(t, replica, "a", tango)
	if _, err := replica.Prepare(ctx, "a", tango, xray); err != nil {
		t.Fatalf("preparing the handover of a from tango to xray: %v", err)
	}
	f.waitForReason(t, "xray", conditions.ReasonStopping, wakeWithin)
	// And a person deletes k's record: sierra writes its own and waits for
	// xray, which may still act for k
	f.deleteLease(t, "k")
	f.waitForReason(t, "sierra", conditions.ReasonWaitingForHandover, wakeWithin)
	// (its passes after its own condition write are done)
	time.Sleep(time.Second)
	// And then xray's told pass succeeds: it acts for nothing, and waits for
	// the handover of a
	failing.Store(false)
	f.touch(t, "xray")
	f.waitForReason(t, "xray", conditions.ReasonWaitingForHandover, wakeWithin)
	// Then sierra, woken by xray's change, acts for k within seconds
	f.waitForReason(t, "sierra", conditions.ReasonClaimed, wakeWithin)
}

// A waiter that waits for a predecessor to stop is woken when the
// predecessor stops acting for the key, also when it does so by a granted
// pass for the keys it names now (Stopping, then Claimed for them, within
// one generation), not only when it says it acts for nothing.
func TestAWaiterForAPredecessorIsWokenWhenThePredecessorStopsByAGrantedPassForItsOtherKeys(t *testing.T) {
	t.Parallel()
	f := start(t, setup{workers: 3})
	// Given charlie holds j, papa holds k, and whiskey waits for k
	f.createAndWait(t, "charlie", conditions.ReasonClaimed, "j")
	f.holdsAndWaits(t, "papa", "k", "whiskey")
	// And papa moves to j, held by charlie: it gives k up and says Stopping,
	// and its told passes fail for now
	failing := f.failToldPassesOf("papa")
	f.setKeys(t, "papa", "j")
	f.waitForReason(t, "papa", conditions.ReasonStopping, wakeWithin)
	// And a person deletes k's record: whiskey waits for papa, which may
	// still act for k
	f.deleteLease(t, "k")
	f.waitForReason(t, "whiskey", conditions.ReasonWaitingForHandover, wakeWithin)
	// When charlie is deleted, and papa acts for j in a granted pass that
	// no longer names k, whose condition write comes after the passes
	// charlie's deletion woke
	f.writes.beforeStatus.Store(func(obj client.Object) {
		w, ok := obj.(*testcrd.Widget)
		if !ok || w.Name != "papa" || !strings.Contains(fmt.Sprint(w.Status.Conditions), `Holds key "j"`) {
			return
		}
		time.Sleep(2 * time.Second)
	})
	f.deleteWidgetAsync(t, "charlie")
	f.waitForReason(t, "papa", conditions.ReasonClaimed, 10*time.Second)
	if !failing.Load() {
		t.Fatal("papa's told passes were let succeed")
	}
	// Then whiskey, whose predecessor acts for j only now, acts for k within
	// seconds
	f.waitForReason(t, "whiskey", conditions.ReasonClaimed, wakeWithin)
}

func TestAToldPassThatAsksToRunAgainKeepsItsKeysFromOthersUntilAToldPassReturnsAZeroResult(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given alpha holds j and k, and bravo waits for k; alpha's passes told
	// to stop are not done stopping its workloads of k yet: they return no
	// error and ask to run again (as its deletion pass would, or a pass not
	// done moving off a key it hands over)
	stopped := f.passesAskToRunAgain("alpha", 500*time.Millisecond, func(s claimmw.State) bool { return !s.Granted })
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "j", "k")
	f.createAndWait(t, "xray", conditions.ReasonParked, "j")
	f.createAndWait(t, "bravo", conditions.ReasonParked, "k")
	// When j is taken over for xray: alpha waits for j, gives k up and is
	// told to stop
	f.takeOverFor(t, "j", "xray")
	f.waitForInnerCall(t, "alpha", "a pass told to stop", func(s claimmw.State) bool { return !s.Granted })
	// Then bravo is not granted k while alpha's told passes ask to run
	// again: alpha may still act for k, and its reconciler is run again
	f.neverClaimed(t, "bravo", 3*time.Second)
	if n := f.toldPasses("alpha"); n < 2 {
		t.Errorf("alpha's reconciler asked to run again to finish stopping, and was told %d time(s)", n)
	}
	// And once a told pass of alpha returns a zero Result, bravo gets k
	stopped.Store(true)
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
}

func TestAStoppingObjectWhoseKeysChangeToKeysItHoldsStillCountsAsActingForTheKeyItLostWhileItsGrantedPassesAskToRunAgain(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given alpha holds j and k, and xray waits for j; alpha's passes that
	// do not grant it j are not done stopping its workloads of j yet: they
	// return no error and ask to run again
	stopped := f.passesAskToRunAgain("alpha", 200*time.Millisecond, func(s claimmw.State) bool { return !s.Granted || !namesKey(s.Grants, "j") })
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "j", "k")
	f.createAndWait(t, "xray", conditions.ReasonParked, "j")
	// When j is taken over for xray (alpha is Stopping and told to stop),
	// and alpha's keys then change to k alone, which it holds
	f.takeOverFor(t, "j", "xray")
	f.waitForInnerCall(t, "alpha", "a pass told to stop", func(s claimmw.State) bool { return !s.Granted })
	f.setKeys(t, "alpha", "k")
	f.waitForInnerCall(t, "alpha", "a pass granted k alone", func(s claimmw.State) bool { return s.Granted && len(s.Grants) == 1 })
	// Then xray does not act for j while alpha's passes that do not grant
	// j ask to run again (alpha may still act for j), and once one returns
	// a zero Result, xray acts for j
	f.claimedOnlyOnceStopped(t, "xray", 3*time.Second, func() { stopped.Store(true) })
}

func TestAnObjectToldToStopAfterAClaimErrorStillCountsAsActingWhileItsToldPassAsksToRunAgain(t *testing.T) {
	t.Parallel()
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithKeys(forbiddenKeys)}})
	// Given alpha holds k and bravo waits for it; alpha's passes told to
	// stop are not done stopping its workloads: they return no error and
	// ask to run again
	f.passesAskToRunAgain("alpha", 500*time.Millisecond, func(s claimmw.State) bool { return !s.Granted })
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	// When alpha's keys function meets an API error (alpha is told to stop)
	f.edit(t, "alpha", func(w *testcrd.Widget) {
		if w.Labels == nil {
			w.Labels = map[string]string{}
		}
		w.Labels[keysForbiddenLabel] = "true"
	})
	f.waitForInnerCall(t, "alpha", "a pass told to stop", func(s claimmw.State) bool { return !s.Granted })
	// And a person deletes k's record
	f.deleteLease(t, "k")
	// Then bravo is not granted k while alpha's told passes ask to run again
	f.neverClaimed(t, "bravo", 3*time.Second)
}

// The acting window seen from the inner reconciler's passes, in the order
// they ran: an object acts for a key from a pass that is granted it (or a
// deletion pass given it) until a pass told to stop (or its deletion pass)
// returned success, and no other object acts for the key in between. Each
// test drives one interleaving and asks the recorder whether two windows
// overlapped, or whether a key nobody acts for reached its waiter.

// windows records, from the inner reconciler's passes, which Widgets act
// for one key, and every pass that began acting for it while another
// Widget's window was open.
type windows struct {
	key string
	mu  sync.Mutex
	// passes are the inner passes in the order they ran, as "name acts" or
	// "name stops".
	passes []string
	open   map[string]bool
	// overlaps are the passes that began acting while another window was
	// open.
	overlaps []string
	// failTold makes the passes of a name that are told to stop fail.
	failTold map[string]bool
	// failAll makes every pass of a name fail, after it was recorded.
	failAll map[string]bool
	// requeue, for a name, is the RequeueAfter of its passes that act.
	requeue map[string]time.Duration
	// releasing are the passes that were told to release the key while
	// another Widget's window was open.
	releasing []string
	// onActs, when set for a name, runs inside that Widget's next pass that
	// acts for the key (once), before the pass returns.
	onActs map[string]func()
}

// recordWindows installs the recorder as f's inner hook.
func recordWindows(f *fixture, key string) *windows {
	w := newWindows(key)
	f.inner.setHook(w.pass)
	return w
}

// newWindows records the acting windows of key of the inner reconcilers
// whose passes go to its pass.
func newWindows(key string) *windows {
	return &windows{key: key, open: map[string]bool{}, failTold: map[string]bool{}, failAll: map[string]bool{}, requeue: map[string]time.Duration{}, onActs: map[string]func(){}}
}

func (w *windows) pass(_ context.Context, name string, c call) (reconcile.Result, error) {
	given := namesKey(c.state.Grants, w.key)
	acts := given && (c.state.Granted || c.state.Deleting)
	handing := slices.ContainsFunc(c.state.Handovers, func(h claimmw.Handover) bool { return h.Key == w.key })
	w.mu.Lock()
	var then func()
	if acts {
		for other, open := range w.open {
			if open && other != name {
				what := "a granted pass"
				if c.state.Deleting {
					what = "a deletion pass given the key"
				}
				w.overlaps = append(w.overlaps, fmt.Sprintf("%s acts (%s) while %s may still act (passes so far: %q)", name, what, other, w.passes))
			}
		}
		w.open[name] = true
		w.passes = append(w.passes, name+" acts")
		then = w.onActs[name]
		delete(w.onActs, name)
	}
	if namesKey(c.state.Releasing, w.key) {
		for other, open := range w.open {
			if open && other != name {
				w.releasing = append(w.releasing, fmt.Sprintf("%s is told to release the key (its reconciler cleans up what it used it for) while %s may still act (passes so far: %q)", name, other, w.passes))
			}
		}
	}
	told := !acts || handing
	if told && w.failTold[name] || w.failAll[name] {
		w.mu.Unlock()
		return reconcile.Result{}, errNotStopped
	}
	w.mu.Unlock()
	if then != nil {
		then()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	res := reconcile.Result{}
	if acts {
		// A pass not done moving off a key it hands over asks to be run again.
		res.RequeueAfter = w.requeue[name]
	}
	if told && res.IsZero() || c.state.Deleting {
		if w.open[name] {
			w.passes = append(w.passes, name+" stops")
		}
		w.open[name] = false
	}
	return res, nil
}

func (w *windows) acted(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Contains(w.passes, name+" acts")
}

func (w *windows) setFailTold(name string, fail bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failTold[name] = fail
}

func (w *windows) setFailAll(name string, fail bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failAll[name] = fail
}

func (w *windows) setRequeue(name string, after time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.requeue[name] = after
}

func (w *windows) whenActs(name string, then func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.onActs[name] = then
}

// noOverlap fails the test for every pass that acted while another window
// was open.
func (w *windows) noOverlap(t *testing.T) {
	t.Helper()
	w.errorEach(t, &w.overlaps)
}

// noReleasingWhileAnotherActs fails the test for every pass that was told
// to release the key while another Widget's window was open.
func (w *windows) noReleasingWhileAnotherActs(t *testing.T) {
	t.Helper()
	w.errorEach(t, &w.releasing)
}

// errorEach reports every violation recorded in *violations, read under
// w.mu.
func (w *windows) errorEach(t *testing.T, violations *[]string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range *violations {
		t.Error(v)
	}
}

// waitActed waits until name acted for the key, for at most within.
func (w *windows) waitActed(name string, within time.Duration) bool {
	for deadline := time.Now().Add(within); !w.acted(name); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// deleteRecordOf deletes key's Lease as a person would, uncached.
func (f *fixture) deleteRecordOf(ctx context.Context, key string) error {
	l := &coordinationv1.Lease{}
	name := f.mw.Claimer().Config().NameFunc(key)
	if err := env.APIReader.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: name}, l); err != nil {
		return err
	}
	return env.Client.Delete(ctx, l)
}

// bravoKeepsARecordWhileAlphaStops starts a fixture in which bravo holds
// k's record without acting for it (WaitingForHandover), because alpha
// started acting for k between bravo's check for a predecessor and bravo's
// Create, and alpha's told passes fail: alpha may still act for k.
func bravoKeepsARecordWhileAlphaStops(t *testing.T) (*fixture, *windows) {
	t.Helper()
	f := start(t, setup{workers: 2})
	w := recordWindows(f, "k")
	// Given charlie holds k and bravo waits for it
	f.holdsAndWaits(t, "charlie", "k", "bravo")
	// And bravo, finding k free once charlie gave it up, writes its record;
	// before that write lands, alpha finds k free, holds it and acts, and a
	// person deletes alpha's record. alpha's own next create waits until
	// bravo's has landed, so bravo's record is the one written.
	var once sync.Once
	recreated := make(chan struct{})
	f.writes.beforeLeaseCreate.Store(func(l *coordinationv1.Lease) {
		switch l.Annotations[backends.DefaultHolderNameAnnotation] {
		case "alpha":
			if w.acted("alpha") {
				select {
				case <-recreated:
				case <-time.After(10 * time.Second):
				}
			}
		case "bravo":
			once.Do(func() {
				ctx := context.Background()
				a := &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "alpha"}, Spec: testcrd.WidgetSpec{Keys: []string{"k"}}}
				if err := env.Client.Create(ctx, a); err != nil {
					t.Errorf("creating alpha: %v", err)
					return
				}
				if !w.waitActed("alpha", 10*time.Second) {
					t.Errorf("alpha never acted for k while bravo's record write waited")
					return
				}
				if err := f.deleteRecordOf(ctx, "k"); err != nil {
					t.Errorf("deleting alpha's record of k: %v", err)
				}
				go func() {
					defer close(recreated)
					for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
						if f.leaseExists(t, "k") {
							return
						}
					}
				}()
			})
		}
	})
	// And alpha's passes told to stop fail (its workloads take time to stop)
	w.setFailTold("alpha", true)
	f.setKeys(t, "charlie")
	// So bravo keeps k's record without acting for it, waiting for alpha
	f.waitForReason(t, "bravo", conditions.ReasonWaitingForHandover, 10*time.Second)
	f.waitForReason(t, "alpha", conditions.ReasonStopping, 10*time.Second)
	return f, w
}

func TestTheDeletionPassOfAWaiterKeepingARecordItNeverActedForIsNotGivenTheKeyWhileItsPredecessorMayStillAct(t *testing.T) {
	t.Parallel()
	f, w := bravoKeepsARecordWhileAlphaStops(t)
	// When bravo is deleted while alpha is still stopping
	f.deleteWidgetAsync(t, "bravo")
	time.Sleep(2 * time.Second)
	// And alpha's told pass then succeeds
	w.setFailTold("alpha", false)
	f.waitGone(t, "bravo", 10*time.Second)
	// Then no deletion pass of bravo acted for k (it was given k in its
	// Grants) while alpha still might: bravo never acted for k, and its
	// deletion path cleans up what alpha still uses
	w.noOverlap(t)
}

// keptFinalizer is another controller's finalizer (or the foregroundDeletion
// finalizer of a cascading delete): it keeps a Widget being deleted after
// the middleware's own deletion path finished.
const keptFinalizer = "example.com/keep"

// createKeptWidget creates a Widget that keptFinalizer keeps once deleted,
// and removes that finalizer when the test ends.
func (f *fixture) createKeptWidget(t *testing.T, name string, keys ...string) {
	t.Helper()
	w := &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Finalizers: []string{keptFinalizer}}, Spec: testcrd.WidgetSpec{Keys: keys}}
	if err := direct(t).Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.edit(t, name, func(w *testcrd.Widget) {
			w.Finalizers = slices.DeleteFunc(w.Finalizers, func(s string) bool { return s == keptFinalizer })
		})
	})
}

// aKeyNobodyActsForReachesItsWaiter is the body of the tests below: delta,
// which never acted for any key, is deleted, and its deletion path (given
// no grants) either succeeds while another controller's finalizer keeps it,
// or keeps failing; a free key must still be granted to the object that
// asks for it.
func aKeyNobodyActsForReachesItsWaiter(t *testing.T, deltaKeys []string, deltaSays conditions.Reason, deletionFails bool) {
	f := start(t, setup{})
	// Given delta never acted (its keys are held elsewhere, or cannot be
	// computed) and is deleted, with no grants in its deletion passes
	f.createAndWait(t, "charlie", conditions.ReasonClaimed, "k")
	if deletionFails {
		f.failDeletionPassesOf("delta")
		f.createWidget(t, "delta", deltaKeys...)
	} else {
		f.createKeptWidget(t, "delta", deltaKeys...)
	}
	f.waitForReason(t, "delta", deltaSays, 10*time.Second)
	f.deleteWidgetAsync(t, "delta")
	f.waitForInnerCall(t, "delta", "a deletion pass", func(s claimmw.State) bool { return s.Deleting && len(s.Grants) == 0 })
	if !deletionFails {
		eventually(t, 10*time.Second, func() (bool, string) {
			d, err := f.widget(t, "delta")
			return err == nil && !slices.Contains(d.Finalizers, string(claimmw.DefaultFinalizer)), fmt.Sprintf("delta still has the middleware's finalizer: %+v, %v", d.Finalizers, err)
		})
	}
	// When k is free (charlie stops naming it) and bravo asks for it
	f.setKeys(t, "charlie")
	f.waitForReason(t, "charlie", conditions.ReasonNoKeys, 10*time.Second)
	f.createWidget(t, "bravo", "k")
	// Then bravo is granted k: nobody acts for it
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, 10*time.Second)
}

func TestAFreeKeyIsGrantedThoughAnObjectThatNamedItAndNeverActedIsKeptBeingDeletedByAnotherFinalizer(t *testing.T) {
	t.Parallel()
	aKeyNobodyActsForReachesItsWaiter(t, []string{"k"}, conditions.ReasonParked, false)
}

func TestAFreeKeyIsGrantedThoughAnObjectWithUnknownKeysIsKeptBeingDeletedByAnotherFinalizer(t *testing.T) {
	t.Parallel()
	aKeyNobodyActsForReachesItsWaiter(t, []string{failKeysFuncKey}, conditions.ReasonInvalidKey, false)
}

func TestAFreeKeyIsGrantedThoughAnObjectThatNamedItAndNeverActedHasADeletionPassThatKeepsFailing(t *testing.T) {
	t.Parallel()
	aKeyNobodyActsForReachesItsWaiter(t, []string{"k"}, conditions.ReasonParked, true)
}

// heldKThenLostItToCharlie creates name holding k and returns it as it was
// then (Claimed for k), then has k taken over for charlie, which acts for
// it, once name was told and says Parked.
func (f *fixture) heldKThenLostItToCharlie(t *testing.T, name string) *testcrd.Widget {
	t.Helper()
	f.createWidget(t, name, "k")
	f.waitForReason(t, name, conditions.ReasonClaimed, 10*time.Second)
	claimedThen := f.widgetNow(t, name)
	f.createAndWait(t, "charlie", conditions.ReasonParked, "k")
	f.takeOverFor(t, "k", "charlie")
	f.waitForReason(t, "charlie", conditions.ReasonClaimed, 10*time.Second)
	f.waitForReason(t, name, conditions.ReasonParked, 10*time.Second)
	return claimedThen
}

func TestAnObjectWhoseCacheStillShowsAnEarlierGrantSaysItActsInTheAPIServerBeforeItActsForARecreatedRecord(t *testing.T) {
	t.Parallel()
	f := start(t, setup{workers: 2})
	w := recordWindows(f, "k")
	// Given bravo held k, and the cache's view of it then is kept
	// And bravo lost k to charlie (taken over), was told, and says Parked
	claimedThen := f.heldKThenLostItToCharlie(t, "bravo")
	// When charlie gives k up and bravo's pass, woken by the release, reads
	// its Claimed condition from before it lost k (a cache that has not yet
	// shown its own Parked write): it writes its record and acts
	f.writes.staleWidget.Store(claimedThen)
	w.whenActs("bravo", func() {
		// And while bravo's pass acts (the API server still says it is
		// Parked), a person deletes k's record and alpha asks for k
		f.writes.staleWidget.Store((*testcrd.Widget)(nil))
		ctx := context.Background()
		if err := f.deleteRecordOf(ctx, "k"); err != nil {
			t.Errorf("deleting bravo's record of k: %v", err)
			return
		}
		a := &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "alpha"}, Spec: testcrd.WidgetSpec{Keys: []string{"k"}}}
		if err := env.Client.Create(ctx, a); err != nil {
			t.Errorf("creating alpha: %v", err)
			return
		}
		w.waitActed("alpha", 3*time.Second)
	})
	f.setKeys(t, "charlie")
	if !w.waitActed("bravo", 10*time.Second) {
		t.Fatalf("bravo never acted for k after charlie gave it up: passes %q; bravo %+v", w.passes, f.claimed(t, "bravo"))
	}
	time.Sleep(time.Second)
	// Then alpha does not act for k while bravo may: bravo's pass that acts
	// was granted k, and it has not been told to stop since
	w.noOverlap(t)
}

func TestAWaiterKeepingARecordItNeverActedForIsNotToldToReleaseItWhileItsPredecessorMayStillAct(t *testing.T) {
	t.Parallel()
	f, w := bravoKeepsARecordWhileAlphaStops(t)
	// When bravo stops naming k while alpha is still stopping
	f.setKeys(t, "bravo")
	f.waitForReason(t, "bravo", conditions.ReasonNoKeys, 10*time.Second)
	time.Sleep(time.Second)
	// And alpha's told pass then succeeds
	w.setFailTold("alpha", false)
	f.waitForReason(t, "alpha", conditions.ReasonClaimed, 10*time.Second)
	// Then bravo's reconciler was never told to release k (State.Releasing,
	// whose keys the reconciler stops using and cleans up, as the
	// documentation's example drops the key's data) while alpha still
	// might act for k: bravo never acted for it
	w.noReleasingWhileAnotherActs(t)
	w.noOverlap(t)
}

// handJTo is a HandoverFunc that hands key j, and only j, to the Widget
// spec.handTo names.
func handJTo(_ context.Context, obj client.Object, key string) (client.ObjectKey, bool, error) {
	w := obj.(*testcrd.Widget)
	if key != "j" || w.Spec.HandTo == "" {
		return client.ObjectKey{}, false, nil
	}
	return client.ObjectKey{Name: w.Spec.HandTo}, true, nil
}

func TestAHandoverIsNotCommittedByAPassThatWasNotToldToStopBecauseItsCacheShowedAnOlderParkedCondition(t *testing.T) {
	t.Parallel()
	f := start(t, setup{workers: 2, opts: []claimmw.Option{claimmw.WithHandover(handJTo)}})
	w := recordWindows(f, "j")
	// Given zulu holds k, and yankee (naming j and k, handing j to xray, who
	// does not exist yet) holds j and waits for k; the cache's view of
	// yankee then is kept
	f.createWidget(t, "zulu", "k")
	f.waitForReason(t, "zulu", conditions.ReasonClaimed, wakeWithin)
	y := &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "yankee"}, Spec: testcrd.WidgetSpec{Keys: []string{"j", "k"}, HandTo: "xray"}}
	if err := direct(t).Create(context.Background(), y); err != nil {
		t.Fatal(err)
	}
	f.waitForReason(t, "yankee", conditions.ReasonParked, wakeWithin)
	parkedThen := f.widgetNow(t, "yankee")
	// And yankee's passes are not done moving off j yet (a parked pass of
	// a holder keeping a key commits its handover too)
	w.setRequeue("yankee", time.Hour)
	// And xray names j and waits for it
	f.createWidget(t, "xray", "j")
	f.waitForReason(t, "xray", conditions.ReasonParked, wakeWithin)
	// And yankee then gets k and acts for j and k; the handover of j to
	// xray, prepared, waits
	f.setKeys(t, "zulu")
	f.waitForReason(t, "yankee", conditions.ReasonClaimed, wakeWithin)
	f.waitForReason(t, "xray", conditions.ReasonWaitingForHandover, wakeWithin)
	f.setKeys(t, "zulu", "k")
	f.waitForReason(t, "zulu", conditions.ReasonParked, wakeWithin)
	// When k is taken over for zulu while yankee's passes read its Parked
	// condition from before it got k (a cache that has not yet shown its
	// Claimed write), and yankee's passes told to stop fail (its workloads
	// take time to stop)
	w.setFailTold("yankee", true)
	f.writes.staleWidget.Store(parkedThen)
	f.takeOverFor(t, "k", "zulu")
	time.Sleep(2 * time.Second)
	f.writes.staleWidget.Store((*testcrd.Widget)(nil))
	time.Sleep(time.Second)
	// Then xray does not act for j while yankee may: no pass of yankee told
	// to stop, or done with the handover of j, has succeeded since it acted
	// for j
	w.noOverlap(t)
}

// charlieLetsKGoWhileItsActorStopsSlowly is the When of the tests of an
// actor whose told passes fail for a while (set by the test): charlie stops
// naming k, actor acts for k, and its told passes succeed a second later.
func (f *fixture) charlieLetsKGoWhileItsActorStopsSlowly(t *testing.T, w *windows, actor string) {
	t.Helper()
	f.setKeys(t, "charlie")
	eventually(t, 10*time.Second, func() (bool, string) { return w.acted(actor), actor + " never acted for k" })
	time.Sleep(time.Second)
	w.setFailTold(actor, false)
}

// startsActingBeforeCreateOf makes name start acting for key while the
// first record of key that holder's pass writes waits to be sent: name (a
// new Widget) is created, finds key free, holds it and acts, and then a
// person deletes name's record, so that holder's write succeeds.
func (f *fixture) startsActingBeforeCreateOf(t *testing.T, w *windows, holder, name, key string) {
	var once sync.Once
	var deleted atomic.Bool
	f.writes.beforeLeaseCreate.Store(func(lease *coordinationv1.Lease) {
		if lease.Annotations[backends.DefaultHolderNameAnnotation] == name && deleted.Load() {
			// Its own record was deleted to let holder's write through: it
			// writes again only after that write landed, so that the race
			// the test is about is not won by it instead.
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if r, err := f.mw.Claimer().Current(context.Background(), key); err == nil && r.Exists {
					return
				}
			}
			return
		}
		if lease.Annotations[backends.DefaultHolderNameAnnotation] != holder {
			return
		}
		once.Do(func() {
			ctx := context.Background()
			obj := &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}, Spec: testcrd.WidgetSpec{Keys: []string{key}}}
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Errorf("creating %s: %v", name, err)
				return
			}
			if !w.waitActed(name, 10*time.Second) {
				t.Errorf("%s never acted for %s while %s's record write waited", name, key, holder)
				return
			}
			rec := &coordinationv1.Lease{}
			if err := env.APIReader.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: f.mw.Claimer().Config().NameFunc(key)}, rec); err != nil {
				t.Errorf("reading %s's record of %s: %v", name, key, err)
				return
			}
			deleted.Store(true)
			if err := env.Client.Delete(ctx, rec); err != nil {
				t.Errorf("deleting %s's record of %s: %v", name, key, err)
			}
		})
	})
}

func TestAWaiterDoesNotActForAKeyAnotherObjectStartedActingForBeforeTheWaitersRecordWasWritten(t *testing.T) {
	t.Parallel()
	f := start(t, setup{workers: 2})
	w := recordWindows(f, "k")
	// Given charlie holds k and bravo waits for it
	f.holdsAndWaits(t, "charlie", "k", "bravo")
	// And bravo, finding k free once charlie gave it up, asks whether an
	// earlier holder still acts for it (none does) and writes its record;
	// before that write lands, alpha is created, holds k and acts, and a
	// person deletes alpha's record
	f.startsActingBeforeCreateOf(t, w, "bravo", "alpha", "k")
	// And alpha's passes told to stop fail for a while (its workloads take
	// time to stop)
	w.setFailTold("alpha", true)
	// When charlie stops naming k
	f.charlieLetsKGoWhileItsActorStopsSlowly(t, w, "alpha")
	// Then bravo acts for k, but only after alpha's told pass succeeded
	eventually(t, 10*time.Second, func() (bool, string) {
		return w.acted("bravo"), fmt.Sprintf("bravo never acted for k: bravo %+v; alpha %+v", f.claimed(t, "bravo"), f.claimed(t, "alpha"))
	})
	w.noOverlap(t)
}

func TestAWaiterWhoseCacheStillShowsItClaimedDoesNotActForAKeyAnotherObjectStartedActingFor(t *testing.T) {
	t.Parallel()
	f := start(t, setup{workers: 2})
	w := recordWindows(f, "k")
	// Given alpha held k, and its manager's cache still shows it Claimed
	// for k as it was then
	// And alpha lost k to charlie and stopped
	f.writes.staleWidget.Store(f.heldKThenLostItToCharlie(t, "alpha"))
	// And alpha, finding k free once charlie gave it up, writes its record;
	// before that write lands, bravo is created, holds k and acts, and a
	// person deletes bravo's record
	f.startsActingBeforeCreateOf(t, w, "alpha", "bravo", "k")
	w.setFailTold("bravo", true)
	// When charlie stops naming k
	f.charlieLetsKGoWhileItsActorStopsSlowly(t, w, "bravo")
	f.writes.staleWidget.Store((*testcrd.Widget)(nil))
	// Then alpha acts for k again, but only after bravo's told pass succeeded
	eventually(t, 10*time.Second, func() (bool, string) {
		return w.acted("alpha"), fmt.Sprintf("alpha never acted for k again: alpha %+v; bravo %+v", f.claimed(t, "alpha"), f.claimed(t, "bravo"))
	})
	w.noOverlap(t)
}

func TestAKeyAHolderActedForIsNotGrantedAfterItsKeysChangeBackWithoutANewGenerationUntilAToldPassSucceeds(t *testing.T) {
	t.Parallel()
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithKeys(referencedKeys)}})
	w := recordWindows(f, "b")
	// Given holder acts for a
	f.createWidget(t, "holder", "a")
	f.waitForReason(t, "holder", conditions.ReasonClaimed, wakeWithin)
	// And every pass of holder fails from now on (its workloads do not
	// settle)
	w.setFailAll("holder", true)
	// And its storage reference resolves to b for a while, without a new
	// generation: a pass is granted b (holder acts for it) and fails, so its
	// condition still says Claimed for a
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "holder-storage"}, Data: map[string]string{"keys": "b"}}
	if err := direct(t).Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	f.touch(t, "holder")
	if !w.waitActed("holder", wakeWithin) {
		t.Fatalf("holder was never granted b")
	}
	// And then resolves to a again: its passes, granted a and told to stop
	// using b, fail too, so holder may still act for b
	if err := direct(t).Delete(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	f.touch(t, "holder")
	f.waitForInnerCall(t, "holder", "a pass granted a after b", func(s claimmw.State) bool {
		return s.Granted && namesKey(s.Releasing, "b")
	})
	// When a person deletes b's record and waiter asks for b
	f.deleteLease(t, "b")
	f.createWidget(t, "waiter", "b")
	time.Sleep(3 * time.Second)
	// Then waiter does not act for b while holder may: no pass of holder
	// told to stop using b has succeeded
	w.noOverlap(t)
	if c := f.claimed(t, "waiter"); c.Status == metav1.ConditionTrue {
		t.Errorf("waiter is Claimed for b while holder's told passes fail: %+v; holder %+v", c, f.claimed(t, "holder"))
	}
}

func TestAKeyAnObjectGaveUpIsNotNamedInItsReleasingAgainWhileAnotherObjectActsForItAndItsCacheStillShowsTheRecord(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	w := recordWindows(f, "k1")
	// Given alpha held k1 while bravo waited, and moved to k2: its pass
	// told to give k1 up succeeded, k1 was released, and bravo acts for it
	heldByAlpha := f.alphaGaveK1UpToBravo(t, w)
	eventually(t, 10*time.Second, func() (bool, string) {
		calls := f.inner.callsOf("alpha")
		last := calls[len(calls)-1].state
		return len(last.Releasing) == 0, fmt.Sprintf("alpha's last pass still gives keys up: %+v", last)
	})
	// When alpha's next pass lists its records from a Lease cache that has
	// not yet seen k1 released
	f.writes.leaseListsAt.Store(heldByAlpha)
	before := len(f.inner.callsOf("alpha"))
	f.touch(t, "alpha")
	eventually(t, 10*time.Second, func() (bool, string) {
		return len(f.inner.callsOf("alpha")) > before, "alpha had no pass after it was touched"
	})
	// Then it is not told to release k1 (its reconciler drops what k1 is
	// used for) while bravo acts for k1
	w.noReleasingWhileAnotherActs(t)
}

func TestAKeyAnObjectKeptWithoutActingIsNotGivenToItsLaterPassesAfterItsUntoldReleaseFailedWhileItsPredecessorMayStillAct(t *testing.T) {
	t.Parallel()
	f := start(t, setup{workers: 2})
	w := recordWindows(f, "k")
	// Given charlie holds k and bravo waits for it
	f.createAndWait(t, "charlie", conditions.ReasonClaimed, "k")
	f.createAndWait(t, "bravo", conditions.ReasonParked, "k")
	// And alpha starts acting for k between bravo's check and bravo's write
	// of k's record, after which alpha cannot write its status (an
	// admission policy refuses it) and its passes told to stop fail (its
	// workloads take time to stop): alpha may still act for k, and its
	// condition still says Claimed for it
	w.whenActs("alpha", func() {
		f.writes.failStatusOf.Store("alpha")
		w.setFailTold("alpha", true)
	})
	f.startsActingBeforeCreateOf(t, w, "bravo", "alpha", "k")
	f.setKeys(t, "charlie", "c")
	// So bravo keeps k's record without acting for it, waiting for alpha
	f.waitForReason(t, "bravo", conditions.ReasonWaitingForHandover, 10*time.Second)
	// And Lease deletes fail for a while (the API server is unavailable)
	f.writes.failLeaseDeletes.Store(true)
	t.Cleanup(func() { f.writes.failLeaseDeletes.Store(false) })
	// When bravo stops naming k and acts for a0 instead: k is to be
	// released untold, but its release fails, and is tried again
	before := len(f.inner.callsOf("bravo"))
	f.setKeys(t, "bravo", "a0")
	eventually(t, 10*time.Second, func() (bool, string) {
		n := len(f.inner.callsOf("bravo")) - before
		return n >= 2, fmt.Sprintf("bravo had %d passes after it stopped naming k; condition %+v", n, f.claimed(t, "bravo"))
	})
	// And bravo is then deleted
	f.deleteWidgetAsync(t, "bravo")
	f.waitForInnerCall(t, "bravo", "a deletion pass", func(s claimmw.State) bool { return s.Deleting })
	// Then no pass of bravo is told to release k, and no deletion pass of
	// bravo is given k, while alpha may still act for it: bravo never acted
	// for k, and its cleanup would touch what alpha uses
	w.noOverlap(t)
	w.noReleasingWhileAnotherActs(t)
}

func TestAnObjectThatStopsNamingEveryKeyStillCountsAsActingForThemUntilItsToldPassSucceeded(t *testing.T) {
	t.Parallel()
	f := start(t, setup{workers: 2})
	w := recordWindows(f, "k")
	// Given alpha holds k and acts for it, and bravo waits for it
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	if !w.waitActed("alpha", wakeWithin) {
		t.Fatal("alpha never acted for k")
	}
	// And alpha's passes told to stop fail for a while
	w.setFailTold("alpha", true)
	// When alpha stops naming any key, and a person deletes k's record
	// while alpha's told pass keeps failing
	f.setKeys(t, "alpha")
	eventually(t, wakeWithin, func() (bool, string) {
		c := f.claimed(t, "alpha")
		return c.Message != conditions.ForKeys(conditions.Claimed, []string{"k"}, 0).Message, fmt.Sprintf("alpha's condition never changed: %+v", c)
	})
	if err := f.deleteRecordOf(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	// Then bravo does not act for k while alpha may still act
	w.noOverlap(t)
	w.setFailTold("alpha", false)
	eventually(t, wakeWithin, func() (bool, string) {
		return w.acted("bravo"), fmt.Sprintf("bravo never acted for k once alpha's told pass succeeded: alpha %+v; bravo %+v", f.claimed(t, "alpha"), f.claimed(t, "bravo"))
	})
	w.noOverlap(t)
}

// A key an object acted for is named in its State.Releasing (its reconciler
// cleans up what the key was used for) before its record is released, even
// when the object's cache still shows an older Claimed for exactly the keys
// it names now and another object anywhere in the manager may act for any
// key: that cached condition was written before the object acted for the
// key, so it does not say the object stopped acting for it.
func TestAKeyAnObjectActedForIsNamedInItsReleasingWhenItsCacheStillShowsAnOlderClaimedForTheKeysItNamesNow(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given alpha acts for j
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "j")
	claimedForJ := f.widgetNow(t, "alpha")
	// And then for j and k: its pass granted k succeeded
	f.setKeys(t, "alpha", "j", "k")
	eventually(t, wakeWithin, func() (bool, string) {
		c := f.claimed(t, "alpha")
		return c.Message == conditions.ForKeys(conditions.Claimed, []string{"j", "k"}, 0).Message, fmt.Sprintf("alpha is not Claimed for j and k: %+v", c)
	})
	if !slices.ContainsFunc(f.inner.callsOf("alpha"), func(c call) bool { return c.state.Granted && grants(c.state, "k") }) {
		t.Fatal("alpha never had a pass granted k")
	}
	// And delta, which holds z, may act for any key: its keys cannot be
	// computed and its told passes fail, so it says Stopping
	f.failToldPassesOf("delta")
	f.createAndWait(t, "delta", conditions.ReasonClaimed, "z")
	f.setKeys(t, "delta", "z", failKeysFuncKey)
	f.waitForReason(t, "delta", conditions.ReasonStopping, wakeWithin)
	// When alpha stops naming k, and its next pass reads alpha from a cache
	// that still shows it as it was when Claimed for j alone
	f.writes.staleWidget.Store(claimedForJ)
	t.Cleanup(func() { f.writes.staleWidget.Store((*testcrd.Widget)(nil)) })
	f.setKeys(t, "alpha", "j")
	eventually(t, wakeWithin, func() (bool, string) {
		return !f.leaseExists(t, "k"), "k's record was never released"
	})
	f.writes.staleWidget.Store((*testcrd.Widget)(nil))
	// Then k was released only after a pass of alpha that named it in
	// State.Releasing succeeded
	if !slices.ContainsFunc(f.inner.callsOf("alpha"), func(c call) bool {
		return namesKey(c.state.Releasing, "k")
	}) {
		t.Errorf("k's record was released but no pass of alpha, which acted for k, named it in State.Releasing; alpha's condition now: %+v", f.claimed(t, "alpha"))
	}
}

// alphaGaveK1UpToBravo creates alpha holding k1 and bravo waiting for it,
// then moves alpha to k2 and waits until bravo acts for k1. It returns the
// resourceVersion of k1's Lease while alpha held it.
func (f *fixture) alphaGaveK1UpToBravo(t *testing.T, w *windows) string {
	t.Helper()
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k1")
	f.createAndWait(t, "bravo", conditions.ReasonParked, "k1")
	heldByAlpha := f.leaseVersion(t, "k1")
	f.setKeys(t, "alpha", "k2")
	if !w.waitActed("bravo", 10*time.Second) {
		t.Fatalf("bravo never acted for k1 after alpha gave it up; alpha: %+v", f.claimed(t, "alpha"))
	}
	return heldByAlpha
}

func TestAnObjectRecreatedUnderTheNameOfOneItsCacheStillShowsActsOnlyForGrantsWonForItself(t *testing.T) {
	t.Parallel()
	f := start(t, setup{workers: 2})
	w := recordWindows(f, "k")
	// Given alpha waited for k behind charlie and was deleted, and the
	// cache's view of it while it waited is kept
	f.holdsAndWaits(t, "charlie", "k", "alpha")
	before := f.widgetNow(t, "alpha")
	f.deleteWidget(t, "alpha")
	// And charlie let k go (deleted)
	f.deleteWidget(t, "charlie")
	f.writes.staleWidget.Store(before)
	w.whenActs("alpha", func() {
		now, err := f.widget(t, "alpha")
		if err != nil {
			t.Errorf("reading alpha as it acts: %v", err)
			return
		}
		if holder := f.record(t, "k").Holder.UID; holder != now.UID {
			t.Errorf("alpha %s acts for k while k's record names %s, the alpha that was deleted: nobody keeps that grant", now.UID, holder)
		}
	})
	// When another alpha, naming k, is created under the same name: its
	// passes read the deleted alpha from the cache and win k for it
	f.createWidget(t, "alpha", "k")
	time.Sleep(2 * time.Second)
	// And the cache catches up, and bravo asks for k too
	f.writes.staleWidget.Store((*testcrd.Widget)(nil))
	f.createWidget(t, "bravo", "k")
	eventually(t, wakeWithin, func() (bool, string) {
		a, b := f.claimed(t, "alpha"), f.claimed(t, "bravo")
		settled := a.Reason == string(conditions.ReasonClaimed) && b.Reason == string(conditions.ReasonParked) ||
			b.Reason == string(conditions.ReasonClaimed) && a.Reason == string(conditions.ReasonParked)
		return settled, fmt.Sprintf("alpha %+v, bravo %+v", a, b)
	})
	// Then the new alpha acted for k only on a record that names it, and
	// never while bravo may
	w.noOverlap(t)
}
