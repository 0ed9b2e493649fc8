package claimmw_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// Promise 3 with the fairness pre-filter claim.WithSiblings (a documented
// WithClaim option): any sequence of key-set edits converges, even when the
// younger x holds a and yields the free b to the older y, which waits for a.
func TestKeySetEditsConvergeWithSiblingFairness(t *testing.T) {
	var ns string
	siblings := claim.SiblingsFunc(func(ctx context.Context, key string, self claim.Holder) ([]claim.Holder, error) {
		var list testcrd.WidgetList
		if err := env.APIReader.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		var out []claim.Holder
		for i := range list.Items {
			w := &list.Items[i]
			for _, k := range w.Spec.Keys {
				if k == key && w.UID != self.UID {
					out = append(out, claim.HolderOf(w))
				}
			}
		}
		return out, nil
	})
	f := start(t, setup{claimOpts: []claim.Option{claim.WithSiblings(siblings)}})
	ns = f.ns
	// Given the older y names nothing yet, and the younger x holds a
	f.createWidget(t, "y")
	time.Sleep(1100 * time.Millisecond) // creation timestamps have seconds
	f.createAndWait(t, "x", conditions.ReasonClaimed, "a")
	// When y is edited to name a and b, then x too
	f.edit(t, "y", func(w *testcrd.Widget) { w.Spec.Keys = []string{"a", "b"} })
	f.waitForReason(t, "y", conditions.ReasonParked, 10*time.Second)
	f.edit(t, "x", func(w *testcrd.Widget) { w.Spec.Keys = []string{"a", "b"} })
	// Then one of them ends up holding both
	eventually(t, 10*time.Second, func() (bool, string) {
		x, y := f.claimed(t, "x"), f.claimed(t, "y")
		return (x.ObservedGeneration == 2 && x.Reason == string(conditions.ReasonClaimed)) ||
				(y.ObservedGeneration == 2 && y.Reason == string(conditions.ReasonClaimed)),
			fmt.Sprintf("deadlock: x %s %q; y %s %q", x.Reason, x.Message, y.Reason, y.Message)
	})
}

// Promises 1 and 3 under concurrency (MaxConcurrentReconciles 3): random
// key-set edits of five objects over three keys. No two objects ever act for
// one key at once, and once the edits stop every waiting object's chain of
// holders ends at an object that holds every key it names (no cycle).
func TestRandomKeySetEditsWithConcurrentWorkersConvergeWithoutOverlap(t *testing.T) {
	f := start(t, setup{workers: 3})
	actors := &keyActors{}
	// Each granted pass acts for 30 ms.
	f.inner.setHook(func(_ context.Context, name string, c call) (reconcile.Result, error) {
		if c.state.Granted {
			for _, g := range c.state.Grants {
				actors.enter(g.Key, name)
			}
			time.Sleep(30 * time.Millisecond)
			for _, g := range c.state.Grants {
				actors.leave(g.Key, name)
			}
		}
		return reconcile.Result{}, nil
	})
	names := []string{"o0", "o1", "o2", "o3", "o4"}
	keys := []string{"k0", "k1", "k2"}
	rng := rand.New(rand.NewPCG(13, 13))
	pick := func() []string {
		var out []string
		for _, k := range keys {
			if rng.IntN(2) == 0 {
				out = append(out, k)
			}
		}
		return out
	}
	for _, n := range names {
		f.createWidget(t, n, pick()...)
	}
	// When their key sets are edited at random, eight rounds
	for round := 0; round < 8; round++ {
		for _, n := range names {
			ks := pick()
			f.edit(t, n, func(w *testcrd.Widget) { w.Spec.Keys = ks })
		}
		time.Sleep(300 * time.Millisecond)
	}
	// Then they settle without a cycle of waiters
	eventually(t, 20*time.Second, func() (bool, string) {
		state := map[string]metav1.Condition{}
		specs := map[string][]string{}
		uids := map[types.UID]string{}
		for _, n := range names {
			w, err := f.widget(t, n)
			if err != nil {
				return false, err.Error()
			}
			c := meta.FindStatusCondition(w.Status.Conditions, string(conditions.Claimed))
			if c == nil || c.ObservedGeneration != w.Generation {
				return false, fmt.Sprintf("%s not reconciled at generation %d yet", n, w.Generation)
			}
			state[n], specs[n], uids[w.UID] = *c, slices.Sorted(slices.Values(w.Spec.Keys)), n
		}
		for _, n := range names {
			seen := map[string]bool{}
			cur := n
			for state[cur].Status != metav1.ConditionTrue {
				if seen[cur] {
					return false, fmt.Sprintf("cycle of waiters through %v: %v", seen, state)
				}
				seen[cur] = true
				next := ""
				for _, k := range specs[cur] {
					rec := f.record(t, k)
					if rec.Exists && uids[rec.Holder.UID] != cur {
						next = uids[rec.Holder.UID]
						break
					}
				}
				if next == "" {
					return false, fmt.Sprintf("%s waits (%s) but no key it names is held by another", cur, state[cur].Message)
				}
				cur = next
			}
		}
		return true, ""
	})
	if v := actors.seen(); len(v) > 0 {
		t.Errorf("two objects acted for one key at once: %v", v)
	}
}

func TestAKeyAGrantedPassGivesUpIsNotReleasedWhileThatPassAsksToRunAgain(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given alpha holds k, and bravo waits for it
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	// And alpha's passes told to give k up are not done with it yet (its
	// data of k is still being dropped): they return no error and ask to
	// run again
	gaveUp := f.passesAskToRunAgain("alpha", 500*time.Millisecond, func(s claimmw.State) bool { return namesKey(s.Releasing, "k") })
	// When alpha moves to the free key m
	f.setKeys(t, "alpha", "m")
	f.waitForInnerCall(t, "alpha", "a pass told to give k up", func(s claimmw.State) bool { return len(s.Releasing) > 0 })
	// Then bravo is not granted k while alpha's passes that give it up ask
	// to run again, and once one returns a zero Result, bravo gets k
	f.claimedOnlyOnceStopped(t, "bravo", 3*time.Second, func() { gaveUp.Store(true) })
}

// A granted pass whose Grants do not name a key the object acted for is told
// to stop using it, whether or not it is given the key's record to release:
// a person may have deleted that record once an earlier such pass was told
// of it. While such passes ask to run again, the object may still act for
// the key, and no waiter gets it.
func TestAKeyAnObjectStoppedNamingIsNotGrantedToAWaiterWhileItsPassesForTheNewKeysAskToRunAgainAfterItsRecordWasDeleted(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given alpha holds k, and bravo waits for it
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	// And alpha's passes that do not grant it k are not done stopping its
	// workloads of k yet: they return no error and ask to run again
	stopped := f.passesAskToRunAgain("alpha", 200*time.Millisecond, func(s claimmw.State) bool { return !s.Granted || !namesKey(s.Grants, "k") })
	// When alpha moves to the free key m, and once a pass of alpha was told
	// to give k up, a person deletes k's record
	f.setKeys(t, "alpha", "m")
	f.waitForInnerCall(t, "alpha", "a pass told to give k up", func(s claimmw.State) bool {
		return namesKey(s.Releasing, "k")
	})
	f.deleteLease(t, "k")
	// Then bravo is not granted k while alpha's passes for m ask to run
	// again (alpha may still act for k), and once one returns a zero
	// Result, bravo gets k
	f.claimedOnlyOnceStopped(t, "bravo", 3*time.Second, func() { stopped.Store(true) })
}

// A pass told to release a record is inside the object's window for its
// key, whether or not the object acted for the key before (its reconciler
// cleans up what it keeps for the key): a parked object that kept the
// record of the first of its keys without acting for it, and stops naming
// that key, is told to release it; while that pass and the ones after it
// ask to run again, no waiter gets the key, even after a person deleted
// its record.
func aKeptKeyIsNotGrantedWhileThePassToldToReleaseItAsksToRunAgain(t *testing.T, newKeys ...string) {
	t.Helper()
	f := start(t, setup{})
	// Given z holds j, x (naming a and j) is parked on j keeping a, and w
	// waits for a
	f.createAndWait(t, "z", conditions.ReasonClaimed, "j")
	f.parksKeepingItsFirstKey(t, "x", "a", "j")
	f.createAndWait(t, "w", conditions.ReasonParked, "a")
	// And x's passes, once one was told to release a, are not done
	// cleaning up what x keeps for a: they ask to run again
	var told, stopped, wActed atomic.Bool
	f.inner.setHook(func(_ context.Context, name string, c call) (reconcile.Result, error) {
		switch name {
		case "x":
			if namesKey(c.state.Releasing, "a") {
				told.Store(true)
			}
			if told.Load() && !stopped.Load() {
				return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, nil
			}
		case "w":
			if c.state.Granted && namesKey(c.state.Grants, "a") {
				wActed.Store(true)
			}
		}
		return reconcile.Result{}, nil
	})
	// When x stops naming a, and once a pass of x was told to release a, a
	// person deletes a's record
	f.setKeys(t, "x", newKeys...)
	f.waitForInnerCall(t, "x", "a pass told to release a", func(s claimmw.State) bool {
		return namesKey(s.Releasing, "a")
	})
	f.deleteLease(t, "a")
	// Then w does not act for a while x's passes ask to run again
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(25 * time.Millisecond) {
		if wActed.Load() {
			t.Fatalf("w acted for a while the pass of x told to release a had not returned success (x: %+v)", f.claimed(t, "x"))
		}
	}
	// And once one returns a zero Result, w gets a
	stopped.Store(true)
	f.waitForReason(t, "w", conditions.ReasonClaimed, wakeWithin)
}

func TestAKeyAParkedObjectKeptIsNotGrantedToAWaiterWhileItsGrantedPassToldToReleaseItAsksToRunAgainAfterItsRecordWasDeleted(t *testing.T) {
	t.Parallel()
	aKeptKeyIsNotGrantedWhileThePassToldToReleaseItAsksToRunAgain(t, "l")
}

func TestAKeyAParkedObjectKeptIsNotGrantedToAWaiterWhileItsParkedPassToldToReleaseItAsksToRunAgainAfterItsRecordWasDeleted(t *testing.T) {
	t.Parallel()
	aKeptKeyIsNotGrantedWhileThePassToldToReleaseItAsksToRunAgain(t, "j")
}

// A parked object whose status writes are refused (an admission policy,
// missing RBAC) cannot say it may act for a record it kept without acting
// for: it is not told to release it, and the record goes all the same, so
// the key it stopped naming does not stay held while the object exists.
func TestAKeyAParkedObjectKeptIsReleasedWhenItStopsNamingItWhileItsStatusWritesAreRefused(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given z holds j, and x (naming a and j) is parked on j keeping a
	f.createAndWait(t, "z", conditions.ReasonClaimed, "j")
	f.parksKeepingItsFirstKey(t, "x", "a", "j")
	// When x's status writes are refused, and x stops naming a
	f.writes.failStatusOf.Store("x")
	f.setKeys(t, "x", "j")
	// Then a's record is released
	eventually(t, wakeWithin, func() (bool, string) { return !f.leaseExists(t, "a"), "a is still held by x" })
	// And x was never told to release it while its condition said it acts for nothing
	for _, c := range f.inner.callsOf("x") {
		if namesKey(c.state.Releasing, "a") {
			t.Errorf("x was told to release a while its condition, which it could not write, said it acts for nothing: %+v", f.claimed(t, "x"))
		}
	}
}

// A granted object whose told pass succeeded says it acts for exactly the
// keys it names; when the release of a record it stopped naming then fails,
// and its status writes are refused from then on (an admission policy,
// missing RBAC), a process that would tell it of the record once more (one
// restarted since: the process that saw the release fail releases it
// untold) cannot say it acts for that key again first: the record goes
// untold, so the key it stopped acting for does not stay held from its
// waiter while the object exists.
func TestAKeyAGrantedObjectStoppedNamingIsReleasedAfterAFailedReleaseWhileItsStatusWritesAreRefused(t *testing.T) {
	t.Parallel()
	f, stop := startIn(t, env.Namespace(t), setup{})
	// Given alpha holds j and k, and bravo waits for k
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "j", "k")
	f.createAndWait(t, "bravo", conditions.ReasonParked, "k")
	// And alpha stopped naming k: its told pass succeeded and it said it
	// acts for j alone, and the release of k failed
	onlyJ := conditions.ForKeys(conditions.Claimed, []string{"j"}, 0).Message
	f.writes.failLeaseDeletes.Store(true)
	f.setKeys(t, "alpha", "j")
	f.releaseFailedOnceItSaid(t, "alpha", func(c metav1.Condition) bool { return c.Message == onlyJ })
	// When the operator restarts, and every status write of alpha is refused
	stop()
	f, _ = startIn(t, f.ns, setup{failStatusOf: "alpha"})
	// Then k's record is released, and bravo gets k
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
	f.statusWritesWereRefused(t, "alpha")
	// And alpha, refused its writes, says what it said: Claimed for j alone
	if c := f.claimed(t, "alpha"); c.Message != onlyJ {
		t.Errorf("alpha's condition %+v: want Claimed for j alone", c)
	}
}

// While its pass told to release a record it kept without acting asks to
// run again, an object acts for that record's key and for the keys it is
// granted, and for no other: a free key it never named goes to its waiter
// at once.
func TestAnObjectToldToReleaseARecordItKeptDoesNotKeepAFreeKeyItNeverNamedFromItsWaiter(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given z holds j, and x (naming a and j) is parked on j keeping a
	f.createAndWait(t, "z", conditions.ReasonClaimed, "j")
	f.parksKeepingItsFirstKey(t, "x", "a", "j")
	// And x's passes told to release a ask to run again
	f.passesAskToRunAgain("x", 200*time.Millisecond, func(s claimmw.State) bool { return namesKey(s.Releasing, "a") })
	// When x stops naming a, and a pass of x was told to release it
	f.setKeys(t, "x", "j")
	f.waitForInnerCall(t, "x", "a pass told to release a", func(s claimmw.State) bool {
		return namesKey(s.Releasing, "a")
	})
	// Then v, naming the free key b that x never named, holds it at once
	f.createWidget(t, "v", "b")
	f.waitForReason(t, "v", conditions.ReasonClaimed, wakeWithin)
	// And x still says it acts for a
	if c := f.claimed(t, "x"); c.Reason != string(conditions.ReasonStopping) || !strings.Contains(c.Message, `"a"`) {
		t.Errorf("x's condition %+v: want Stopping, naming a, while its pass told to release a asks to run again", c)
	}
}

// An object that acts for a key and stops naming it while its status writes
// are refused is told to release it before the record goes, even when the
// process that runs its pass never wrote its Claimed condition (it was
// restarted) and its cache still shows a condition from before it acted (it
// was parked then): what decides whether it acts is its condition in the
// API server, which says Claimed.
func TestAnObjectThatStopsNamingAKeyItActsForIsToldBeforeItsReleaseWhileItsStatusWritesAreRefusedAndItsCacheShowsItParked(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	f, stop := startIn(t, ns, setup{})
	// Given z holds j, and x (naming a and j) was parked on j keeping a
	f.createAndWait(t, "z", conditions.ReasonClaimed, "j")
	f.parksKeepingItsFirstKey(t, "x", "a", "j")
	parked := f.widgetNow(t, "x")
	// And then z stopped naming j, so that x holds a and j and acts for them
	f.setKeys(t, "z")
	f.waitForReason(t, "x", conditions.ReasonClaimed, wakeWithin)
	f.waitForInnerCall(t, "x", "a granted pass for a", func(s claimmw.State) bool {
		return s.Granted && slices.ContainsFunc(s.Grants, func(g claimmw.Grant) bool { return g.Key == "a" })
	})
	// And y holds c
	f.createAndWait(t, "y", conditions.ReasonClaimed, "c")
	// When the operator restarts, x's status writes are refused, x is made
	// to name c and j (it parks on c and gives a up), and the new process's
	// cache shows x with that spec but the condition it had while it was
	// parked
	stop()
	f.setKeys(t, "x", "c", "j")
	edited := f.widgetNow(t, "x")
	stale := edited.DeepCopy()
	stale.Status = parked.Status
	gate := make(chan struct{})
	var open sync.Once
	letGo := func() { open.Do(func() { close(gate) }) }
	t.Cleanup(letGo)
	f, _ = startIn(t, ns, setup{failStatusOf: "x", beforeWidgetGet: func(key client.ObjectKey) {
		if key.Name == "x" {
			<-gate
		}
	}})
	f.writes.staleWidget.Store(stale)
	var told atomic.Bool
	f.inner.setHook(func(_ context.Context, name string, c call) (reconcile.Result, error) {
		if name == "x" && slices.ContainsFunc(c.state.Releasing, func(g claimmw.Grant) bool { return g.Key == "a" }) {
			told.Store(true)
		}
		return reconcile.Result{}, nil
	})
	letGo()
	// Then a's record goes only after a pass of x was told to release it
	eventually(t, wakeWithin, func() (bool, string) {
		if !f.leaseExists(t, "a") && !told.Load() {
			t.Fatalf("a's record was deleted while x, which acted for a, was never told to release it (x: %+v)", f.claimed(t, "x"))
		}
		return told.Load(), "x was never told to release a"
	})
	eventually(t, wakeWithin, func() (bool, string) { return !f.leaseExists(t, "a"), "a is still held by x after its told pass" })
}

// xAndYHold creates Widgets x naming xKey and y naming yKey, both at once,
// and waits until both hold their key.
func (f *fixture) xAndYHold(t *testing.T, xKey, yKey string) {
	t.Helper()
	f.createWidget(t, "x", xKey)
	f.createWidget(t, "y", yKey)
	f.waitForReason(t, "x", conditions.ReasonClaimed, 10*time.Second)
	f.waitForReason(t, "y", conditions.ReasonClaimed, 10*time.Second)
}

func TestSwappingKeysBetweenTwoHoldersConverges(t *testing.T) {
	f := start(t, setup{})
	// Given x holds A and y holds B
	f.xAndYHold(t, "A", "B")
	// When x is edited to name B and y to name A
	f.setKeys(t, "x", "B")
	f.setKeys(t, "y", "A")
	// Then both end up Claimed on their new keys, without any requeue (the
	// fixture's requeues are an hour)
	for name, key := range map[string]string{"x": "B", "y": "A"} {
		eventually(t, 10*time.Second, func() (bool, string) {
			c := f.claimed(t, name)
			return c.Reason == string(conditions.ReasonClaimed) && strings.Contains(c.Message, `"`+key+`"`),
				fmt.Sprintf("%s: %s %s", name, c.Reason, c.Message)
		})
	}
}

func TestGrowingTheKeySetWhileAnotherHoldsTheNewSmallerKeyGivesTheLargerOneUp(t *testing.T) {
	f := start(t, setup{})
	// Given x holds B and y holds A
	f.xAndYHold(t, "B", "A")
	// When both are edited to name A and B (x would hold B and wait for A,
	// y hold A and wait for B: a deadlock with sorted acquisition alone)
	f.setKeys(t, "x", "A", "B")
	f.setKeys(t, "y", "A", "B")
	// Then one of them holds both keys, and the other waits holding none,
	// each condition computed for the object's latest spec
	eventually(t, 10*time.Second, func() (bool, string) {
		x, errx := f.widget(t, "x")
		y, erry := f.widget(t, "y")
		if errx != nil || erry != nil {
			return false, fmt.Sprintf("reading widgets: %v %v", errx, erry)
		}
		cx, cy := f.claimed(t, "x"), f.claimed(t, "y")
		current := cx.ObservedGeneration == x.Generation && cy.ObservedGeneration == y.Generation
		return current && (cx.Status == "True") != (cy.Status == "True"),
			fmt.Sprintf("x (gen %d): %s %s; y (gen %d): %s %s", x.Generation, cx.Reason, cx.Message, y.Generation, cy.Reason, cy.Message)
	})
	holder := "x"
	if f.claimed(t, "y").Status == "True" {
		holder = "y"
	}
	for _, k := range []string{"A", "B"} {
		rec, err := f.mw.Claimer().Current(context.Background(), k)
		if err != nil || rec.Holder.Name != holder {
			t.Errorf("record of %s names %s (%v), want %s", k, rec.Holder.Name, err, holder)
		}
	}
}

func TestAKeyAcquiredInAPassThatFailedIsReleasedOnceNoLongerNamed(t *testing.T) {
	f := start(t, setup{})
	// Given x holds A, with a successful pass
	f.createAndWait(t, "x", conditions.ReasonClaimed, "A")
	// And x then names A and B, but its inner passes fail
	f.inner.setFail(func(name string, c call) error {
		if name == "x" && len(c.state.Grants) == 2 {
			return errors.New("injected: inner pass failed")
		}
		return nil
	})
	f.setKeys(t, "x", "A", "B")
	eventually(t, 10*time.Second, func() (bool, string) { return f.leaseExists(t, "B"), "Lease of B missing" })
	// When x goes back to naming only A (the set its last successful pass kept)
	f.setKeys(t, "x", "A")
	// Then B's Lease is released, and y, which names B, gets it
	eventually(t, 10*time.Second, func() (bool, string) { return !f.leaseExists(t, "B"), "Lease of B still held" })
	f.createAndWait(t, "y", conditions.ReasonClaimed, "B")
}

// An object parked by a key-set edit says, while its told passes fail,
// which keys it may still act for: those it held. A key it stopped naming
// is not granted to a waiter while it may still act for it, even once a
// person deleted that key's record.
func TestAKeyAnObjectParkedByAKeySetEditStoppedNamingIsNotGrantedToAWaiterWhileItsToldPassesFail(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given alpha holds k, and bravo waits for it
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	f.waitForGrantedPass(t, "alpha", "k")
	// And charlie holds m
	f.createAndWait(t, "charlie", conditions.ReasonClaimed, "m")
	// And alpha's passes that are told to stop fail (its workloads of k
	// are still stopping)
	failing := f.failToldPassesOf("alpha")
	// When alpha's spec names m instead, held by charlie: alpha is parked,
	// and Stopping while its told passes fail
	f.setKeys(t, "alpha", "m")
	f.waitForReason(t, "alpha", conditions.ReasonStopping, wakeWithin)
	f.waitForInnerCall(t, "alpha", "a told pass", func(s claimmw.State) bool { return !s.Granted })
	// And a person deletes k's record
	f.deleteLease(t, "k")
	// Then bravo is not granted k while alpha's told passes fail, and once
	// one succeeds, bravo gets k
	f.claimedOnlyOnceStopped(t, "bravo", 3*time.Second, func() { failing.Store(false) })
}

// A holder that acted for its key keeps acting across a restart of its
// operator while another object, which never held the key and names it
// since a key-set edit, is Stopping for the key it held before: that
// object says which keys it may act for, and the key is not among them.
func TestAHolderKeepsActingAcrossARestartWhileAnObjectThatNeverHeldItsKeyIsStopping(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	// Given alpha holds k and acts for it, and charlie, which held j and
	// acted for it, names k instead and is Stopping
	_, stop, again := alphaHoldsKWhileCharlieStopsForJ(t, ns)
	// When the operator stops and starts again
	stop()
	f2 := again()
	// Then alpha's first pass of the new process acts for k
	f2.waitForGrantedPass(t, "alpha", "k")
	// And no pass of alpha is told to stop, and it stays Claimed
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if told := slices.IndexFunc(f2.inner.callsOf("alpha"), func(c call) bool { return !c.state.Granted }); told >= 0 {
			t.Fatalf("alpha, which acted for k, was told to stop after the restart: %+v; charlie: %+v", f2.inner.callsOf("alpha")[told].state, f2.claimed(t, "charlie"))
		}
		if c := f2.claimed(t, "alpha"); c.Reason != string(conditions.ReasonClaimed) {
			t.Fatalf("alpha says %s (%s) after the restart, want Claimed; charlie: %+v", c.Reason, c.Message, f2.claimed(t, "charlie"))
		}
	}
}

// alphaHoldsKWhileCharlieStopsForJ starts an operator in ns in which alpha
// holds k and acted for it, and charlie held j and acted for it, then its
// spec named k instead: it waits for k, and is Stopping, as its told
// passes (not its deletion passes) fail in every process of the operator.
// It returns the operator, what stops it, and what starts another one.
func alphaHoldsKWhileCharlieStopsForJ(t *testing.T, ns string) (f *fixture, stop func(), again func() *fixture) {
	t.Helper()
	failCharlie := func(name string, c call) error {
		if name == "charlie" && (!c.state.Granted || len(c.state.Releasing) > 0) && !c.state.Deleting {
			return errNotStopped
		}
		return nil
	}
	f, stop = startIn(t, ns, setup{workers: 2, innerFail: failCharlie})
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k")
	f.waitForGrantedPass(t, "alpha", "k")
	f.createAndWait(t, "charlie", conditions.ReasonClaimed, "j")
	f.waitForGrantedPass(t, "charlie", "j")
	f.setKeys(t, "charlie", "k")
	f.waitForReason(t, "charlie", conditions.ReasonStopping, wakeWithin)
	return f, stop, func() *fixture {
		f2, _ := startIn(t, ns, setup{workers: 2, innerFail: failCharlie})
		return f2
	}
}
