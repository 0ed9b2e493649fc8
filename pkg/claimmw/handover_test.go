package claimmw_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
	"github.com/ocf-claim/claim/pkg/fence"
)

// handTo is the tests' HandoverFunc: a Widget's spec.handTo, for every key.
func handTo(_ context.Context, obj client.Object, _ string) (client.ObjectKey, bool, error) {
	w := obj.(*testcrd.Widget)
	if w.Spec.HandTo == "" {
		return client.ObjectKey{}, false, nil
	}
	return client.ObjectKey{Name: w.Spec.HandTo}, true, nil
}

// edit changes a Widget as a user would, retrying on conflicts.
func (f *fixture) edit(t *testing.T, name string, change func(*testcrd.Widget)) {
	t.Helper()
	c := direct(t)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		w := &testcrd.Widget{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, w); err != nil {
			return err
		}
		change(w)
		return c.Update(context.Background(), w)
	})
	if err != nil {
		t.Fatalf("editing widget %s: %v", name, err)
	}
}

// touch makes the controller reconcile a Widget without changing its spec.
func (f *fixture) touch(t *testing.T, name string) {
	t.Helper()
	f.edit(t, name, func(w *testcrd.Widget) {
		if w.Labels == nil {
			w.Labels = map[string]string{}
		}
		n, _ := strconv.Atoi(w.Labels["touched"])
		w.Labels["touched"] = strconv.Itoa(n + 1)
	})
}

func (f *fixture) record(t *testing.T, key string) claim.Record {
	t.Helper()
	rec, err := f.mw.Claimer().Current(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestPlannedHandoverWaitsForTheHoldersPassThenGrantsTheSuccessorANewerToken(t *testing.T) {
	t.Parallel()
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithHandover(handTo)}})
	ctx := context.Background()
	// Given a holds k, c names k too and is parked, and a's inner reconciler
	// has not yet moved its workloads off k (it asks to be requeued)
	var moved atomic.Bool
	var sawHandover atomic.Int32
	f.inner.setHook(func(_ context.Context, name string, c call) (reconcile.Result, error) {
		if name != "a" || len(c.state.Handovers) == 0 {
			return reconcile.Result{}, nil
		}
		sawHandover.Add(1)
		if !moved.Load() {
			return reconcile.Result{RequeueAfter: time.Hour}, nil
		}
		return reconcile.Result{}, nil
	})
	f.createAndWait(t, "a", conditions.ReasonClaimed, "k")
	before := f.record(t, "k")
	f.createAndWait(t, "c", conditions.ReasonParked, "k")
	a, _ := f.widget(t, "a")
	cw, _ := f.widget(t, "c")

	// When a names c as its successor
	f.edit(t, "a", func(w *testcrd.Widget) { w.Spec.HandTo = "c" })
	// Then c waits for the handover, woken by the prepared record
	cond := f.waitForReason(t, "c", conditions.ReasonWaitingForHandover, wakeWithin)
	mustContain(t, "c's message", cond.Message, `"k"`, "Widget "+f.ns+"/a")
	// And a still holds k, runs with the handover in its state, and k names c as pending
	eventually(t, wakeWithin, func() (bool, string) {
		return sawHandover.Load() > 0, "a's inner never saw the handover"
	})
	rec := f.record(t, "k")
	if !rec.Holder.Is(claim.Holder{UID: a.UID}) || rec.Successor == nil || rec.Successor.UID != cw.UID {
		t.Fatalf("record of k while prepared: holder %s, successor %v; want a, pending c", rec.Holder, rec.Successor)
	}
	if diff := fmt.Sprint(f.claimed(t, "a").Reason); diff != string(conditions.ReasonClaimed) {
		t.Errorf("a while handing over: reason %s, want Claimed", diff)
	}

	// When a stops naming a successor
	f.edit(t, "a", func(w *testcrd.Widget) { w.Spec.HandTo = "" })
	// Then the handover is aborted and c is parked again
	f.waitForReason(t, "c", conditions.ReasonParked, wakeWithin)
	if rec := f.record(t, "k"); rec.Successor != nil || !rec.Holder.Is(claim.Holder{UID: a.UID}) {
		t.Fatalf("record of k after abort: holder %s, successor %v; want a, none", rec.Holder, rec.Successor)
	}

	// When a names c again and its inner pass then moves the workloads
	f.edit(t, "a", func(w *testcrd.Widget) { w.Spec.HandTo = "c" })
	f.waitForReason(t, "c", conditions.ReasonWaitingForHandover, wakeWithin)
	time.Sleep(200 * time.Millisecond) // c stays waiting while a's pass has not succeeded
	if got := f.claimed(t, "c").Reason; got != string(conditions.ReasonWaitingForHandover) {
		t.Fatalf("c before the commit: reason %s, want WaitingForHandover", got)
	}
	if n := len(f.inner.callsOf("c")); n != 0 {
		t.Fatalf("c's inner ran %d times before the commit", n)
	}
	moved.Store(true)
	f.touch(t, "a")
	// Then c is Claimed with a token newer than a's, and a is parked on c
	f.waitForReason(t, "c", conditions.ReasonClaimed, wakeWithin)
	cond = f.waitForReason(t, "a", conditions.ReasonParked, wakeWithin)
	mustContain(t, "a's message", cond.Message, "Widget "+f.ns+"/c")
	eventually(t, wakeWithin, func() (bool, string) {
		return len(f.inner.callsOf("c")) > 0, "c's inner never ran after the commit"
	})
	grants := claimmw.GrantsFrom(ctxWith(f.inner.callsOf("c")[0].state))
	if len(grants) != 1 {
		t.Fatalf("c's grants = %+v, want one", grants)
	}
	if cmp, err := grants[0].Token.Compare(before.Token); err != nil || cmp <= 0 {
		t.Errorf("c's token %s vs a's %s: compare %d, %v; want newer", grants[0].Token, before.Token, cmp, err)
	}
	held, err := f.mw.Claimer().Holds(ctx, "k", claim.Holder{Name: "a", UID: a.UID})
	if err != nil || held {
		t.Errorf("a holds k after the handover: %v, %v", held, err)
	}
}

func TestADeposedHolderCannotOverwriteWhatItsSuccessorWroteThroughTheFencedClient(t *testing.T) {
	t.Parallel()
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithHandover(handTo)}})
	ctx := context.Background()
	target := client.ObjectKey{Namespace: f.ns, Name: "shared"}
	// write sets the target's writer through the pass's fenced client.
	write := func(ctx context.Context, fc *fence.Client, writer string) error {
		cm := &corev1.ConfigMap{}
		if err := env.APIReader.Get(ctx, target, cm); apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: target.Namespace, Name: target.Name}, Data: map[string]string{"writer": writer}}
			return fc.Create(ctx, cm)
		} else if err != nil {
			return err
		}
		cm.Data = map[string]string{"writer": writer}
		return fc.Update(ctx, cm)
	}
	// Given inner reconcilers that write the shared object through the
	// fenced client, and a that keeps the client of its last pass
	var stale atomic.Pointer[fence.Client]
	f.inner.setHook(func(ctx context.Context, name string, c call) (reconcile.Result, error) {
		if !c.state.Granted {
			return reconcile.Result{}, nil
		}
		fc, err := claimmw.FencedClient(ctx)
		if err != nil {
			return reconcile.Result{}, err
		}
		if name == "a" {
			stale.Store(fc)
		}
		return reconcile.Result{}, write(ctx, fc, name)
	})
	f.createAndWait(t, "a", conditions.ReasonClaimed, "k")
	// Then a, holding k, can write
	writer := func() string {
		cm := &corev1.ConfigMap{}
		if err := env.APIReader.Get(ctx, target, cm); err != nil {
			return err.Error()
		}
		return cm.Data["writer"]
	}
	eventually(t, wakeWithin, func() (bool, string) { return writer() == "a", "shared written by " + writer() })
	// When a hands k to c and c writes the shared object
	f.createAndWait(t, "c", conditions.ReasonParked, "k")
	f.edit(t, "a", func(w *testcrd.Widget) { w.Spec.HandTo = "c" })
	f.waitForReason(t, "c", conditions.ReasonClaimed, wakeWithin)
	eventually(t, wakeWithin, func() (bool, string) { return writer() == "c", "shared written by " + writer() })
	// Then a's client from its last pass as holder is refused, naming both tokens
	err := write(ctx, stale.Load(), "a-after-losing-k")
	var staleErr *fence.StaleTokenError
	if !errors.Is(err, fence.ErrFenced) || !errors.As(err, &staleErr) {
		t.Fatalf("deposed a writing: %v, want fence.ErrFenced", err)
	}
	if cmp, cerr := staleErr.Token.Compare(staleErr.Newer); cerr != nil || cmp >= 0 {
		t.Errorf("refusal tokens: a's %s, object's %s; want a's older", staleErr.Token, staleErr.Newer)
	}
	// And the object still says c wrote it
	if got := writer(); got != "c" {
		t.Errorf("shared written by %q after the refused write, want c", got)
	}
	// And outside a granted pass there is no fenced client
	if _, err := claimmw.FencedClient(ctx); !errors.Is(err, claimmw.ErrNoGrants) {
		t.Errorf("FencedClient outside a pass: %v, want ErrNoGrants", err)
	}
}

func TestAHolderParkedOnAnotherKeyStillHandsOverTheKeyItKeeps(t *testing.T) {
	t.Parallel()
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithHandover(handTo)}})
	// Given charlie holds i and k, alpha holds j and hands it to bravo, and
	// bravo, which waits for i first, is not ready for the handover
	f.createAndWait(t, "charlie", conditions.ReasonClaimed, "i", "k")
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "j")
	f.createAndWait(t, "bravo", conditions.ReasonParked, "i", "j")
	f.handsOverAndPrepares(t, "alpha", "j", "bravo")
	// When alpha comes to wait for k, keeping j, and then bravo gets i and
	// waits for the handover of j
	f.setKeys(t, "alpha", "j", "k")
	f.waitForReason(t, "alpha", conditions.ReasonParked, wakeWithin)
	f.setKeys(t, "charlie", "k")
	// Then the parked alpha, which acts for nothing, commits it: bravo holds
	// i and j
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
	if rec := f.record(t, "j"); rec.Holder.Name != "bravo" {
		t.Errorf("holder of j = %s, want bravo", rec.Holder)
	}
}

// "No leak" and handover step 5 (a successor that is being deleted is no
// successor): the handover commits only to a successor that still exists.
// This holds when the successor is deleted while the holder's handover
// pass runs, and the holder meanwhile stops naming the key.
func TestAHandoverIsNotCommittedToASuccessorDeletedDuringThePass(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithHandover(handTo)}, workers: 2})
	var blocking atomic.Bool
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	f.inner.setHook(func(_ context.Context, name string, c call) (reconcile.Result, error) {
		if name == "a" && len(c.state.Handovers) > 0 && blocking.Load() {
			enterAndWait(entered, release)
		}
		return reconcile.Result{}, nil
	})
	// Given a holds k and b waits for it
	f.aHoldsKAndBWaits(t)
	// And a's pass that hands k to b is under way
	blocking.Store(true)
	f.edit(t, "a", func(w *testcrd.Widget) { w.Spec.HandTo = "b" })
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("a's handover pass never ran")
	}
	// When b is deleted (and gone), and a stops naming k, before that pass
	// ends
	b := f.deleteWidgetAsync(t, "b")
	f.waitGone(t, "b", 10*time.Second)
	f.edit(t, "a", func(w *testcrd.Widget) { w.Spec.Keys = nil; w.Spec.HandTo = "" })
	blocking.Store(false)
	close(release)
	time.Sleep(3 * time.Second)
	// Then no record of k names the deleted b
	if rec := f.record(t, "k"); rec.Exists && rec.Holder.UID == b.UID {
		t.Errorf("record of k names the deleted successor b and outlives everything that named k: %+v", rec)
	}
}

// handsOverAndPrepares sets holder's spec.handTo to successor and waits up
// to wakeWithin for the handover of key to be prepared in its record.
func (f *fixture) handsOverAndPrepares(t *testing.T, holder, key, successor string) {
	t.Helper()
	f.edit(t, holder, func(w *testcrd.Widget) { w.Spec.HandTo = successor })
	eventually(t, wakeWithin, func() (bool, string) {
		rec := f.record(t, key)
		return rec.Successor != nil, fmt.Sprintf("the handover of %s to %s is never prepared", key, successor)
	})
}

// holdHandedOverWorkloads makes the inner reconciler of name keep the
// workloads of the keys it hands over (its handover passes ask to be
// requeued in an hour) until the returned flag is set: its reconciler has
// moved them.
func (f *fixture) holdHandedOverWorkloads(name string) *atomic.Bool {
	return f.passesAskToRunAgain(name, time.Hour, func(s claimmw.State) bool { return len(s.Handovers) > 0 })
}

func TestASuccessorThatGetsOneKeyByHandoverAndThenWaitsForAnotherHandedToItGetsItWithoutARequeue(t *testing.T) {
	t.Parallel()
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithHandover(handTo)}})
	// Given charlie holds a and its reconciler holds a's workloads until
	// released, alpha holds k, and bravo names a and k
	moved := f.holdHandedOverWorkloads("charlie")
	f.createAndWait(t, "charlie", conditions.ReasonClaimed, "a")
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k")
	f.createAndWait(t, "bravo", conditions.ReasonParked, "a", "k")
	// And alpha hands k to bravo, which waits for a first, so alpha keeps k
	f.handsOverAndPrepares(t, "alpha", "k", "bravo")
	// And charlie hands a to bravo, which now waits for that handover
	f.edit(t, "charlie", func(w *testcrd.Widget) { w.Spec.HandTo = "bravo" })
	f.waitForReason(t, "bravo", conditions.ReasonWaitingForHandover, wakeWithin)
	time.Sleep(time.Second) // alpha, woken by bravo's wait, finds it waiting for a
	if rec := f.record(t, "k"); rec.Holder.Name != "alpha" {
		t.Fatalf("holder of k = %s before bravo holds a, want alpha", rec.Holder)
	}
	// When charlie's reconciler moves a's workloads, so a goes to bravo,
	// which then waits for the handover of k
	moved.Store(true)
	f.touch(t, "charlie")
	eventually(t, wakeWithin, func() (bool, string) {
		rec := f.record(t, "a")
		return rec.Holder.Name == "bravo", "holder of a = " + rec.Holder.String()
	})
	// Then alpha commits k, and bravo holds both: it is not left waiting for
	// the next requeue (an hour here)
	eventually(t, 2*wakeWithin, func() (bool, string) {
		c := f.claimed(t, "bravo")
		return c.Reason == string(conditions.ReasonClaimed), fmt.Sprintf("bravo: %+v; record of k: holder %s", c, f.record(t, "k").Holder)
	})
}

func TestASuccessorWhoseSpecChangesWhileItsPredecessorCommitsStillGetsTheKeyWithoutARequeue(t *testing.T) {
	t.Parallel()
	f := start(t, setup{workers: 2, opts: []claimmw.Option{claimmw.WithHandover(handTo)}})
	// Given alpha holds k and hands it to bravo, which waits for it, and
	// alpha's reconciler has not yet moved k's workloads
	moved := f.holdHandedOverWorkloads("alpha")
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	f.edit(t, "alpha", func(w *testcrd.Widget) { w.Spec.HandTo = "bravo" })
	f.waitForReason(t, "bravo", conditions.ReasonWaitingForHandover, wakeWithin)
	// When bravo's spec changes (it names z too, after k), and its condition
	// for the new spec is still being written when alpha's reconciler has
	// moved the workloads and alpha would commit
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.writes.beforeStatus.Store(func(obj client.Object) {
		if obj.GetName() != "bravo" {
			return
		}
		once.Do(func() {
			close(entered)
			<-release
		})
	})
	f.setKeys(t, "bravo", "k", "z")
	select {
	case <-entered:
	case <-time.After(wakeWithin):
		t.Fatal("bravo's condition for its new spec was never written")
	}
	moved.Store(true)
	f.touch(t, "alpha")
	time.Sleep(time.Second) // alpha finds bravo's condition for its older spec
	if rec := f.record(t, "k"); rec.Holder.Name != "alpha" {
		t.Fatalf("holder of k = %s while bravo's condition is not written, want alpha", rec.Holder)
	}
	close(release)
	// Then, once bravo says it waits for k for its new spec, alpha commits:
	// bravo is not left waiting for the next requeue (an hour here)
	eventually(t, 2*wakeWithin, func() (bool, string) {
		c := f.claimed(t, "bravo")
		return c.Reason == string(conditions.ReasonClaimed), fmt.Sprintf("bravo: %+v; record of k: holder %s", c, f.record(t, "k").Holder)
	})
}

func TestAKeyIsNotGrantedByARestoredRecordOfAnEarlierHandoverWhileTheObjectItWasHandedBackToMayStillAct(t *testing.T) {
	t.Parallel()
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithHandover(handTo)}})
	w := recordWindows(f, "k")
	holderIs := func(name string) {
		t.Helper()
		eventually(t, 2*wakeWithin, func() (bool, string) {
			rec := f.record(t, "k")
			return rec.Holder.Name == name, fmt.Sprintf("record of k: holder %s, successor %v", rec.Holder, rec.Successor)
		})
	}
	// Given alpha held k and handed it over to bravo, which acts for it
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k")
	f.createAndWait(t, "bravo", conditions.ReasonParked, "k")
	f.edit(t, "alpha", func(w *testcrd.Widget) { w.Spec.HandTo = "bravo" })
	holderIs("bravo")
	f.edit(t, "alpha", func(w *testcrd.Widget) { w.Spec.HandTo = "" })
	if !w.waitActed("bravo", 10*time.Second) {
		t.Fatalf("bravo never acted for k after alpha handed it over: %+v", f.claimed(t, "bravo"))
	}
	// And a manifest of k's Lease was saved then (a backup, or a GitOps
	// repository that picked it up)
	saved := f.leaseOf(t, "k").DeepCopy()
	// And bravo handed k back to alpha, which acts for it again, and whose
	// workloads take time to stop
	f.edit(t, "bravo", func(w *testcrd.Widget) { w.Spec.HandTo = "alpha" })
	holderIs("alpha")
	f.edit(t, "bravo", func(w *testcrd.Widget) { w.Spec.HandTo = "" })
	f.waitForReason(t, "bravo", conditions.ReasonParked, 2*wakeWithin)
	f.waitForReason(t, "alpha", conditions.ReasonClaimed, 2*wakeWithin)
	w.setFailTold("alpha", true)
	// When the saved manifest is applied again
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l := f.leaseOf(t, "k")
		l.Annotations, l.Labels, l.Spec = saved.Annotations, saved.Labels, saved.Spec
		return direct(t).Update(context.Background(), l)
	})
	if err != nil {
		t.Fatalf("applying the saved manifest of k's Lease: %v", err)
	}
	// Then bravo, which the record names again, does not act for k while
	// alpha may still act for it: it waits until alpha's told pass succeeds
	eventually(t, 2*wakeWithin, func() (bool, string) {
		c := f.claimed(t, "bravo")
		return c.Reason != string(conditions.ReasonParked), fmt.Sprintf("bravo: %+v; alpha: %+v", c, f.claimed(t, "alpha"))
	})
	w.noOverlap(t)
	if c := f.claimed(t, "bravo"); c.Status == metav1.ConditionTrue {
		t.Errorf("bravo is Claimed for k while alpha's told passes fail: %+v; alpha: %+v", c, f.claimed(t, "alpha"))
	}
}

// A handover is committed only to a successor that waits for that very key
// (docs/middleware.md, Planned handover, step 3): one that holds the record
// of an earlier key it names but waits, without acting for it, for that
// key's previous holder to stop, waits for another key first. Committed to
// it, the key is given up at once, its holder acquires it again and hands it
// over again, for as long as the earlier key's previous holder is stopping.
func TestAHandoverIsNotCommittedToASuccessorThatWaitsForItsPredecessorOnAnEarlierKey(t *testing.T) {
	t.Parallel()
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithHandover(handTo)}, workers: 2})
	// Given papa holds j, alpha holds k, and sierra names j and k
	f.createAndWait(t, "papa", conditions.ReasonClaimed, "j")
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k")
	f.createAndWait(t, "sierra", conditions.ReasonParked, "j", "k")
	// And papa hands j over to sierra, whose workloads of j take time to
	// stop: sierra holds j's record and waits for papa's told pass
	failing := f.failToldPassesOf("papa")
	f.edit(t, "papa", func(w *testcrd.Widget) { w.Spec.HandTo = "sierra" })
	f.waitForReason(t, "papa", conditions.ReasonStopping, wakeWithin)
	f.waitsForHandoverFrom(t, "sierra", "papa")
	alpha := f.holderOf(t, "alpha")
	// When alpha names sierra as the successor of k
	f.edit(t, "alpha", func(w *testcrd.Widget) { w.Spec.HandTo = "sierra" })
	// Then alpha keeps k while sierra waits for papa
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if rec := f.record(t, "k"); !rec.Exists || rec.Holder.UID != alpha.UID {
			t.Fatalf("k's record while sierra waits for papa on j: %+v, want it alpha's; sierra: %+v", rec, f.claimed(t, "sierra"))
		}
		time.Sleep(25 * time.Millisecond)
	}
	if !failing.Load() {
		t.Fatal("papa's told passes were let succeed")
	}
	if f.hasEvent(t, "alpha", string(claimmw.EventHandedOver)) {
		t.Errorf("alpha handed k over to sierra, which waits for papa on j")
	}
}

// passGates holds back the passes of the objects named, each at its first
// read, until let is called for that name: several objects at once, unlike
// holdBackPasses.
type passGates struct {
	mu    sync.Mutex
	gates map[string]chan struct{}
}

func (f *fixture) passGates() *passGates {
	g := &passGates{gates: map[string]chan struct{}{}}
	f.writes.beforeWidgetGet.Store(func(key client.ObjectKey) {
		g.mu.Lock()
		gate := g.gates[key.Name]
		g.mu.Unlock()
		if gate != nil {
			<-gate
		}
	})
	return g
}

func (g *passGates) hold(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gates[name] = make(chan struct{})
}

func (g *passGates) let(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.gates[name])
	delete(g.gates, name)
}

// A holder does not commit a handover to a successor that does not hold a
// key it names before the handed one: the successor waits for that key
// first. When the successor holds it again, its condition does not change
// (it said it waits for the handover all along), and the holder must be
// woken all the same, or the successor waits for the holder's requeue.
func TestAHandoverRefusedWhileTheSuccessorLackedAnEarlierKeyIsCommittedOnceItHoldsItAgain(t *testing.T) {
	t.Parallel()
	f := start(t, setup{workers: 2, opts: []claimmw.Option{claimmw.WithHandover(handTo)}})
	gates := f.passGates()
	// Given alpha holds k, and bravo, naming j and k, holds j and waits for k
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k")
	f.createAndWait(t, "bravo", conditions.ReasonParked, "j", "k")
	// And alpha hands k to bravo, which waits for that handover while
	// alpha's reconciler still moves k's workloads
	moved := f.holdHandedOverWorkloads("alpha")
	f.handsOverAndPrepares(t, "alpha", "k", "bravo")
	f.waitForReason(t, "bravo", conditions.ReasonWaitingForHandover, wakeWithin)
	// And, while bravo's passes are held back, a person deletes j's record,
	// and alpha's next pass, done with k's workloads, finds bravo without j
	gates.hold("bravo")
	gates.hold("alpha")
	f.deleteLease(t, "j")
	moved.Store(true)
	before := len(f.inner.callsOf("alpha"))
	f.touch(t, "alpha")
	gates.let("alpha")
	eventually(t, wakeWithin, func() (bool, string) {
		return len(f.inner.callsOf("alpha")) > before, "alpha's pass never ran"
	})
	time.Sleep(time.Second) // its commit, refused
	if rec := f.record(t, "k"); rec.Holder.Name != "alpha" {
		t.Fatalf("k was handed to %s while bravo did not hold j", rec.Holder)
	}
	// When bravo's passes run again, and bravo holds j again
	gates.let("bravo")
	// Then alpha commits, and bravo holds k
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
}
