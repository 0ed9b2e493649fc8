package claimmw_test

// Helpers shared by the envtest tests of the middleware's promises
// (docs/middleware.md "What happens per reconcile" and "What is promised at
// this layer"): several middlewares or replicas in one test, uncached reads
// of records, another replica taking a key over, and a record of which
// objects act for a key at once.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// softEventually is eventually that reports a failure and goes on.
func softEventually(t *testing.T, within time.Duration, cond func() (bool, string)) bool {
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

// leaseOf reads the Lease of key, uncached.
func (f *fixture) leaseOf(t *testing.T, key string) *coordinationv1.Lease {
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

// intruderHolder returns a ConfigMap holder (alive for HolderExists) and a
// Claimer of the middleware's set whose liveness judges every holder dead:
// another replica, or a person's tool, taking a key over with a fenced
// Update naming another holder.
func (f *fixture) intruderHolder(t *testing.T) (*claim.Claimer, claim.Holder) {
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

// replicaMW is one middleware of startReplica.
type replicaMW struct {
	opts    []claimmw.Option
	keys    claimmw.KeysFunc
	workers int
}

// startReplica runs one manager (one operator replica) restricted to ns with
// every middleware of mws around its own inner recorder, and returns a
// fixture per middleware. Calling it twice with one ns runs two replicas.
func startReplica(t *testing.T, ns string, mws ...replicaMW) []*fixture {
	t.Helper()
	w := &writes{}
	funcs := w.funcs()
	mgr := newManager(t, ns, &funcs)
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
		var err error
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
	envtest.RunManager(t, mgr)
	return out
}

// prefixedKeys is a KeysFunc naming spec.keys with a prefix, so that two
// middlewares on one kind name disjoint keys.
func prefixedKeys(prefix string) claimmw.KeysFunc {
	return func(ctx context.Context, obj client.Object) ([]string, error) {
		keys, err := specKeys(ctx, obj)
		out := make([]string, len(keys))
		for i, k := range keys {
			out[i] = prefix + k
		}
		return out, err
	}
}

// conditionOfType returns the Widget's condition of type ct.
func (f *fixture) conditionOfType(t *testing.T, name string, ct conditions.Type) metav1.Condition {
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

func deletionCalls(f *fixture, name string) []claimmw.State {
	var out []claimmw.State
	for _, c := range f.inner.callsOf(name) {
		if c.state.Deleting {
			out = append(out, c.state)
		}
	}
	return out
}

// keyActors records which objects are in a granted inner pass for each key,
// and every moment two different objects were.
type keyActors struct {
	mu         sync.Mutex
	acting     map[string]map[string]int
	violations []string
}

func (a *keyActors) enter(key, obj string) {
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

func (a *keyActors) leave(key, obj string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.acting[key][obj]--
}

func (a *keyActors) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.violations...)
}

// hook returns an inner hook that records granted passes; when block says
// so for a pass, the pass waits on release.
func (a *keyActors) hook(block func(name string, c call) bool, entered chan<- struct{}, release <-chan struct{}) func(context.Context, string, call) (reconcile.Result, error) {
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
			enterAndWait(entered, release)
		}
		return reconcile.Result{}, nil
	}
}

// stripHolderLabel removes the holder-uid label from key's Lease, as a
// person, a label-pruning tool or an older HolderLabels would leave it; the
// annotations still name the holder.
func (f *fixture) stripHolderLabel(t *testing.T, key string) {
	t.Helper()
	l := f.leaseOf(t, key)
	delete(l.Labels, backends.DefaultHolderUIDLabel)
	if err := direct(t).Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
}

// enterAndWait says on entered that a pass got here (unless an earlier one
// said so and nobody listened yet) and blocks it until release is closed,
// for 15 s at the most.
func enterAndWait(entered chan<- struct{}, release <-chan struct{}) {
	select {
	case entered <- struct{}{}:
	default:
	}
	select {
	case <-release:
	case <-time.After(15 * time.Second):
	}
}
