package claimmw_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
	"github.com/ocf-claim/claim/pkg/finalizer"
)

// xHoldsKThroughStorageAndNetwork starts two middlewares on Widgets,
// storage and network, each with its own condition type and finalizer and
// naming spec.keys with its own prefix, and waits until Widget x, naming k,
// holds storage/k and network/k.
func xHoldsKThroughStorageAndNetwork(t *testing.T) (st, nw *fixture) {
	t.Helper()
	ns := env.Namespace(t)
	fs := startReplica(t, ns,
		replicaMW{keys: prefixedKeys("storage/"), opts: []claimmw.Option{claimmw.WithName("storage"), claimmw.WithConditionType("StorageClaimed"), claimmw.WithFinalizer("example.com/storage")}},
		replicaMW{keys: prefixedKeys("network/"), opts: []claimmw.Option{claimmw.WithName("network"), claimmw.WithConditionType("NetworkClaimed"), claimmw.WithFinalizer("example.com/network")}},
	)
	st, nw = fs[0], fs[1]
	st.createWidget(t, "x", "k")
	eventually(t, 10*time.Second, func() (bool, string) {
		s, n := st.conditionOfType(t, "x", "StorageClaimed"), nw.conditionOfType(t, "x", "NetworkClaimed")
		return s.Reason == string(conditions.ReasonClaimed) && n.Reason == string(conditions.ReasonClaimed), fmt.Sprintf("x: %+v / %+v", s, n)
	})
	return st, nw
}

// Promises 5 and 8: two middlewares on one kind (different WithName, as
// docs/middleware.md asks) coexist; each one's deletion path runs its inner
// reconciler with the keys it holds and releases its records before the
// finalizer comes off. (Sharing the default finalizer is refused at setup,
// see
// TestASecondMiddlewareOnOneKindIsRefusedAtSetupWhenItSharesANameAFinalizerOrAConditionType;
// each has its own here.)
func TestTwoMiddlewaresOnOneKindBothRunTheirDeletionPath(t *testing.T) {
	// Given x holds storage/k through one middleware and network/k through
	// the other
	st, nw := xHoldsKThroughStorageAndNetwork(t)
	// When x is deleted, and the network middleware's deletion passes fail
	// for a second (its cleanup waits for something)
	var firstFail atomic.Int64
	var mu sync.Mutex
	cleaned := map[string]bool{} // deletion passes that succeeded with their key granted
	for _, f := range []*fixture{st, nw} {
		f.inner.setFail(func(_ string, c call) error {
			if !c.state.Deleting {
				return nil
			}
			if f == nw {
				firstFail.CompareAndSwap(0, time.Now().UnixNano())
				if time.Since(time.Unix(0, firstFail.Load())) < time.Second {
					return errors.New("injected: the network cleanup needs another pass")
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, g := range c.state.Grants {
				cleaned[g.Key] = true
			}
			return nil
		})
	}
	st.deleteWidgetAsync(t, "x")
	st.waitGone(t, "x", 10*time.Second)
	time.Sleep(2 * time.Second)
	// Then each middleware's inner reconciler completed a deletion pass with
	// the key it held, and neither record outlives x
	for _, c := range []struct {
		f   *fixture
		key string
	}{{st, "storage/k"}, {nw, "network/k"}} {
		mu.Lock()
		ok := cleaned[c.key]
		mu.Unlock()
		if !ok {
			t.Errorf("no successful deletion pass was told of %s; deletion passes: %+v", c.key, deletionCalls(c.f, "x"))
		}
		if rec := c.f.record(t, c.key); rec.Exists {
			t.Errorf("record of %s outlives its deleted holder x: %+v", c.key, rec)
		}
	}
}

// Promise 9 with two middlewares on one kind (docs: "two middlewares for one
// kind need different names"): a steady holder makes no write. (Sharing
// the default condition type is refused at setup; each has its own here.)
func TestTwoMiddlewaresOnOneKindWithTheDefaultConditionTypeSettle(t *testing.T) {
	ns := env.Namespace(t)
	fs := startReplica(t, ns,
		replicaMW{keys: prefixedKeys("storage/"), opts: []claimmw.Option{claimmw.WithName("storage"), claimmw.WithFinalizer("example.com/storage")}},
		replicaMW{keys: prefixedKeys("network/"), opts: []claimmw.Option{claimmw.WithName("network"), claimmw.WithFinalizer("example.com/network"), claimmw.WithConditionType("NetworkClaimed")}},
	)
	// Given x names k for both middlewares
	fs[0].createWidget(t, "x", "k")
	eventually(t, 10*time.Second, func() (bool, string) {
		return fs[0].record(t, "storage/k").Exists && fs[1].record(t, "network/k").Exists, "records not both written"
	})
	time.Sleep(2 * time.Second)
	// When nothing changes for 3 s
	before := fs[0].writes.snapshot()
	time.Sleep(3 * time.Second)
	after := fs[0].writes.snapshot()
	// Then no status is written
	if d := after["patch/status Widget"] - before["patch/status Widget"]; d > 0 {
		t.Errorf("%d status patches in 3 s of a steady holder; condition now %+v", d, fs[0].claimed(t, "x"))
	}
}

// Promise 5: two middlewares on one kind never release each other's
// records; records without a set (written before sets existed) are released
// by their holder. After an upgrade from a version without sets, both
// middlewares' records carry no set; the storage middleware does not release
// the record the network middleware acts for.
func TestARecordWithoutASetIsNotReleasedByTheOtherMiddlewareOfItsHolder(t *testing.T) {
	// Given x holds storage/k and network/k, one per middleware
	st, nw := xHoldsKThroughStorageAndNetwork(t)
	// When network/k's record is as a version without sets wrote it
	l := nw.leaseOf(t, "network/k")
	uid := l.UID
	delete(l.Annotations, backends.DefaultSetAnnotation)
	if err := direct(t).Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	nw.touch(t, "x")
	time.Sleep(2 * time.Second)
	// Then x still holds network/k, and the network middleware's inner
	// reconciler was never told to give it up
	x, _ := nw.widget(t, "x")
	if rec := nw.record(t, "network/k"); !rec.Exists || rec.Holder.UID != x.UID {
		t.Errorf("record of network/k = %+v, want still held by x", rec)
	}
	if now := nw.leaseOf(t, "network/k").UID; now != uid {
		t.Errorf("the Lease of network/k was deleted and created again (UID %s, now %s): the key was free for a while; now held by %s; y: %+v", uid, now, nw.leaseOf(t, "network/k").Annotations["claim.ocf.io/holder-name"], nw.conditionOfType(t, "y", "NetworkClaimed"))
	}
	for _, c := range st.inner.callsOf("x") {
		for _, g := range c.state.Releasing {
			if g.Key == "network/k" {
				t.Errorf("the storage middleware's inner reconciler was told to release network/k: %+v", c.state)
			}
		}
	}
	if n := nw.conditionOfType(t, "x", "NetworkClaimed"); n.Reason != string(conditions.ReasonClaimed) {
		t.Errorf("x's NetworkClaimed: %+v", n)
	}
}

// Promise 10: a second middleware on one kind is refused at setup, with an
// error naming what it shares with the first, when it has the first's name
// (WithName), finalizer or condition type; one that shares none of them is
// set up.
func TestASecondMiddlewareOnOneKindIsRefusedAtSetupWhenItSharesANameAFinalizerOrAConditionType(t *testing.T) {
	for _, tc := range []struct {
		name       string
		secondName string
		second     []claimmw.Option
		want       string // "": the second setup succeeds
	}{
		{"given the same name then the second setup names WithName", "storage", nil, "WithName"},
		{"given the same default finalizer then the second setup names it", "network", []claimmw.Option{claimmw.WithConditionType("NetworkClaimed")}, "finalizer"},
		{"given the same default condition type then the second setup names it", "network", []claimmw.Option{claimmw.WithFinalizer("example.com/network")}, "condition type"},
		{"given another name, finalizer and condition type then the second is set up", "network", []claimmw.Option{claimmw.WithConditionType("NetworkClaimed"), claimmw.WithFinalizer("example.com/network")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			mgr := newManager(t, ns, nil)
			noop := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
			wrap := func(name string, extra ...claimmw.Option) *claimmw.Middleware {
				mw, err := claimmw.Wrap(noop, append([]claimmw.Option{
					claimmw.FromManager(mgr), claimmw.For(&testcrd.Widget{}), claimmw.WithName(name), claimmw.WithMetrics(false),
					claimmw.WithClaim(claim.Config{Namespace: ns}, claim.WithBackend(lease.Backend)), claimmw.WithKeys(specKeys),
				}, extra...)...)
				if err != nil {
					t.Fatal(err)
				}
				return mw
			}
			// Given a storage middleware with the defaults
			if err := wrap("storage").SetupWithManager(mgr, ctrl.NewControllerManagedBy(mgr).For(&testcrd.Widget{}).Named("w1")); err != nil {
				t.Fatal(err)
			}
			// When a second one is set up on Widget
			err := wrap(tc.secondName, tc.second...).SetupWithManager(mgr, ctrl.NewControllerManagedBy(mgr).For(&testcrd.Widget{}).Named("w2"))
			// Then its setup fails, naming what is shared, or succeeds when
			// nothing is
			if tc.want == "" {
				if err != nil {
					t.Fatalf("second setup sharing nothing: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("second setup: %v; want an error naming the shared %s", err, tc.want)
			}
		})
	}
}

// storageAndNetwork starts two middlewares of one kind in one claim
// namespace, ns: storage claims spec.keys, network claims spec.handTo; both
// may name one key.
func storageAndNetwork(t *testing.T, ns string) (storage, network *fixture) {
	t.Helper()
	handToKey := func(_ context.Context, obj client.Object) ([]string, error) {
		if k := obj.(*testcrd.Widget).Spec.HandTo; k != "" {
			return []string{k}, nil
		}
		return nil, nil
	}
	fs := startReplica(t, ns,
		replicaMW{keys: specKeys, opts: []claimmw.Option{claimmw.WithName("storage"), claimmw.WithConditionType("StorageClaimed"), claimmw.WithFinalizer("example.com/storage")}},
		replicaMW{keys: handToKey, opts: []claimmw.Option{claimmw.WithName("network"), claimmw.WithConditionType("NetworkClaimed"), claimmw.WithFinalizer("example.com/network")}},
	)
	return fs[0], fs[1]
}

// Promises 1 and 5 with two middlewares on one kind in one process: a
// record is found by its key alone, so a key both middlewares name for one
// object is one record, written in one set. When the storage middleware
// wrote x's record of k and the network middleware names k for x too, the
// network middleware waits behind that record rather than being granted it
// (Held) and acting; so when the storage middleware then gives k up and
// releases the record of its set, y never takes k and acts while x's network
// pass still acts for it.
func TestTwoMiddlewaresNamingOneKeyNeverLetTwoObjectsActForIt(t *testing.T) {
	ns := env.Namespace(t)
	st, nw := storageAndNetwork(t, ns)
	actors := &keyActors{}
	var blocking atomic.Bool
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	st.inner.setHook(actors.hook(nil, nil, nil))
	nw.inner.setHook(actors.hook(func(name string, _ call) bool { return name == "x" && blocking.Load() }, entered, release))
	// Given x holds k through the storage middleware, and y waits for k there
	st.createWidget(t, "x", "k")
	eventually(t, 10*time.Second, func() (bool, string) {
		c := st.conditionOfType(t, "x", "StorageClaimed")
		return c.Reason == string(conditions.ReasonClaimed), fmt.Sprintf("x: %+v", c)
	})
	st.createWidget(t, "y", "k")
	eventually(t, 10*time.Second, func() (bool, string) {
		c := st.conditionOfType(t, "y", "StorageClaimed")
		return c.Reason == string(conditions.ReasonParked), fmt.Sprintf("y: %+v", c)
	})
	// And the network middleware names k for x as well: its record of k is
	// the storage set's, another claim, so the network middleware waits
	// behind it rather than acting beside it
	blocking.Store(true)
	st.edit(t, "x", func(w *testcrd.Widget) { w.Spec.HandTo = "k" })
	eventually(t, 10*time.Second, func() (bool, string) {
		c := nw.conditionOfType(t, "x", "NetworkClaimed")
		return c.Reason == string(conditions.ReasonParked), fmt.Sprintf("x (network): %+v", c)
	})
	select {
	case <-entered:
		t.Fatal("the network middleware acted for k while the storage middleware holds it for x")
	default:
	}
	// When the storage middleware no longer names k for x
	st.edit(t, "x", func(w *testcrd.Widget) { w.Spec.Keys = nil })
	// Then y does not act for k while x's network pass does
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && len(actors.seen()) == 0 {
		time.Sleep(50 * time.Millisecond)
	}
	if v := actors.seen(); len(v) > 0 {
		t.Errorf("two objects acted for one key at once: %v; y: %+v; record of k: %+v", v, st.conditionOfType(t, "y", "StorageClaimed"), st.record(t, "k"))
	}
}

// Promise 5 across a start: the records of one middleware written before
// sets existed are not taken into the set of another middleware of the kind
// whose Config.Labels differ (docs/middleware.md, Beside another middleware:
// re-entry leaves a set-less record as it is). A starting process stamps
// the records whose labels differ from what it writes; a set-less record of
// the network middleware lacks the storage middleware's labels, and the
// stamp writes the storage set on it: the network middleware then finds its
// own key held by another claim of x, tells x to stop acting for it, and
// waits for it for ever.
func TestARecordWithoutASetKeepsItsMiddlewareWhenAnotherWithOtherLabelsStarts(t *testing.T) {
	ns := env.Namespace(t)
	mws := func() []replicaMW {
		return []replicaMW{
			{keys: prefixedKeys("storage/"), opts: []claimmw.Option{claimmw.WithName("storage"), claimmw.WithConditionType("StorageClaimed"), claimmw.WithFinalizer("example.com/storage"),
				claimmw.WithClaim(claim.Config{Namespace: ns, Labels: map[string]string{"example.com/claims": "storage"}}, claim.WithBackend(lease.Backend))}},
			{keys: prefixedKeys("network/"), opts: []claimmw.Option{claimmw.WithName("network"), claimmw.WithConditionType("NetworkClaimed"), claimmw.WithFinalizer("example.com/network")}},
		}
	}
	// x acts for network/k from its first granted network pass until a
	// pass told to stop returns, which takes 4 s (its workloads stop);
	// y must not act for network/k in between.
	var xActs atomic.Bool
	var mu sync.Mutex
	var both []string
	networkPass := func(_ context.Context, name string, c call) (reconcile.Result, error) {
		switch {
		case name == "x" && c.state.Granted:
			xActs.Store(true)
		case name == "x":
			time.Sleep(4 * time.Second)
			xActs.Store(false)
		case name == "y" && c.state.Granted && xActs.Load():
			mu.Lock()
			both = append(both, fmt.Sprintf("y granted %+v while x still acts for network/k", c.state.Grants))
			mu.Unlock()
		}
		return reconcile.Result{}, nil
	}
	fs := startReplica(t, ns, mws()...)
	st, nw := fs[0], fs[1]
	nw.inner.setHook(networkPass)
	// Given x holds storage/k and network/k, one per middleware, and y
	// waits for both
	st.createWidget(t, "x", "k")
	eventually(t, 10*time.Second, func() (bool, string) {
		s, n := st.conditionOfType(t, "x", "StorageClaimed"), nw.conditionOfType(t, "x", "NetworkClaimed")
		return s.Reason == string(conditions.ReasonClaimed) && n.Reason == string(conditions.ReasonClaimed), fmt.Sprintf("x: %+v / %+v", s, n)
	})
	st.createWidget(t, "y", "k")
	eventually(t, 10*time.Second, func() (bool, string) {
		n := nw.conditionOfType(t, "y", "NetworkClaimed")
		return n.Reason == string(conditions.ReasonParked), fmt.Sprintf("y: %+v", n)
	})
	// And network/k's record is as a version without sets wrote it
	l := nw.leaseOf(t, "network/k")
	delete(l.Annotations, backends.DefaultSetAnnotation)
	if err := direct(t).Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	uid := l.UID
	// When a second process of the operator starts (a rolling update), and
	// x is reconciled
	again := startReplica(t, ns, mws()...)
	again[1].inner.setHook(networkPass)
	time.Sleep(2 * time.Second)
	nw.touch(t, "x")
	time.Sleep(3 * time.Second)
	// Then network/k is still the network middleware's, held by x, x was
	// never told to stop acting for it, and y never acted for it
	if set := nw.leaseOf(t, "network/k").Annotations[backends.DefaultSetAnnotation]; set == "storage" {
		t.Errorf("the record of network/k was taken into the storage set")
	}
	if now := nw.leaseOf(t, "network/k").UID; now != uid {
		t.Errorf("the Lease of network/k was deleted and created again (UID %s, now %s): the key was free for a while; now held by %s; y: %+v", uid, now, nw.leaseOf(t, "network/k").Annotations["claim.ocf.io/holder-name"], nw.conditionOfType(t, "y", "NetworkClaimed"))
	}
	for _, f := range []*fixture{nw, again[1]} {
		for _, c := range f.inner.callsOf("x") {
			if !c.state.Granted {
				t.Errorf("the network middleware told x to stop acting for network/k: %+v", c.state)
				break
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(both) > 0 {
		t.Errorf("two objects acted for network/k at once: %v", both)
	}
}

// TestTwoOverlappingProcessesWithOtherHolderLabelsStopWritingASteadyRecord:
// writes stop when nothing changes, with two overlapping operator processes
// (a rolling upgrade that changes claim.Config.HolderLabels): the record a
// steady holder holds is not written again and again, each process stamping
// it with its own holder labels in turn.
func TestTwoOverlappingProcessesWithOtherHolderLabelsStopWritingASteadyRecord(t *testing.T) {
	ns := env.Namespace(t)
	byName := func(h claim.Holder) map[string]string { return map[string]string{"example.com/holder-name": h.Name} }
	old := startReplica(t, ns, replicaMW{})[0]
	// Given x holds k under the old release
	old.createAndWait(t, "x", conditions.ReasonClaimed, "k")
	// When the new release, which labels records by holder name, starts
	// beside it, and x is reconciled by both
	startReplica(t, ns, replicaMW{opts: []claimmw.Option{claimmw.WithClaim(claim.Config{Namespace: ns, HolderLabels: byName}, claim.WithBackend(lease.Backend))}})
	old.touch(t, "x")
	time.Sleep(3 * time.Second)
	// Then, once they settled, k's record is not written for 3 s
	versions := map[string]bool{}
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		versions[old.leaseOf(t, "k").ResourceVersion] = true
	}
	if n := len(versions) - 1; n > 0 {
		t.Errorf("k's record was written %d times in 3 s while nothing changed; its labels now %v", n, old.leaseOf(t, "k").Labels)
	}
}

// TestTwoMiddlewaresOnOneKindNeverReleaseEachOthersRecords runs two
// middlewares for Widgets in one manager and one namespace, with the same
// record name prefix: a "storage" claim on spec.keys and a "realm" claim on
// the same keys with a prefix.
func TestTwoMiddlewaresOnOneKindNeverReleaseEachOthersRecords(t *testing.T) {
	ns := env.Namespace(t)
	mgr := newManager(t, ns, nil)
	mws := map[string]*claimmw.Middleware{}
	for _, name := range []string{"storage", "realm"} {
		keys := func(_ context.Context, obj client.Object) ([]string, error) {
			var out []string
			for _, k := range obj.(*testcrd.Widget).Spec.Keys {
				out = append(out, name+"-"+k)
			}
			return out, nil
		}
		mw, err := claimmw.Wrap(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}),
			claimmw.FromManager(mgr),
			claimmw.For(&testcrd.Widget{}),
			claimmw.WithName(name),
			claimmw.WithConditionType(conditions.Type(strings.ToUpper(name[:1])+name[1:]+"Claimed")),
			claimmw.WithFinalizer(finalizer.Name(backends.Domain+"/release-"+name)),
			claimmw.WithClaim(claim.Config{Namespace: ns}, claim.WithBackend(lease.Backend)),
			claimmw.WithKeys(keys),
			claimmw.WithRequeue(time.Hour, time.Hour),
		)
		if err != nil {
			t.Fatal(err)
		}
		if err := mw.SetupWithManager(mgr, ctrl.NewControllerManagedBy(mgr).Named(name).For(&testcrd.Widget{})); err != nil {
			t.Fatal(err)
		}
		mws[name] = mw
	}
	// Given a third middleware with a name already taken, its setup fails
	dup, err := claimmw.Wrap(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }),
		claimmw.FromManager(mgr), claimmw.For(&testcrd.Widget{}), claimmw.WithName("storage"),
		claimmw.WithClaim(claim.Config{Namespace: ns}, claim.WithBackend(lease.Backend)),
		claimmw.WithKeys(specKeys))
	if err != nil {
		t.Fatal(err)
	}
	if err := dup.SetupWithManager(mgr, ctrl.NewControllerManagedBy(mgr).Named("dup").For(&testcrd.Widget{})); err == nil {
		t.Error("a second middleware named storage for Widgets was set up; want an error naming the clash")
	}
	envtest.RunManager(t, mgr)
	// When a Widget names key k, so it holds storage-k and realm-k
	w := &testcrd.Widget{}
	w.Namespace, w.Name, w.Spec.Keys = ns, "w", []string{"k"}
	if err := direct(t).Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	uids := map[string]types.UID{}
	eventually(t, 10*time.Second, func() (bool, string) {
		got := &testcrd.Widget{}
		if err := env.APIReader.Get(context.Background(), client.ObjectKeyFromObject(w), got); err != nil {
			return false, err.Error()
		}
		for _, ct := range []string{"StorageClaimed", "RealmClaimed"} {
			if !meta.IsStatusConditionTrue(got.Status.Conditions, ct) {
				return false, fmt.Sprintf("%s not True: %+v", ct, got.Status.Conditions)
			}
		}
		for _, name := range []string{"storage", "realm"} {
			l := &coordinationv1.Lease{}
			key := client.ObjectKey{Namespace: ns, Name: mws[name].Claimer().Config().NameFunc(name + "-k")}
			if err := env.APIReader.Get(context.Background(), key, l); err != nil {
				return false, fmt.Sprintf("Lease of %s-k: %v", name, err)
			}
			uids[name] = l.UID
		}
		return true, ""
	})
	// Then for a while both Leases stay the same objects: neither
	// middleware's sweep released the other's record
	time.Sleep(2 * time.Second)
	for _, name := range []string{"storage", "realm"} {
		l := &coordinationv1.Lease{}
		key := client.ObjectKey{Namespace: ns, Name: mws[name].Claimer().Config().NameFunc(name + "-k")}
		if err := env.APIReader.Get(context.Background(), key, l); err != nil {
			t.Fatalf("Lease of %s-k: %v", name, err)
		}
		if l.UID != uids[name] {
			t.Errorf("Lease of %s-k was deleted and re-created (uid %s -> %s)", name, uids[name], l.UID)
		}
	}
}

// TestAWaiterOfOneMiddlewareIsWokenWhenAHolderOfAnotherStopsActingForItsKey:
// "a holder that is stopping lets the waiter in once its told pass
// succeeded, and the change of its condition wakes every object waiting for
// a handover in the manager" (docs/middleware.md), whichever middleware of
// the manager the waiter waits through. No record changes then (the record
// was deleted from outside while the holder stopped), so nothing else wakes
// it before its waiting requeue.
func TestAWaiterOfOneMiddlewareIsWokenWhenAHolderOfAnotherStopsActingForItsKey(t *testing.T) {
	ns := env.Namespace(t)
	st, nw := storageAndNetwork(t, ns)
	// Given x acts for k through the storage middleware
	st.createWidget(t, "x", "k")
	eventually(t, 10*time.Second, func() (bool, string) {
		c := st.conditionOfType(t, "x", "StorageClaimed")
		return c.Reason == string(conditions.ReasonClaimed), fmt.Sprintf("x: %+v", c)
	})
	// And y names k through the network middleware and waits for it
	y := &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "y"}, Spec: testcrd.WidgetSpec{HandTo: "k"}}
	if err := direct(t).Create(context.Background(), y); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		c := nw.conditionOfType(t, "y", "NetworkClaimed")
		return c.Reason == string(conditions.ReasonParked), fmt.Sprintf("y: %+v", c)
	})
	// And x stops naming k, but its passes fail for a while (its workloads
	// of k take time to stop)
	failing := st.failPassesOf("x", func(claimmw.State) bool { return true })
	st.edit(t, "x", func(w *testcrd.Widget) { w.Spec.Keys = nil })
	eventually(t, 10*time.Second, func() (bool, string) {
		c := st.conditionOfType(t, "x", "StorageClaimed")
		return c.Reason == string(conditions.ReasonStopping), fmt.Sprintf("x: %+v", c)
	})
	// And a person deletes k's record meanwhile, so y waits for x to stop
	st.deleteLease(t, "k")
	eventually(t, 10*time.Second, func() (bool, string) {
		c := nw.conditionOfType(t, "y", "NetworkClaimed")
		return c.Reason == string(conditions.ReasonWaitingForHandover), fmt.Sprintf("y: %+v", c)
	})
	// When x's told pass succeeds
	failing.Store(false)
	eventually(t, 10*time.Second, func() (bool, string) {
		c := st.conditionOfType(t, "x", "StorageClaimed")
		return c.Reason != string(conditions.ReasonStopping), fmt.Sprintf("x: %+v", c)
	})
	// Then y is woken and gets k (its waiting requeue is an hour away)
	eventually(t, wakeWithin, func() (bool, string) {
		c := nw.conditionOfType(t, "y", "NetworkClaimed")
		return c.Reason == string(conditions.ReasonClaimed), fmt.Sprintf("y: %+v; x: %+v", c, st.conditionOfType(t, "x", "StorageClaimed"))
	})
}
