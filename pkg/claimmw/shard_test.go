package claimmw_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// shardLabel splits the Widgets of a namespace between two operator
// processes, as a label-sharded operator does.
const shardLabel = "shard"

// startShard starts one operator process that reconciles only the Widgets
// whose shardLabel satisfies op against value; every process sees every
// record of the claim namespace.
func startShard(t *testing.T, ns string, op selection.Operator, value string) *fixture {
	t.Helper()
	f, _ := shard{op: op, value: value}.start(t, ns)
	return f
}

// startShardWith is startShard with workers concurrent passes, its manager's
// client going through the fixture's writes.
func startShardWith(t *testing.T, ns string, op selection.Operator, value string, workers int) *fixture {
	t.Helper()
	f, _ := shard{op: op, value: value, workers: workers}.start(t, ns)
	return f
}

// shard is one process of a label-sharded operator: it reconciles the
// Widgets whose shardLabel satisfies op against value, with workers
// concurrent passes (1 if unset), the middleware built with opts too, and
// its inner reconciler's passes going to hook from the first.
type shard struct {
	op      selection.Operator
	value   string
	workers int
	opts    []claimmw.Option
	hook    func(ctx context.Context, name string, c call) (reconcile.Result, error)
	// prepare, when set, configures the process's writes before its
	// manager starts.
	prepare func(w *writes)
}

// start starts the process in ns, and returns with its fixture a stop
// function that ends it and waits for it: a restart is a stop followed by
// another start.
func (s shard) start(t *testing.T, ns string) (*fixture, func()) {
	t.Helper()
	req, err := labels.NewRequirement(shardLabel, s.op, []string{s.value})
	if err != nil {
		t.Fatal(err)
	}
	opts := env.ManagerOptions(ns)
	opts.Logger = envtest.TestLogger(t)
	opts.Cache.ByObject = map[client.Object]cache.ByObject{&testcrd.Widget{}: {Label: labels.NewSelector().Add(*req)}}
	f := &fixture{ns: ns, inner: &inner{hook: s.hook}, writes: &writes{}}
	if s.prepare != nil {
		s.prepare(f.writes)
	}
	opts.NewClient = intercepted(f.writes.funcs())
	mgr, err := ctrl.NewManager(rest.CopyConfig(env.Config), opts)
	if err != nil {
		t.Fatal(err)
	}
	f.client = mgr.GetClient()
	mwOpts := append(widgetMiddleware(mgr, claim.Config{Namespace: ns}, specKeys), claimmw.WithMetrics(false))
	f.mw, err = claimmw.Wrap(f.inner, append(mwOpts, s.opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.mw.SetupWithManager(mgr, ctrl.NewControllerManagedBy(mgr).For(&testcrd.Widget{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(s.workers, 1)})); err != nil {
		t.Fatal(err)
	}
	return f, runStoppable(t, mgr)
}

func TestAKeyDeletedFromOutsideIsNotGrantedWhileItsHolderActsInAnotherShard(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	a := startShard(t, ns, selection.NotEquals, "b")
	b := startShard(t, ns, selection.Equals, "b")
	// Given x acts for k in shard a
	a.createAndWait(t, "x", conditions.ReasonClaimed, "k")
	x, _ := a.widget(t, "x")
	// And y names k in shard b, whose cache never shows x, and waits for it
	b.parkedYNamingK(t)
	for round := range 8 {
		// When a person deletes k's record while x acts for it
		a.deleteLease(t, "k")
		// Then y is never granted k, and x holds it again
		for end := time.Now().Add(400 * time.Millisecond); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if c := b.claimed(t, "y"); c.Status == metav1.ConditionTrue {
				t.Fatalf("round %d: y was granted k, deleted from outside while x acted for it in the other shard (x now: %+v)", round, a.claimed(t, "x"))
			}
		}
		eventually(t, wakeWithin, func() (bool, string) {
			rec := a.record(t, "k")
			return rec.Exists && rec.Holder.UID == x.UID, fmt.Sprintf("round %d: record of k: exists %t, holder %s", round, rec.Exists, rec.Holder)
		})
	}
}

func TestAKeyDeletedFromOutsideIsNotGrantedWhileItsHolderActsInAnotherShardWhoseObjectsThisShardIsAskedToReconcile(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	a := startShardWith(t, ns, selection.NotEquals, "b", 2)
	b := startShardWith(t, ns, selection.Equals, "b", 2)
	w := recordWindows(a, "k")
	b.inner.setHook(w.pass)
	// Given x acts for k in shard a
	a.createAndWait(t, "x", conditions.ReasonClaimed, "k")
	if !w.waitActed("x", 10*time.Second) {
		t.Fatal("x never acted for k")
	}
	// And y names k in shard b, whose cache never shows x, and waits for it
	b.parkedYNamingK(t)
	// And x's next passes in shard a are slow to begin (its workloads run on)
	release := a.holdBackPasses("x")
	defer release()
	// When a person deletes k's record while x acts for it (the record's
	// events ask shard b to reconcile x, the holder they name, which its
	// cache does not show)
	a.deleteLease(t, "k")
	// Then y waits for x rather than act for k while x may
	shardedWorld{w: w}.yWaitsForX(t, b)
}

func TestAWaiterOfARestartedShardIsNotGrantedAKeyDeletedFromOutsideWhileItsHolderActsInAnotherShard(t *testing.T) {
	t.Parallel()
	// Given x acts for k in shard a, and y names k in shard b, whose cache
	// never shows x, and waits for it; x's next passes are slow to begin
	sw := xActsInShardAWhileYWaitsInShardB(t)
	ns, w, a, b, stopB, bShard, release := sw.ns, sw.w, sw.a, sw.b, sw.stopB, sw.bShard, sw.release
	defer release()
	// When shard b's process stops, a person deletes k's record, and shard
	// b starts again: its new process never saw a record that named x
	stopB()
	a.deleteLease(t, "k")
	b, _ = bShard.start(t, ns)
	// Then y waits for x rather than act for k while x may
	sw.yWaitsForX(t, b)
	// And once x, let go, stops acting for k (its spec names no key), y
	// is granted k, though no event of x reaches shard b's process
	release()
	a.setKeys(t, "x")
	a.waitForReason(t, "x", conditions.ReasonNoKeys, 10*time.Second)
	b.waitForReason(t, "y", conditions.ReasonClaimed, wakeWithin)
	w.noOverlap(t)
}

func TestAWaiterWhoseWaitingWriteWasRefusedIsNotGrantedAfterItsShardRestartsWhileItsHolderActsInAnotherShard(t *testing.T) {
	t.Parallel()
	// Given x acts for k in shard a, and y names k in shard b, whose cache
	// never shows x, and waits for it; x's next passes are slow to begin
	sw := xActsInShardAWhileYWaitsInShardB(t)
	ns, a, bShard, release := sw.ns, sw.a, sw.bShard, sw.release
	defer release()
	// When shard b's process stops, a person deletes k's record, and shard
	// b starts again: y writes k's record and says Claimed, finds x by the
	// uncached List, and its write that says it waits for x is refused
	// (an admission policy, an API server that times out), as are y's
	// status writes after it
	b2, stopB2 := sw.yClaimedWithItsWaitingWriteRefused(t)
	t.Logf("before the restart: y %+v, x %+v", b2.claimed(t, "y"), a.claimed(t, "x"))
	// And shard b's process restarts once more (its writes accepted again)
	stopB2()
	b3, _ := bShard.start(t, ns)
	// Then y waits for x rather than act for k while x may
	sw.yWaitsForX(t, b3)
}

func TestAWaiterWhoseShardStopsBeforeItSaysItWaitsIsNotGrantedWhileItsHolderActsInAnotherShard(t *testing.T) {
	t.Parallel()
	// Given x acts for k in shard a, and y names k in shard b, whose cache
	// never shows x, and waits for it; x's next passes are slow to begin
	sw := xActsInShardAWhileYWaitsInShardB(t)
	ns, a, stopB, bShard, release := sw.ns, sw.a, sw.stopB, sw.bShard, sw.release
	defer release()
	// When shard b's process stops, a person deletes k's record, and shard
	// b starts again: y writes k's record, says Claimed, finds x by the
	// uncached List, and shard b's process stops (a rolling update) just
	// before y's write that says it waits for x is sent
	stopB()
	a.deleteLease(t, "k")
	reached := make(chan struct{})
	gate := make(chan struct{})
	var once sync.Once
	stopping := bShard
	stopping.prepare = func(wr *writes) {
		wr.beforeStatus.Store(func(obj client.Object) {
			if wdg, ok := obj.(*testcrd.Widget); ok && wdg.Name == "y" {
				if c := meta.FindStatusCondition(wdg.Status.Conditions, string(conditions.Claimed)); c != nil && c.Reason == string(conditions.ReasonWaitingForHandover) {
					once.Do(func() { close(reached) })
					<-gate
				}
			}
		})
	}
	b2, stopB2 := stopping.start(t, ns)
	select {
	case <-reached:
	case <-time.After(10 * time.Second):
		t.Fatalf("y never came to say it waits for x: %+v", b2.claimed(t, "y"))
	}
	stopped := make(chan struct{})
	go func() { defer close(stopped); stopB2() }()
	time.Sleep(200 * time.Millisecond) // the manager's context is cancelled
	close(gate)
	<-stopped
	t.Logf("after shard b stopped: y %+v, x %+v", b2.claimed(t, "y"), a.claimed(t, "x"))
	// And shard b starts once more
	b3, _ := bShard.start(t, ns)
	// Then y waits for x rather than act for k while x may
	sw.yWaitsForX(t, b3)
}

func TestAWaiterWhoseWaitingWriteWasRefusedIsNotGivenTheKeyInItsDeletionPassWhileItsHolderActsInAnotherShard(t *testing.T) {
	t.Parallel()
	// Given x acts for k in shard a, and y names k in shard b, whose cache
	// never shows x, and waits for it; x's next passes are slow to begin
	sw := xActsInShardAWhileYWaitsInShardB(t)
	w, release := sw.w, sw.release
	defer release()
	// When shard b's process stops, a person deletes k's record, and shard
	// b starts again: y writes k's record and says Claimed, finds x by the
	// uncached List, and its write that says it waits for x is refused, as
	// are y's status writes after it (an admission policy)
	b2, _ := sw.yClaimedWithItsWaitingWriteRefused(t)
	// And y is deleted (no restart of any process since)
	b2.deleteWidgetAsync(t, "y")
	// Then y's deletion pass is not given k while x may still act for it
	time.Sleep(3 * time.Second)
	w.noOverlap(t)
}

// shardedWorld is the world the sharded tests start from
// (xActsInShardAWhileYWaitsInShardB).
type shardedWorld struct {
	ns     string
	w      *windows
	a, b   *fixture
	stopB  func()
	bShard shard
	// release lets x's passes in shard a go on (once).
	release func()
}

// xActsInShardAWhileYWaitsInShardB starts two processes of a label-sharded
// operator, each with WithPartialCache (shard a: Widgets not labelled
// shard=b; shard b: those labelled so), and stages: x acts for k in shard
// a; y names k in shard b, whose cache never shows x, and is parked behind
// it; x's next passes in shard a are slow to begin (its workloads run on)
// until release. Every inner pass goes to the returned windows of k.
func xActsInShardAWhileYWaitsInShardB(t *testing.T) shardedWorld {
	t.Helper()
	ns := env.Namespace(t)
	w := newWindows("k")
	partial := []claimmw.Option{claimmw.WithPartialCache(ns)}
	a, _ := shard{op: selection.NotEquals, value: "b", workers: 2, opts: partial, hook: w.pass}.start(t, ns)
	bShard := shard{op: selection.Equals, value: "b", workers: 2, opts: partial, hook: w.pass}
	b, stopB := bShard.start(t, ns)
	a.createAndWait(t, "x", conditions.ReasonClaimed, "k")
	if !w.waitActed("x", 10*time.Second) {
		t.Fatal("x never acted for k")
	}
	b.parkedYNamingK(t)
	release := sync.OnceFunc(a.holdBackPasses("x"))
	t.Cleanup(release)
	return shardedWorld{ns: ns, w: w, a: a, b: b, stopB: stopB, bShard: bShard, release: release}
}

// refuseStatusOnceItSaysItWaits makes a process refuse the status write
// of the Widget named name that says it waits for a handover, and every
// status write of it after that (an admission policy).
func refuseStatusOnceItSaysItWaits(name string) func(*writes) {
	return func(wr *writes) {
		wr.beforeStatus.Store(func(obj client.Object) {
			if wdg, ok := obj.(*testcrd.Widget); ok && wdg.Name == name {
				if c := meta.FindStatusCondition(wdg.Status.Conditions, string(conditions.Claimed)); c != nil && c.Reason == string(conditions.ReasonWaitingForHandover) {
					wr.failStatusOf.Store(name)
				}
			}
		})
	}
}

// yClaimedWithItsWaitingWriteRefused stops shard b's process, deletes k's
// record as a person would, and starts shard b again with y's status
// writes refused from its first that says it waits: y writes k's record,
// says Claimed, finds x by the uncached List, and cannot say it waits. It
// returns shard b's new process once the API server shows that.
func (sw shardedWorld) yClaimedWithItsWaitingWriteRefused(t *testing.T) (*fixture, func()) {
	t.Helper()
	sw.stopB()
	sw.a.deleteLease(t, "k")
	refusing := sw.bShard
	refusing.prepare = refuseStatusOnceItSaysItWaits("y")
	b, stop := refusing.start(t, sw.ns)
	eventually(t, 10*time.Second, func() (bool, string) {
		rec := b.record(t, "k")
		return b.writes.failedStatus.Load() > 0 && rec.Exists && rec.Holder.Name == "y", fmt.Sprintf("refused status writes of y: %d; y: %+v; record of k: exists %t, holder %s", b.writes.failedStatus.Load(), b.claimed(t, "y"), rec.Exists, rec.Holder)
	})
	return b, stop
}

// yWaitsForX waits until y, in shard b's process b, says it waits for a
// handover (or acted), and fails t if a pass of y acted for k while x may
// still act, then or in the second after.
func (sw shardedWorld) yWaitsForX(t *testing.T, b *fixture) {
	t.Helper()
	eventually(t, 10*time.Second, func() (bool, string) {
		c := b.claimed(t, "y")
		return sw.w.acted("y") || c.Reason == string(conditions.ReasonWaitingForHandover), fmt.Sprintf("y: %+v", c)
	})
	time.Sleep(time.Second)
	sw.w.noOverlap(t)
}

// parkedYNamingK creates y, labelled for shard b, naming k, and waits until
// f, shard b's process, says it is parked.
func (f *fixture) parkedYNamingK(t *testing.T) {
	t.Helper()
	y := &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "y", Labels: map[string]string{shardLabel: "b"}}, Spec: testcrd.WidgetSpec{Keys: []string{"k"}}}
	if err := direct(t).Create(context.Background(), y); err != nil {
		t.Fatal(err)
	}
	f.waitForReason(t, "y", conditions.ReasonParked, 10*time.Second)
}
