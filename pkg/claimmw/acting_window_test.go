package claimmw_test

// The acting window seen from the inner reconciler's passes, in the order
// they ran: an object acts for a key from a pass that is granted it (or a
// deletion pass given it) until a pass told to stop (or its deletion pass)
// returned success, and no other object acts for the key in between. Each
// test drives one interleaving and asks the recorder whether two windows
// overlapped, or whether a key nobody acts for reached its waiter.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

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
	w := &windows{key: key, open: map[string]bool{}, failTold: map[string]bool{}, failAll: map[string]bool{}, requeue: map[string]time.Duration{}, onActs: map[string]func(){}}
	f.inner.setHook(w.pass)
	return w
}

func (w *windows) pass(_ context.Context, name string, c call) (reconcile.Result, error) {
	given := slices.ContainsFunc(c.state.Grants, func(g claimmw.Grant) bool { return g.Key == w.key })
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
	if slices.ContainsFunc(c.state.Releasing, func(g claimmw.Grant) bool { return g.Key == w.key }) {
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
	eventually(t, 10*time.Second, func() (bool, string) {
		_, err := f.widget(t, "bravo")
		return apierrors.IsNotFound(err), fmt.Sprintf("bravo after its deletion: %v", err)
	})
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
	claimedThen, err := f.widget(t, name)
	if err != nil {
		t.Fatal(err)
	}
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
	parkedThen, err := f.widget(t, "yankee")
	if err != nil {
		t.Fatal(err)
	}
	// And xray names j and waits for it
	f.createWidget(t, "xray", "j")
	f.waitForReason(t, "xray", conditions.ReasonParked, wakeWithin)
	// And yankee then gets k and acts for j and k; its passes are not done
	// moving off j yet, so the handover of j to xray, prepared, waits
	w.setRequeue("yankee", time.Hour)
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
		return s.Granted && slices.ContainsFunc(s.Releasing, func(g claimmw.Grant) bool { return g.Key == "b" })
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
	claimedForJ, err := f.widget(t, "alpha")
	if err != nil {
		t.Fatal(err)
	}
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
		return slices.ContainsFunc(c.state.Releasing, func(g claimmw.Grant) bool { return g.Key == "k" })
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
