package claimmw_test

// Adversarial tests of the middleware's promises (docs/middleware.md "What
// happens per reconcile" and "What is promised at this layer"). Each test
// names the promise it attacks.

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

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
	"github.com/ocf-claim/claim/pkg/expiry"
	"github.com/ocf-claim/claim/pkg/finalizer"
)

// atkWithin is eventually that reports a failure and goes on.
func atkWithin(t *testing.T, within time.Duration, cond func() (bool, string)) bool {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, msg := cond()
		if ok {
			return true
		}
		if time.Now().After(deadline) {
			t.Errorf("after %s: %s", within, msg)
			return false
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// atkLease reads the Lease of key, uncached.
func (f *fixture) atkLease(t *testing.T, key string) *coordinationv1.Lease {
	t.Helper()
	norm, err := f.mw.Claimer().NormalizeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	l := &coordinationv1.Lease{}
	name := f.mw.Claimer().Config().NameFunc(norm)
	if err := env.APIReader.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, l); err != nil {
		t.Fatalf("reading the Lease of %q: %v", key, err)
	}
	return l
}

// atkIntruder returns a ConfigMap holder (alive for HolderExists) and a
// Claimer of the middleware's set whose liveness judges every holder dead:
// another replica, or a person's tool, taking a key over with a fenced
// Update naming another holder.
func (f *fixture) atkIntruder(t *testing.T) (*claim.Claimer, claim.Holder) {
	t.Helper()
	c := direct(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "intruder"}}
	if err := c.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	dead := claim.LivenessFunc(func(context.Context, claim.Record) (bool, error) { return false, nil })
	cfg := f.mw.Claimer().Config()
	cl, err := claim.New(env.APIReader, c, claim.Config{Namespace: f.ns, Set: cfg.Set, Normalize: cfg.Normalize}, claim.WithLiveness(dead))
	if err != nil {
		t.Fatal(err)
	}
	h, err := cl.HolderOf(cm)
	if err != nil {
		t.Fatal(err)
	}
	return cl, h
}

// Promise 6: keys are normalized exactly once, end to end. A planned
// handover is part of "end to end".
func TestAttackAPlannedHandoverWorksWithANonIdempotentNormalizer(t *testing.T) {
	tenant := func(k string) (string, error) { return "tenant-a/" + k, nil }
	f := start(t, setup{
		claimCfg: &claim.Config{Normalize: tenant},
		opts:     []claimmw.Option{claimmw.WithHandover(handTo)},
	})
	// Given a holds k under a deterministic, non-idempotent key normalizer,
	// and b waits for k
	f.createWidget(t, "a", "k")
	f.waitForReason(t, "a", conditions.ReasonClaimed, 10*time.Second)
	f.createWidget(t, "b", "k")
	f.waitForReason(t, "b", conditions.ReasonParked, 10*time.Second)
	// When a names b as the successor of its keys
	f.edit(t, "a", func(w *testcrd.Widget) { w.Spec.HandTo = "b" })
	// Then the handover is prepared and committed: b holds k
	eventually(t, 10*time.Second, func() (bool, string) {
		c := f.claimed(t, "b")
		return c.Reason == string(conditions.ReasonClaimed),
			fmt.Sprintf("b: %+v; a: %+v; record of k: %+v", c, f.claimed(t, "a"), f.record(t, "k"))
	})
	b, err := f.widget(t, "b")
	if err != nil {
		t.Fatal(err)
	}
	if rec := f.record(t, "k"); !rec.Ours() || rec.Holder.UID != b.UID {
		t.Errorf("record of k = %+v, want held by b", rec)
	}
}

// Promise 2: a holder whose record is taken over learns it in its next
// pass: Claimed leaves True, its inner reconciler runs parked once, a Lost
// event is recorded. Attack: the first pass after the takeover cannot judge
// the claim (a transient liveness error: the API server throttled the read
// of the new holder), so the ClaimError condition overwrites Claimed=True;
// the next pass no longer knows the object held the key.
func TestAttackALossFirstSeenThroughATransientClaimErrorIsStillReportedAsLost(t *testing.T) {
	var failing atomic.Bool
	live := claim.HolderExists(env.APIReader)
	liveness := claim.LivenessFunc(func(ctx context.Context, rec claim.Record) (bool, error) {
		if failing.Load() {
			return false, errors.New("injected: the API server throttled the liveness read")
		}
		return live.Alive(ctx, rec)
	})
	f := start(t, setup{claimOpts: []claim.Option{claim.WithLiveness(liveness)}})
	ctx := context.Background()
	// Given a holds k and its inner reconciler acts for it
	f.createWidget(t, "a", "k")
	f.waitForReason(t, "a", conditions.ReasonClaimed, 10*time.Second)
	eventually(t, 5*time.Second, func() (bool, string) {
		cs := f.inner.callsOf("a")
		return len(cs) > 0 && cs[len(cs)-1].state.Granted, fmt.Sprintf("calls of a: %+v", cs)
	})
	// When judging liveness fails for a moment, and meanwhile another
	// replica takes k over with a fenced Update naming a live holder
	failing.Store(true)
	intruder, h := f.atkIntruder(t)
	if _, o, err := intruder.Acquire(ctx, "k", h); err != nil || o.Reason != claim.ReasonTakenOver {
		t.Fatalf("takeover of k: %+v, %v", o, err)
	}
	takenOver := len(f.inner.callsOf("a"))
	f.waitForReason(t, "a", conditions.ReasonClaimError, 5*time.Second)
	// and then liveness can be read again
	failing.Store(false)
	// Then a parks on the live intruder
	f.waitForReason(t, "a", conditions.ReasonParked, 10*time.Second)
	// And its inner reconciler was told, by a parked pass, that it must stop
	// acting for k
	atkWithin(t, 3*time.Second, func() (bool, string) {
		cs := f.inner.callsOf("a")[takenOver:]
		for _, c := range cs {
			if c.hasState && !c.state.Granted && !c.state.Deleting {
				return true, ""
			}
		}
		return false, fmt.Sprintf("no parked pass of a's inner reconciler after k was taken over; calls since: %+v", cs)
	})
	// And a Lost event was recorded
	atkWithin(t, 3*time.Second, func() (bool, string) {
		return f.hasEvent(t, "a", string(claimmw.EventLost)), "no Lost event on a"
	})
}

// Promise 4 (and "no leak"): a key no longer named is released whenever it
// is held. Attack: the holder-uid label of the record was removed by hand
// (or written by an older HolderLabels); the record still names the holder
// in its annotations, so Acquire grants the key to it.
func TestAttackARecordWithoutItsHolderLabelIsStillReleasedWhenNoLongerNamed(t *testing.T) {
	f := start(t, setup{})
	ctx := context.Background()
	// Given a holds k and b waits for it
	f.createWidget(t, "a", "k")
	f.waitForReason(t, "a", conditions.ReasonClaimed, 10*time.Second)
	f.createWidget(t, "b", "k")
	f.waitForReason(t, "b", conditions.ReasonParked, 10*time.Second)
	// And someone removed the holder-uid label from k's Lease
	l := f.atkLease(t, "k")
	delete(l.Labels, backends.DefaultHolderUIDLabel)
	if err := direct(t).Update(ctx, l); err != nil {
		t.Fatal(err)
	}
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

// Promise 2: a holder whose record is deleted from outside learns it in its
// next pass. Attack: nobody else waits, so nothing but the holder itself
// can create the record again.
func TestAttackAHolderWhoseRecordIsDeletedWithNoWaiterLearnsIt(t *testing.T) {
	f := start(t, setup{})
	ctx := context.Background()
	// Given a holds k and acted for it
	f.createWidget(t, "a", "k")
	f.waitForReason(t, "a", conditions.ReasonClaimed, 10*time.Second)
	before := f.record(t, "k")
	n := len(f.inner.callsOf("a"))
	// When a person deletes k's Lease
	if err := direct(t).Delete(ctx, f.atkLease(t, "k")); err != nil {
		t.Fatal(err)
	}
	// Then within 2 s a's inner reconciler learned it: it ran parked, or
	// (the key being free, and a still naming it) granted under a new,
	// greater token, which a fenced resource tells from the old one; and a
	// Lost event was recorded
	atkWithin(t, 2*time.Second, func() (bool, string) {
		cs := f.inner.callsOf("a")[n:]
		for _, c := range cs {
			if c.hasState && !c.state.Granted {
				return true, ""
			}
			if c.hasState && len(c.state.Grants) == 1 {
				if cmp, err := c.state.Grants[0].Token.Compare(before.Token); err == nil && cmp > 0 {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("calls since deletion: %+v; a: %+v; record now %+v (was token %s)", cs, f.claimed(t, "a"), f.record(t, "k"), before.Token)
	})
	atkWithin(t, 2*time.Second, func() (bool, string) {
		return f.hasEvent(t, "a", string(claimmw.EventLost)), "no Lost event on a"
	})
}

// atkMW is one middleware of atkStart.
type atkMW struct {
	opts    []claimmw.Option
	keys    claimmw.KeysFunc
	workers int
}

// atkStart runs one manager (one operator replica) restricted to ns with
// every middleware of mws around its own inner recorder, and returns a
// fixture per middleware. Calling it twice with one ns runs two replicas.
func atkStart(t *testing.T, ns string, mws ...atkMW) []*fixture {
	t.Helper()
	w := &writes{}
	mgr, err := ctrl.NewManager(rest.CopyConfig(env.Config), ctrl.Options{
		Scheme:     env.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		NewClient: func(cfg *rest.Config, o client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, o)
			if err != nil {
				return nil, err
			}
			return interceptor.NewClient(c, w.funcs()), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []*fixture
	for i, m := range mws {
		f := &fixture{ns: ns, inner: &inner{}, writes: w, client: mgr.GetClient()}
		keys := m.keys
		if keys == nil {
			keys = specKeys
		}
		opts := append([]claimmw.Option{
			claimmw.FromManager(mgr),
			claimmw.For(&testcrd.Widget{}),
			claimmw.WithClaim(claim.Config{Namespace: ns}, claim.WithBackend(lease.Backend)),
			claimmw.WithKeys(keys),
			claimmw.WithRequeue(time.Hour, time.Hour),
			claimmw.WithMetrics(false),
		}, m.opts...)
		f.mw, err = claimmw.Wrap(f.inner, opts...)
		if err != nil {
			t.Fatal(err)
		}
		err = f.mw.SetupWithManager(mgr, ctrl.NewControllerManagedBy(mgr).
			For(&testcrd.Widget{}).
			Named(fmt.Sprintf("widget-%d", i)).
			WithOptions(controller.Options{MaxConcurrentReconciles: max(m.workers, 1)}))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	return out
}

// atkPrefixed is a KeysFunc naming spec.keys with a prefix, so that two
// middlewares on one kind name disjoint keys.
func atkPrefixed(prefix string) claimmw.KeysFunc {
	return func(ctx context.Context, obj client.Object) ([]string, error) {
		keys, err := specKeys(ctx, obj)
		out := make([]string, len(keys))
		for i, k := range keys {
			out[i] = prefix + k
		}
		return out, err
	}
}

// atkCondition returns the Widget's condition of type ct.
func (f *fixture) atkCondition(t *testing.T, name string, ct conditions.Type) metav1.Condition {
	t.Helper()
	w, err := f.widget(t, name)
	if err != nil {
		return metav1.Condition{}
	}
	if c := meta.FindStatusCondition(w.Status.Conditions, string(ct)); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// Promises 5 and 8: two middlewares on one kind (different WithName, as
// docs/middleware.md asks) coexist; each one's deletion path runs its inner
// reconciler with the keys it holds and releases its records before the
// finalizer comes off. (Sharing the default finalizer is refused at setup,
// see TestTwoMiddlewaresSharingAFinalizerOrConditionTypeAreRefusedAtSetup;
// each has its own here.)
func TestAttackTwoMiddlewaresOnOneKindBothRunTheirDeletionPath(t *testing.T) {
	ns := env.Namespace(t)
	fs := atkStart(t, ns,
		atkMW{keys: atkPrefixed("storage/"), opts: []claimmw.Option{claimmw.WithName("storage"), claimmw.WithConditionType("StorageClaimed"), claimmw.WithFinalizer("example.com/storage")}},
		atkMW{keys: atkPrefixed("network/"), opts: []claimmw.Option{claimmw.WithName("network"), claimmw.WithConditionType("NetworkClaimed"), claimmw.WithFinalizer("example.com/network")}},
	)
	st, nw := fs[0], fs[1]
	// Given x holds storage/k through one middleware and network/k through
	// the other
	st.createWidget(t, "x", "k")
	eventually(t, 10*time.Second, func() (bool, string) {
		s, n := st.atkCondition(t, "x", "StorageClaimed"), nw.atkCondition(t, "x", "NetworkClaimed")
		return s.Reason == string(conditions.ReasonClaimed) && n.Reason == string(conditions.ReasonClaimed), fmt.Sprintf("x: %+v / %+v", s, n)
	})
	// When x is deleted, and the network middleware's deletion passes fail
	// for a second (its cleanup waits for something)
	var firstFail atomic.Int64
	var mu sync.Mutex
	cleaned := map[string]bool{} // deletion passes that succeeded with their key granted
	for _, f := range fs {
		f.inner.mu.Lock()
		f.inner.fail = func(_ string, c call) error {
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
		}
		f.inner.mu.Unlock()
	}
	x, _ := st.widget(t, "x")
	if err := direct(t).Delete(context.Background(), x); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		_, err := st.widget(t, "x")
		return apierrors.IsNotFound(err), fmt.Sprintf("x after deletion: %v", err)
	})
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

func deletionCalls(f *fixture, name string) []claimmw.State {
	var out []claimmw.State
	for _, c := range f.inner.callsOf(name) {
		if c.state.Deleting {
			out = append(out, c.state)
		}
	}
	return out
}

// Promise 9 with two middlewares on one kind (docs: "two middlewares for one
// kind need different names"): a steady holder makes no write. (Sharing
// the default condition type is refused at setup; each has its own here.)
func TestAttackTwoMiddlewaresOnOneKindWithTheDefaultConditionTypeSettle(t *testing.T) {
	ns := env.Namespace(t)
	fs := atkStart(t, ns,
		atkMW{keys: atkPrefixed("storage/"), opts: []claimmw.Option{claimmw.WithName("storage"), claimmw.WithFinalizer("example.com/storage")}},
		atkMW{keys: atkPrefixed("network/"), opts: []claimmw.Option{claimmw.WithName("network"), claimmw.WithFinalizer("example.com/network"), claimmw.WithConditionType("NetworkClaimed")}},
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

// atkActors records which objects are in a granted inner pass for each key,
// and every moment two different objects were.
type atkActors struct {
	mu         sync.Mutex
	acting     map[string]map[string]int
	violations []string
}

func (a *atkActors) enter(key, obj string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.acting == nil {
		a.acting = map[string]map[string]int{}
	}
	if a.acting[key] == nil {
		a.acting[key] = map[string]int{}
	}
	for other, n := range a.acting[key] {
		if other != obj && n > 0 {
			a.violations = append(a.violations, fmt.Sprintf("%s acts for %q while %s does", obj, key, other))
		}
	}
	a.acting[key][obj]++
}

func (a *atkActors) leave(key, obj string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acting[key][obj]--
}

func (a *atkActors) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.violations...)
}

// hook returns an inner hook that records granted passes; when block says
// so for a pass, the pass waits on release.
func (a *atkActors) hook(block func(name string, c call) bool, entered chan<- struct{}, release <-chan struct{}) func(context.Context, string, call) (reconcile.Result, error) {
	return func(_ context.Context, name string, c call) (reconcile.Result, error) {
		if !c.state.Granted {
			return reconcile.Result{}, nil
		}
		for _, g := range c.state.Grants {
			a.enter(g.Key, name)
		}
		defer func() {
			for _, g := range c.state.Grants {
				a.leave(g.Key, name)
			}
		}()
		if block != nil && block(name, c) {
			select {
			case entered <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-time.After(15 * time.Second):
			}
		}
		return reconcile.Result{}, nil
	}
}

// atkStripHolderLabel removes the holder-uid label from key's Lease, as a
// person, a label-pruning tool or an older HolderLabels would leave it; the
// annotations still name the holder.
func (f *fixture) atkStripHolderLabel(t *testing.T, key string) {
	t.Helper()
	l := f.atkLease(t, key)
	delete(l.Labels, backends.DefaultHolderUIDLabel)
	if err := direct(t).Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
}

// Promise 3: no deadlock across key-set edits; an object waiting for a key
// gives up every key after it. Attack: the later key's Lease lost its
// holder-uid label, so the listing of the object's records misses it.
func TestAttackKeySetEditsConvergeWhenARecordLostItsHolderLabel(t *testing.T) {
	f := start(t, setup{})
	// Given x holds b (its Lease's holder label removed) and y holds a
	f.createWidget(t, "x", "b")
	f.waitForReason(t, "x", conditions.ReasonClaimed, 10*time.Second)
	f.atkStripHolderLabel(t, "b")
	f.createWidget(t, "y", "a")
	f.waitForReason(t, "y", conditions.ReasonClaimed, 10*time.Second)
	// When both are edited to name a and b
	f.edit(t, "x", func(w *testcrd.Widget) { w.Spec.Keys = []string{"a", "b"} })
	f.edit(t, "y", func(w *testcrd.Widget) { w.Spec.Keys = []string{"a", "b"} })
	// Then one of them ends up holding both
	eventually(t, 10*time.Second, func() (bool, string) {
		x, y := f.claimed(t, "x"), f.claimed(t, "y")
		holdsBoth := func(c metav1.Condition) bool {
			return c.ObservedGeneration == 2 && c.Reason == string(conditions.ReasonClaimed)
		}
		return holdsBoth(x) || holdsBoth(y),
			fmt.Sprintf("deadlock: x %s %q; y %s %q", x.Reason, x.Message, y.Reason, y.Message)
	})
}

// Promise 8: the deletion path tells the inner reconciler the keys the
// object still holds, and releases them before the finalizer comes off.
// Attack: the record lost its holder-uid label; its annotations still name
// the object, and Acquire still grants it to the object.
func TestAttackTheDeletionPathReleasesARecordThatLostItsHolderLabel(t *testing.T) {
	f := start(t, setup{})
	// Given x holds k, and k's Lease lost its holder label
	f.createWidget(t, "x", "k")
	f.waitForReason(t, "x", conditions.ReasonClaimed, 10*time.Second)
	f.atkStripHolderLabel(t, "k")
	x, _ := f.widget(t, "x")
	// When x is deleted
	if err := direct(t).Delete(context.Background(), x); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		_, err := f.widget(t, "x")
		return apierrors.IsNotFound(err), fmt.Sprintf("x after deletion: %v", err)
	})
	// Then its deletion pass was told it holds k, and the record is gone
	del := deletionCalls(f, "x")
	if len(del) == 0 || len(del[0].Grants) != 1 || del[0].Grants[0].Key != "k" {
		t.Errorf("deletion passes %+v, want the first with Grants [k]", del)
	}
	if rec := f.record(t, "k"); rec.Exists {
		t.Errorf("record of k outlives its deleted holder x: %+v", rec)
	}
}

// Promise 5: two middlewares on one kind never release each other's
// records; records without a set (written before sets existed) are released
// by their holder. Attack: after an upgrade from a version without sets,
// both middlewares' records carry no set; the storage middleware must not
// release the record the network middleware acts for.
func TestAttackARecordWithoutASetIsNotReleasedByTheOtherMiddlewareOfItsHolder(t *testing.T) {
	ns := env.Namespace(t)
	fs := atkStart(t, ns,
		atkMW{keys: atkPrefixed("storage/"), opts: []claimmw.Option{claimmw.WithName("storage"), claimmw.WithConditionType("StorageClaimed"), claimmw.WithFinalizer("example.com/storage")}},
		atkMW{keys: atkPrefixed("network/"), opts: []claimmw.Option{claimmw.WithName("network"), claimmw.WithConditionType("NetworkClaimed"), claimmw.WithFinalizer("example.com/network")}},
	)
	st, nw := fs[0], fs[1]
	// Given x holds storage/k and network/k, one per middleware
	st.createWidget(t, "x", "k")
	eventually(t, 10*time.Second, func() (bool, string) {
		s, n := st.atkCondition(t, "x", "StorageClaimed"), nw.atkCondition(t, "x", "NetworkClaimed")
		return s.Reason == string(conditions.ReasonClaimed) && n.Reason == string(conditions.ReasonClaimed), fmt.Sprintf("x: %+v / %+v", s, n)
	})
	// When network/k's record is as a version without sets wrote it
	l := nw.atkLease(t, "network/k")
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
	if now := nw.atkLease(t, "network/k").UID; now != uid {
		t.Errorf("the Lease of network/k was deleted and created again (UID %s, now %s): the key was free for a while", uid, now)
	}
	for _, c := range st.inner.callsOf("x") {
		for _, g := range c.state.Releasing {
			if g.Key == "network/k" {
				t.Errorf("the storage middleware's inner reconciler was told to release network/k: %+v", c.state)
			}
		}
	}
	if n := nw.atkCondition(t, "x", "NetworkClaimed"); n.Reason != string(conditions.ReasonClaimed) {
		t.Errorf("x's NetworkClaimed: %+v", n)
	}
}

// Promise 1 and the wake-ups: a holder removed without its finalizer (a
// person removed it by hand) leaves a record naming a gone holder; the
// waiter is woken by the deletion and takes the key over. (Regression.)
func TestAttackAHolderDeletedWithoutItsFinalizerHandsTheKeyToTheWaiter(t *testing.T) {
	f := start(t, setup{})
	ctx := context.Background()
	// Given a holds k and b waits for it
	f.createWidget(t, "a", "k")
	f.waitForReason(t, "a", conditions.ReasonClaimed, 10*time.Second)
	f.createWidget(t, "b", "k")
	f.waitForReason(t, "b", conditions.ReasonParked, 10*time.Second)
	// When a person deletes a and strips its finalizer at once
	a, _ := f.widget(t, "a")
	if err := direct(t).Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	if w, err := f.widget(t, "a"); err == nil {
		w.Finalizers = nil
		if err := direct(t).Update(ctx, w); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	// Then b takes k over within seconds, with a greater token
	f.waitForReason(t, "b", conditions.ReasonClaimed, wakeWithin)
	b, _ := f.widget(t, "b")
	if rec := f.record(t, "k"); !rec.Ours() || rec.Holder.UID != b.UID {
		t.Errorf("record of k = %+v, want b's", rec)
	}
}

// Promise 6 with WithRenewal: a non-idempotent key normalizer is applied once
// by the renewals too, so a holder keeps its key past the lease duration.
// (Regression.)
func TestAttackRenewalsKeepAKeyUnderANonIdempotentNormalizer(t *testing.T) {
	const (
		duration = 30 * time.Second
		every    = 5 * time.Second
		deadline = 20 * time.Second
	)
	clk := testingclock.NewFakeClock(time.Now())
	exp, err := expiry.New(duration, clk)
	if err != nil {
		t.Fatal(err)
	}
	tenant := func(k string) (string, error) { return "tenant-a/" + k, nil }
	f := start(t, setup{
		claimCfg:  &claim.Config{Normalize: tenant},
		opts:      []claimmw.Option{claimmw.WithRenewal(expiry.KeeperConfig{Duration: duration, RenewEvery: every, RenewDeadline: deadline, Clock: clk})},
		claimOpts: []claim.Option{claim.WithLiveness(exp), claim.WithClock(clk)},
	})
	// Given a holds k and b waits for it
	f.createWidget(t, "a", "k")
	f.waitForReason(t, "a", conditions.ReasonClaimed, 10*time.Second)
	f.createWidget(t, "b", "k")
	f.waitForReason(t, "b", conditions.ReasonParked, 10*time.Second)
	// When twice the lease duration passes, tick by tick
	for i := 0; i < 12; i++ {
		before := f.record(t, "k").RenewTime
		clk.Step(every)
		eventually(t, wakeWithin, func() (bool, string) {
			rec := f.record(t, "k")
			return rec.RenewTime.After(before), fmt.Sprintf("tick %d: no renewal of k landed; record %+v", i, rec)
		})
	}
	// Then a still holds k, and b, asked again, is still parked
	f.touch(t, "b")
	time.Sleep(time.Second)
	a, _ := f.widget(t, "a")
	if rec := f.record(t, "k"); rec.Holder.UID != a.UID {
		t.Errorf("record of k = %+v, want a's", rec)
	}
	if c := f.claimed(t, "b"); c.Reason != string(conditions.ReasonParked) {
		t.Errorf("b: %+v, want Parked", c)
	}
	if c := f.claimed(t, "a"); c.Reason != string(conditions.ReasonClaimed) {
		t.Errorf("a: %+v, want Claimed", c)
	}
}

// Promise 10: a second middleware with the same name on one kind fails
// setup. (Regression.)
func TestAttackASecondMiddlewareWithTheSameNameOnOneKindFailsSetup(t *testing.T) {
	mgr, err := ctrl.NewManager(rest.CopyConfig(env.Config), ctrl.Options{
		Scheme:     env.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	wrap := func(name string) *claimmw.Middleware {
		mw, err := claimmw.Wrap(&inner{},
			claimmw.FromManager(mgr),
			claimmw.For(&testcrd.Widget{}),
			claimmw.WithClaim(claim.Config{Namespace: "claims"}, claim.WithBackend(lease.Backend)),
			claimmw.WithKeys(specKeys),
			claimmw.WithMetrics(false),
			claimmw.WithName(name),
			claimmw.WithConditionType(conditions.Type(name+"Claimed")),
			claimmw.WithFinalizer(finalizer.Name("example.com/"+name)))
		if err != nil {
			t.Fatal(err)
		}
		return mw
	}
	// Given one middleware set up on Widget
	if err := wrap("storage").SetupWithManager(mgr, ctrl.NewControllerManagedBy(mgr).For(&testcrd.Widget{}).Named("w1")); err != nil {
		t.Fatal(err)
	}
	// When a second one with another name, then one with the same name, is
	// set up on Widget
	errOther := wrap("network").SetupWithManager(mgr, ctrl.NewControllerManagedBy(mgr).For(&testcrd.Widget{}).Named("w2"))
	errSame := wrap("storage").SetupWithManager(mgr, ctrl.NewControllerManagedBy(mgr).For(&testcrd.Widget{}).Named("w3"))
	// Then only the same name fails
	if errOther != nil {
		t.Errorf("another name: %v", errOther)
	}
	if errSame == nil {
		t.Error("the same name on one kind set up without an error")
	} else {
		mustContain(t, "error", errSame.Error(), "WithName")
	}
}

// Promise 3 with the fairness pre-filter claim.WithSiblings (a documented
// WithClaim option): any sequence of key-set edits converges. Attack: the
// younger x holds a and yields the free b to the older y, which waits for a.
func TestAttackKeySetEditsConvergeWithSiblingFairness(t *testing.T) {
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
	f.createWidget(t, "x", "a")
	f.waitForReason(t, "x", conditions.ReasonClaimed, 10*time.Second)
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

// "No leak" and handover step 5 (a successor that is being deleted is no
// successor): the handover commits only to a successor that still exists.
// Attack: the successor is deleted while the holder's handover pass runs,
// and the holder meanwhile stops naming the key.
func TestAttackAHandoverIsNotCommittedToASuccessorDeletedDuringThePass(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithHandover(handTo)}, workers: 2})
	ctx := context.Background()
	var blocking atomic.Bool
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	f.inner.mu.Lock()
	f.inner.hook = func(_ context.Context, name string, c call) (reconcile.Result, error) {
		if name == "a" && len(c.state.Handovers) > 0 && blocking.Load() {
			select {
			case entered <- struct{}{}:
			default:
			}
			select {
			case <-release:
			case <-time.After(15 * time.Second):
			}
		}
		return reconcile.Result{}, nil
	}
	f.inner.mu.Unlock()
	// Given a holds k and b waits for it
	f.createWidget(t, "a", "k")
	f.waitForReason(t, "a", conditions.ReasonClaimed, 10*time.Second)
	f.createWidget(t, "b", "k")
	f.waitForReason(t, "b", conditions.ReasonParked, 10*time.Second)
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
	b, _ := f.widget(t, "b")
	if err := direct(t).Delete(ctx, b); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		_, err := f.widget(t, "b")
		return apierrors.IsNotFound(err), fmt.Sprintf("b after deletion: %v", err)
	})
	f.edit(t, "a", func(w *testcrd.Widget) { w.Spec.Keys = nil; w.Spec.HandTo = "" })
	blocking.Store(false)
	close(release)
	time.Sleep(3 * time.Second)
	// Then no record of k names the deleted b
	if rec := f.record(t, "k"); rec.Exists && rec.Holder.UID == b.UID {
		t.Errorf("record of k names the deleted successor b and outlives everything that named k: %+v", rec)
	}
}

// Promise 8: on the deletion path the inner reconciler gets the keys the
// object still holds (read uncached), and they are released. Attack: a
// person removed the middleware's finalizer by hand while another finalizer
// keeps the object; the object still holds k.
func TestAttackTheDeletionPathWithoutOurFinalizerStillReportsAndReleasesHeldKeys(t *testing.T) {
	f := start(t, setup{})
	ctx := context.Background()
	var failing atomic.Bool
	f.inner.mu.Lock()
	f.inner.fail = func(name string, c call) error {
		if c.state.Deleting && failing.Load() {
			return errors.New("injected: cleanup not done yet")
		}
		return nil
	}
	f.inner.mu.Unlock()
	// Given a holds k, with another controller's finalizer as well
	f.createWidget(t, "a", "k")
	f.waitForReason(t, "a", conditions.ReasonClaimed, 10*time.Second)
	f.edit(t, "a", func(w *testcrd.Widget) { w.Finalizers = append(w.Finalizers, "example.com/other") })
	f.createWidget(t, "b", "k")
	f.waitForReason(t, "b", conditions.ReasonParked, 10*time.Second)
	// When a is deleted, its first deletion passes fail, and meanwhile a
	// person removes the middleware's finalizer
	failing.Store(true)
	a, _ := f.widget(t, "a")
	if err := direct(t).Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() (bool, string) {
		return len(deletionCalls(f, "a")) > 0, "no deletion pass of a"
	})
	f.edit(t, "a", func(w *testcrd.Widget) { w.Finalizers = []string{"example.com/other"} })
	failing.Store(false)
	n := len(deletionCalls(f, "a"))
	f.touch(t, "a")
	eventually(t, 5*time.Second, func() (bool, string) {
		return len(deletionCalls(f, "a")) > n, "no deletion pass of a after the finalizer was removed"
	})
	time.Sleep(time.Second)
	// Then the first deletion pass since told a it still holds k (later
	// passes, after the release, rightly hold nothing), and k went to b
	if s := deletionCalls(f, "a")[n]; len(s.Grants) != 1 || s.Grants[0].Key != "k" {
		t.Errorf("deletion pass of a while it holds k: %+v, want Grants [k]", s)
	}
	if rec := f.record(t, "k"); rec.Exists && rec.Holder.UID == a.UID {
		t.Errorf("record of k is still a's while a is being deleted and b waits: %+v; b: %+v", rec, f.claimed(t, "b"))
	}
}

// Promise 7: condition messages are at most 4 KiB and event notes at most
// 1 KiB, whatever the keys and errors. Attack: a held object whose keys function
// then fails with a 10 KB multi-byte error (InvalidKey, and a Lost event
// quoting it), and a waiter on very many long multi-byte keys. (Regression.)
func TestAttackMessagesStayBoundedForHugeErrorsAndKeys(t *testing.T) {
	huge := strings.Repeat("é", 5000)
	keys := func(ctx context.Context, obj client.Object) ([]string, error) {
		if obj.(*testcrd.Widget).Spec.HandTo == "huge" {
			return nil, errors.New(huge)
		}
		return specKeys(ctx, obj)
	}
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithKeys(keys), claimmw.WithMaxKeys(64)}})
	var long []string
	for i := 0; i < 60; i++ {
		long = append(long, fmt.Sprintf("%03d-%s", i, strings.Repeat("ключ", 120)))
	}
	// Given a holds every long key, and b waits for them
	f.createWidget(t, "a", long...)
	f.waitForReason(t, "a", conditions.ReasonClaimed, 20*time.Second)
	f.createWidget(t, "b", long...)
	f.waitForReason(t, "b", conditions.ReasonParked, 20*time.Second)
	// When a's keys function fails with a huge error
	f.edit(t, "a", func(w *testcrd.Widget) { w.Spec.HandTo = "huge" })
	f.waitForReason(t, "a", conditions.ReasonInvalidKey, 10*time.Second)
	time.Sleep(time.Second)
	// Then every condition message and event note is bounded
	for _, n := range []string{"a", "b"} {
		if c := f.claimed(t, n); len(c.Message) > conditions.MaxMessageLength {
			t.Errorf("%s: condition message of %d bytes", n, len(c.Message))
		}
	}
	var list eventsv1.EventList
	if err := env.APIReader.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) == 0 {
		t.Error("no events recorded")
	}
	for _, e := range list.Items {
		if len(e.Note) > 1024 {
			t.Errorf("event %s on %s: note of %d bytes", e.Reason, e.Regarding.Name, len(e.Note))
		}
	}
	// And the Warning event of a's InvalidKey, whose note carries the huge
	// error, was recorded, not refused for its length
	if !f.hasEvent(t, "a", string(conditions.ReasonInvalidKey)) {
		t.Error("no InvalidKey event on a: was the event refused?")
	}
}

// Promise 8: FencedClient works on the deletion path, with the grants the
// object still holds (docs/middleware.md "Deletion"; the FencedClient godoc
// says it fails there). (Regression.)
func TestAttackFencedClientWorksOnTheDeletionPath(t *testing.T) {
	f := start(t, setup{})
	var mu sync.Mutex
	var errs []error
	f.inner.mu.Lock()
	f.inner.hook = func(ctx context.Context, name string, c call) (reconcile.Result, error) {
		// A cleanup that writes only for the keys it still holds: the
		// deletion path may run more than once, and later passes hold none
		if !c.state.Deleting || len(c.state.Grants) == 0 {
			return reconcile.Result{}, nil
		}
		fc, err := claimmw.FencedClient(ctx)
		if err == nil {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cleanup-" + name}}
			err = fc.Create(ctx, cm)
		}
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		return reconcile.Result{}, err
	}
	f.inner.mu.Unlock()
	// Given a holds k
	f.createWidget(t, "a", "k")
	f.waitForReason(t, "a", conditions.ReasonClaimed, 10*time.Second)
	// When a is deleted
	a, _ := f.widget(t, "a")
	if err := direct(t).Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	// Then its deletion pass writes through a fenced client, and a is gone
	eventually(t, 10*time.Second, func() (bool, string) {
		_, err := f.widget(t, "a")
		mu.Lock()
		defer mu.Unlock()
		return apierrors.IsNotFound(err), fmt.Sprintf("a: %v; fenced writes of the deletion passes: %v", err, errs)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(errs) == 0 || errs[0] != nil {
		t.Errorf("fenced writes of the deletion passes: %v", errs)
	}
}

// Promises 1 and 5 with two middlewares on one kind in one process: a
// record is found by its key alone, so a key both middlewares name for one
// object is one record, written in one set. Attack: the storage middleware
// wrote x's record of k; the network middleware, naming k for x too, is
// granted it (Held) and acts; the storage middleware then gives k up and
// releases the record of its set, and y takes k and acts while x's network
// pass still acts for it.
func TestAttackTwoMiddlewaresNamingOneKeyNeverLetTwoObjectsActForIt(t *testing.T) {
	ns := env.Namespace(t)
	handToKey := func(_ context.Context, obj client.Object) ([]string, error) {
		if k := obj.(*testcrd.Widget).Spec.HandTo; k != "" {
			return []string{k}, nil
		}
		return nil, nil
	}
	fs := atkStart(t, ns,
		atkMW{keys: specKeys, opts: []claimmw.Option{claimmw.WithName("storage"), claimmw.WithConditionType("StorageClaimed"), claimmw.WithFinalizer("example.com/storage")}},
		atkMW{keys: handToKey, opts: []claimmw.Option{claimmw.WithName("network"), claimmw.WithConditionType("NetworkClaimed"), claimmw.WithFinalizer("example.com/network")}},
	)
	st, nw := fs[0], fs[1]
	actors := &atkActors{}
	var blocking atomic.Bool
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	defer close(release)
	st.inner.mu.Lock()
	st.inner.hook = actors.hook(nil, nil, nil)
	st.inner.mu.Unlock()
	nw.inner.mu.Lock()
	nw.inner.hook = actors.hook(func(name string, _ call) bool { return name == "x" && blocking.Load() }, entered, release)
	nw.inner.mu.Unlock()
	// Given x holds k through the storage middleware, and y waits for k there
	st.createWidget(t, "x", "k")
	eventually(t, 10*time.Second, func() (bool, string) {
		c := st.atkCondition(t, "x", "StorageClaimed")
		return c.Reason == string(conditions.ReasonClaimed), fmt.Sprintf("x: %+v", c)
	})
	st.createWidget(t, "y", "k")
	eventually(t, 10*time.Second, func() (bool, string) {
		c := st.atkCondition(t, "y", "StorageClaimed")
		return c.Reason == string(conditions.ReasonParked), fmt.Sprintf("y: %+v", c)
	})
	// And the network middleware names k for x as well: its record of k is
	// the storage set's, another claim, so the network middleware waits
	// behind it rather than acting beside it
	blocking.Store(true)
	st.edit(t, "x", func(w *testcrd.Widget) { w.Spec.HandTo = "k" })
	eventually(t, 10*time.Second, func() (bool, string) {
		c := nw.atkCondition(t, "x", "NetworkClaimed")
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
		t.Errorf("two objects acted for one key at once: %v; y: %+v; record of k: %+v", v, st.atkCondition(t, "y", "StorageClaimed"), st.record(t, "k"))
	}
}

// Promises 1 and 3 under concurrency (MaxConcurrentReconciles 3): random
// key-set edits of five objects over three keys. No two objects ever act for
// one key at once, and once the edits stop every waiting object's chain of
// holders ends at an object that holds every key it names (no cycle).
// (Regression.)
func TestAttackRandomKeySetEditsWithConcurrentWorkersConvergeWithoutOverlap(t *testing.T) {
	f := start(t, setup{workers: 3})
	actors := &atkActors{}
	f.inner.mu.Lock()
	// Each granted pass acts for 30 ms.
	f.inner.hook = func(_ context.Context, name string, c call) (reconcile.Result, error) {
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
	}
	f.inner.mu.Unlock()
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
