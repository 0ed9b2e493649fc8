package claimmw_test

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
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

var env *envtest.Env

func TestMain(m *testing.M) {
	envtest.Main(m, &env, envtest.Options{
		AddToScheme: []func(*runtime.Scheme) error{testcrd.AddToScheme},
		CRDs:        []*apiextensionsv1.CustomResourceDefinition{testcrd.WidgetCRD()},
	})
}

// failKeysFuncKey makes the test keys function fail, as one that cannot
// resolve a reference would.
const failKeysFuncKey = "fail-keyfunc"

// specKeys is the tests' keys function: a Widget's spec.keys.
func specKeys(_ context.Context, obj client.Object) ([]string, error) {
	w := obj.(*testcrd.Widget)
	for _, k := range w.Spec.Keys {
		if k == failKeysFuncKey {
			return nil, errors.New("resolving the storage reference: no such backend")
		}
	}
	return w.Spec.Keys, nil
}

// call is one call of the inner reconciler.
type call struct {
	state    claimmw.State
	hasState bool
}

// inner records its calls per Widget name and fails when fail says so.
type inner struct {
	mu    sync.Mutex
	calls map[string][]call
	fail  func(name string, c call) error
	// hook, when set, runs after fail with the pass's context and decides
	// the pass's result.
	hook func(ctx context.Context, name string, c call) (reconcile.Result, error)
}

func (r *inner) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s, ok := claimmw.StateFrom(ctx)
	c := call{state: s, hasState: ok}
	r.mu.Lock()
	if r.calls == nil {
		r.calls = map[string][]call{}
	}
	r.calls[req.Name] = append(r.calls[req.Name], c)
	fail, hook := r.fail, r.hook
	r.mu.Unlock()
	if fail != nil {
		if err := fail(req.Name, c); err != nil {
			return reconcile.Result{}, err
		}
	}
	if hook != nil {
		return hook(ctx, req.Name, c)
	}
	return reconcile.Result{}, nil
}

func (r *inner) callsOf(name string) []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]call(nil), r.calls[name]...)
}

// setFail makes fail decide whether each later pass fails before its hook.
func (r *inner) setFail(fail func(name string, c call) error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = fail
}

// setHook makes hook decide the result of each later pass.
func (r *inner) setHook(hook func(ctx context.Context, name string, c call) (reconcile.Result, error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hook = hook
}

// writes counts the writes the manager's client sends, by "verb Kind", and
// can make Lease deletes fail.
type writes struct {
	mu               sync.Mutex
	counts           map[string]int
	failLeaseDeletes atomic.Bool
	// failRenewalsOf, when it holds a UID, fails every Lease update that
	// names that holder: its renewals, not a takeover by another.
	failRenewalsOf atomic.Value
	failedRenewals atomic.Int32
	// failStatusOf, when it holds a name, fails every status write of the
	// Widget of that name, as an admission policy or missing RBAC would.
	failStatusOf atomic.Value
	failedStatus atomic.Int32
	// beforeStatus, when it holds a func(client.Object), runs before each
	// status write the manager sends, which waits for it.
	beforeStatus atomic.Value
	// staleWidget, when it holds a *testcrd.Widget, is what the manager's
	// client reads for a Widget of that name: a cache that has not yet
	// shown the writes since.
	staleWidget atomic.Value
	// beforeLeaseCreate, when it holds a func(*coordinationv1.Lease), runs
	// before each Lease create the manager sends, in the pass that sends it.
	beforeLeaseCreate atomic.Value
	// leaseListsAt, when it holds a resourceVersion, is the revision at
	// which the manager's client lists Leases: a Lease cache that has not
	// yet seen the writes since. The answer is the API server's own, read
	// at that exact resourceVersion.
	leaseListsAt atomic.Value
	// beforeWidgetGet, when it holds a func(client.ObjectKey), runs before
	// each read of a Widget through the manager's client, which waits for
	// it: a pass of that Widget does not begin until it returns.
	beforeWidgetGet atomic.Value
	// beforeLeaseUpdate, when it holds a func(*coordinationv1.Lease), runs
	// before each Lease update the manager sends (renewals, takeovers),
	// which waits for it: an API server slow to answer writes.
	beforeLeaseUpdate atomic.Value
}

// holdStatus runs the beforeStatus hook for obj.
func (w *writes) holdStatus(obj client.Object) {
	if hook, _ := w.beforeStatus.Load().(func(client.Object)); hook != nil {
		hook(obj)
	}
}

// holdLease runs hook (beforeLeaseCreate or beforeLeaseUpdate) for obj when
// obj is a Lease.
func holdLease(hook *atomic.Value, obj client.Object) {
	if l, ok := obj.(*coordinationv1.Lease); ok {
		if f, _ := hook.Load().(func(*coordinationv1.Lease)); f != nil {
			f(l)
		}
	}
}

// beforeSubResourceWrite runs the beforeStatus hook for a status write of
// obj, and returns the refusal failStatusOf asks for, if any. A write of
// another subresource passes untouched.
func (w *writes) beforeSubResourceWrite(sub string, obj client.Object) error {
	if sub != "status" {
		return nil
	}
	w.holdStatus(obj)
	if w.failsStatus(obj) {
		return apierrors.NewForbidden(schema.GroupResource{Group: testcrd.GroupVersion.Group, Resource: "widgets/status"}, obj.GetName(), errors.New("injected: status writes refused"))
	}
	return nil
}

// failsStatus reports whether obj's status write is to be refused.
func (w *writes) failsStatus(obj client.Object) bool {
	name, _ := w.failStatusOf.Load().(string)
	if name == "" || obj.GetName() != name {
		return false
	}
	if _, isLease := obj.(*coordinationv1.Lease); isLease {
		return false
	}
	w.failedStatus.Add(1)
	return true
}

// failsRenewal reports whether obj is a Lease update to refuse.
func (w *writes) failsRenewal(obj client.Object) bool {
	uid, _ := w.failRenewalsOf.Load().(types.UID)
	if _, isLease := obj.(*coordinationv1.Lease); !isLease || uid == "" {
		return false
	}
	if obj.GetAnnotations()[backends.DefaultHolderUIDAnnotation] != string(uid) {
		return false
	}
	w.failedRenewals.Add(1)
	return true
}

func (w *writes) add(verb string, obj client.Object) {
	gvk, _ := apiutil.GVKForObject(obj, env.Scheme)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.counts == nil {
		w.counts = map[string]int{}
	}
	w.counts[verb+" "+gvk.Kind]++
}

func (w *writes) snapshot() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for k, v := range w.counts {
		out[k] = v
	}
	return out
}

func (w *writes) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if hook, _ := w.beforeWidgetGet.Load().(func(client.ObjectKey)); hook != nil {
				if _, ok := obj.(*testcrd.Widget); ok {
					hook(key)
				}
			}
			if stale, _ := w.staleWidget.Load().(*testcrd.Widget); stale != nil && stale.Name == key.Name && stale.Namespace == key.Namespace {
				if out, ok := obj.(*testcrd.Widget); ok {
					stale.DeepCopyInto(out)
					return nil
				}
			}
			return c.Get(ctx, key, obj, opts...)
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if at, _ := w.leaseListsAt.Load().(string); at != "" {
				if _, isLease := list.(*coordinationv1.LeaseList); isLease {
					exact := &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: at, ResourceVersionMatch: metav1.ResourceVersionMatchExact}}
					return env.APIReader.List(ctx, list, append(opts, exact)...)
				}
			}
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.add("create", obj)
			holdLease(&w.beforeLeaseCreate, obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.add("update", obj)
			holdLease(&w.beforeLeaseUpdate, obj)
			if w.failsRenewal(obj) {
				return apierrors.NewServiceUnavailable("injected: renewals fail")
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			w.add("patch", obj)
			return c.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.add("delete", obj)
			if _, isLease := obj.(*coordinationv1.Lease); isLease && w.failLeaseDeletes.Load() {
				return apierrors.NewServiceUnavailable("injected: Lease deletes fail")
			}
			return c.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			w.add("update/"+sub, obj)
			if err := w.beforeSubResourceWrite(sub, obj); err != nil {
				return err
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			w.add("patch/"+sub, obj)
			if err := w.beforeSubResourceWrite(sub, obj); err != nil {
				return err
			}
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	}
}

// fixture is one running manager with the middleware around an inner
// reconciler, restricted to one fresh namespace that also holds the Leases.
type fixture struct {
	ns     string
	mw     *claimmw.Middleware
	inner  *inner
	writes *writes
	client client.Client
}

type setup struct {
	opts      []claimmw.Option
	claimOpts []claim.Option
	// claimCfg is the claim configuration; its Namespace is the fixture's.
	claimCfg *claim.Config
	// workers is the controller's MaxConcurrentReconciles; default 1.
	workers int
	// config is the manager's identity; default: an administrator.
	config *rest.Config
	// leaseLabels, when set, restricts the manager's cache of Leases to
	// those labels, as lease.CacheByObject does with claim.Config.Labels.
	leaseLabels map[string]string
	// innerFail, when set, is the inner reconciler's fail function from
	// its first pass on (before the manager starts).
	innerFail func(name string, c call) error
	// failStatusOf, when set, refuses the status writes of the Widget of
	// that name from the manager's start (writes.failStatusOf).
	failStatusOf string
	// failRenewalsOf, when set, fails every Lease update that names that
	// holder from the manager's start (writes.failRenewalsOf).
	failRenewalsOf types.UID
	// beforeWidgetGet, when set, runs before each read of a Widget through
	// the manager's client from the manager's start (writes.beforeWidgetGet).
	beforeWidgetGet func(client.ObjectKey)
	// beforeLeaseUpdate, when set, runs before each Lease update through the
	// manager's client from the manager's start (writes.beforeLeaseUpdate).
	beforeLeaseUpdate func(*coordinationv1.Lease)
	// statusChangesWakeNobody reconciles a Widget only when its generation
	// changes, as many operators filter their primary kind: a Widget's own
	// status write does not reconcile it again.
	statusChangesWakeNobody bool
	// logs, when set, is where the manager logs, in place of a TestLogger.
	logs *logLines
	// baseCtxLogs, when set, is a logger the manager's Options.BaseContext
	// carries (the context its runnables start with).
	baseCtxLogs *logLines
}

// newManager returns a manager for one test, its cache restricted to ns, its
// client wrapped with funcs when given.
func newManager(t *testing.T, ns string, funcs *interceptor.Funcs) ctrl.Manager {
	t.Helper()
	opts := env.ManagerOptions(ns)
	opts.Logger = envtest.TestLogger(t)
	if funcs != nil {
		opts.NewClient = intercepted(*funcs)
	}
	mgr, err := ctrl.NewManager(rest.CopyConfig(env.Config), opts)
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

// intercepted returns a manager's NewClient whose clients call funcs.
func intercepted(funcs interceptor.Funcs) client.NewClientFunc {
	return envtest.WrapClient(func(c client.WithWatch) client.WithWatch { return interceptor.NewClient(c, funcs) })
}

func start(t *testing.T, s setup) *fixture {
	t.Helper()
	f, _ := startIn(t, env.Namespace(t), s)
	return f
}

// startIn runs one manager (one operator process) restricted to ns, as start
// does, and returns with the fixture a stop function that ends the manager
// and waits for it: a restart is a stop followed by another startIn on the
// same ns.
func startIn(t *testing.T, ns string, s setup) (*fixture, func()) {
	t.Helper()
	f := &fixture{ns: ns, inner: &inner{fail: s.innerFail}, writes: &writes{}}
	if s.failStatusOf != "" {
		f.writes.failStatusOf.Store(s.failStatusOf)
	}
	if s.failRenewalsOf != "" {
		f.writes.failRenewalsOf.Store(s.failRenewalsOf)
	}
	if s.beforeWidgetGet != nil {
		f.writes.beforeWidgetGet.Store(s.beforeWidgetGet)
	}
	if s.beforeLeaseUpdate != nil {
		f.writes.beforeLeaseUpdate.Store(s.beforeLeaseUpdate)
	}
	cfg := env.Config
	if s.config != nil {
		cfg = s.config
	}
	mopts := env.ManagerOptions(f.ns)
	mopts.Logger = envtest.TestLogger(t)
	if s.logs != nil {
		mopts.Logger = s.logs.logger()
	}
	if s.baseCtxLogs != nil {
		base := log.IntoContext(context.Background(), s.baseCtxLogs.logger())
		mopts.BaseContext = func() context.Context { return base }
	}
	if s.leaseLabels != nil {
		mopts.Cache.ByObject = map[client.Object]cache.ByObject{&coordinationv1.Lease{}: lease.CacheByObject(f.ns, s.leaseLabels)}
	}
	mopts.NewClient = intercepted(f.writes.funcs())
	mgr, err := ctrl.NewManager(rest.CopyConfig(cfg), mopts)
	if err != nil {
		t.Fatal(err)
	}
	f.client = mgr.GetClient()
	claimCfg := claim.Config{}
	if s.claimCfg != nil {
		claimCfg = *s.claimCfg
	}
	claimCfg.Namespace = f.ns
	f.mw, err = claimmw.Wrap(f.inner, append(widgetMiddleware(mgr, claimCfg, specKeys, s.claimOpts...), s.opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	var forOpts []builder.ForOption
	if s.statusChangesWakeNobody {
		forOpts = append(forOpts, builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	err = f.mw.SetupWithManager(mgr, ctrl.NewControllerManagedBy(mgr).
		For(&testcrd.Widget{}, forOpts...).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(s.workers, 1)}).
		Watches(&corev1.Pod{}, f.mw.HandoverEvents()))
	if err != nil {
		t.Fatal(err)
	}
	return f, runStoppable(t, mgr)
}

// runStoppable starts mgr and returns a function that stops it and waits
// for it (once; also when t ends): t fails if it stopped with an error.
func runStoppable(t *testing.T, mgr manager.Manager) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	t.Cleanup(stop)
	return stop
}

// direct returns an uncached client of its own, as a user's kubectl.
func direct(t *testing.T) client.Client { return env.TestClient(t) }

func (f *fixture) createWidget(t *testing.T, name string, keys ...string) *testcrd.Widget {
	t.Helper()
	w := &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}, Spec: testcrd.WidgetSpec{Keys: keys}}
	if err := direct(t).Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	return w
}

// createAndWait creates Widget name naming keys and waits up to 10 s for its
// claim condition to have reason: the Given of most tests.
func (f *fixture) createAndWait(t *testing.T, name string, reason conditions.Reason, keys ...string) {
	t.Helper()
	f.createWidget(t, name, keys...)
	f.waitForReason(t, name, reason, 10*time.Second)
}

// aHoldsKAndBWaits is the most common Given: Widget a holds key k, and
// Widget b, naming k too, is parked on it.
func (f *fixture) aHoldsKAndBWaits(t *testing.T) { f.holdsAndWaits(t, "a", "k", "b") }

// holdsAndWaits is the Given "holder holds key and waiter waits for it":
// Widget holder, created first, is Claimed for key, and Widget waiter,
// naming key too, is parked on it.
func (f *fixture) holdsAndWaits(t *testing.T, holder, key, waiter string) {
	t.Helper()
	f.createAndWait(t, holder, conditions.ReasonClaimed, key)
	f.createAndWait(t, waiter, conditions.ReasonParked, key)
}

func (f *fixture) widget(t *testing.T, name string) (*testcrd.Widget, error) {
	t.Helper()
	w := &testcrd.Widget{}
	err := env.APIReader.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, w)
	return w, err
}

// widgetNow is widget for a step that needs Widget name to exist: t fails
// at once if it cannot be read.
func (f *fixture) widgetNow(t *testing.T, name string) *testcrd.Widget {
	t.Helper()
	w, err := f.widget(t, name)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// claimed returns the Widget's claim condition, or a zero condition.
func (f *fixture) claimed(t *testing.T, name string) metav1.Condition {
	t.Helper()
	w, err := f.widget(t, name)
	if err != nil {
		return metav1.Condition{}
	}
	if c := meta.FindStatusCondition(w.Status.Conditions, string(conditions.Claimed)); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// waitForReason waits until the Widget's claim condition has reason and
// returns it.
func (f *fixture) waitForReason(t *testing.T, name string, reason conditions.Reason, within time.Duration) metav1.Condition {
	t.Helper()
	var c metav1.Condition
	eventually(t, within, func() (bool, string) {
		c = f.claimed(t, name)
		return c.Reason == string(reason), fmt.Sprintf("widget %s: claim condition %+v, want reason %s", name, c, reason)
	})
	return c
}

func (f *fixture) leaseExists(t *testing.T, key string) bool {
	t.Helper()
	name := f.mw.Claimer().Config().NameFunc(key)
	err := env.APIReader.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, &coordinationv1.Lease{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("reading Lease of %q: %v", key, err)
	}
	return err == nil
}

// eventually polls cond every 25 ms until it holds or within passes: the
// wake-up tests measure latencies of a few seconds.
func eventually(t *testing.T, within time.Duration, cond func() (bool, string)) {
	t.Helper()
	envtest.EventuallyEvery(t, within, 25*time.Millisecond, cond)
}

func mustContain(t *testing.T, what, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%s %q does not contain %q", what, s, p)
		}
	}
}

// holdBackPasses holds every pass of the object named name at its first
// read until release is called.
func (f *fixture) holdBackPasses(name string) (release func()) {
	gate := make(chan struct{})
	f.writes.beforeWidgetGet.Store(func(key client.ObjectKey) {
		if key.Name == name {
			<-gate
		}
	})
	return func() {
		f.writes.beforeWidgetGet.Store(func(client.ObjectKey) {})
		close(gate)
	}
}

// deleteSeenStale deletes the object named name while its passes are held
// back, and has the manager's client serve the deleting object with the
// status of then (a cache that has not shown the writes since); the passes
// run once release is called.
func (f *fixture) deleteSeenStale(t *testing.T, name string, then *testcrd.Widget) (release func()) {
	t.Helper()
	release = f.holdBackPasses(name)
	f.deleteWidgetAsync(t, name)
	deleting := f.widgetNow(t, name)
	stale := deleting.DeepCopy()
	stale.Status = then.Status
	f.writes.staleWidget.Store(stale)
	return release
}

// Helpers shared by the envtest tests of the middleware's promises
// (docs/middleware.md "What happens per reconcile" and "What is promised at
// this layer"): several middlewares or replicas in one test, uncached reads
// of records, another replica taking a key over, and a record of which
// objects act for a key at once.

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

// widgetMiddleware is the option list every Widget middleware of this suite
// starts from: Widgets of mgr, claims under cfg through the Lease backend and
// claimOpts, keys from keys, and hour-long requeues, so that a test that
// expects a change sooner proves a wake-up, not a requeue. Options appended
// to it come later and win.
func widgetMiddleware(mgr ctrl.Manager, cfg claim.Config, keys claimmw.KeysFunc, claimOpts ...claim.Option) []claimmw.Option {
	return []claimmw.Option{
		claimmw.FromManager(mgr),
		claimmw.For(&testcrd.Widget{}),
		claimmw.WithClaim(cfg, append([]claim.Option{claim.WithBackend(lease.Backend)}, claimOpts...)...),
		claimmw.WithKeys(keys),
		claimmw.WithRequeue(time.Hour, time.Hour),
	}
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
		opts := append(widgetMiddleware(mgr, claim.Config{Namespace: ns}, keys), claimmw.WithMetrics(false))
		var err error
		f.mw, err = claimmw.Wrap(f.inner, append(opts, m.opts...)...)
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

// lossWithin is how soon a holder must notice that its record is gone or
// names someone else.
const lossWithin = 2 * time.Second

func (f *fixture) setKeys(t *testing.T, name string, keys ...string) {
	t.Helper()
	eventually(t, 5*time.Second, func() (bool, string) {
		w, err := f.widget(t, name)
		if err != nil {
			return false, err.Error()
		}
		w.Spec.Keys = keys
		err = direct(t).Update(context.Background(), w)
		return err == nil, fmt.Sprintf("updating the keys of %s: %v", name, err)
	})
}

func (f *fixture) deleteLease(t *testing.T, key string) {
	t.Helper()
	l := &coordinationv1.Lease{}
	name := f.mw.Claimer().Config().NameFunc(key)
	if err := env.APIReader.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, l); err != nil {
		t.Fatal(err)
	}
	if err := direct(t).Delete(context.Background(), l); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) tokenOf(t *testing.T, key string) claim.Token {
	t.Helper()
	rec, err := f.mw.Claimer().Current(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Token
}

// deleteWidgetAsync deletes Widget name, as read just before, and returns
// what it read; deleteWidget waits until the Widget is gone too.
func (f *fixture) deleteWidgetAsync(t *testing.T, name string) *testcrd.Widget {
	t.Helper()
	w := f.widgetNow(t, name)
	if err := direct(t).Delete(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	return w
}

func (f *fixture) deleteWidget(t *testing.T, name string) {
	t.Helper()
	f.deleteWidgetAsync(t, name)
	f.waitGone(t, name, wakeWithin)
}

// waitGone waits until the API server no longer has Widget name (its
// finalizers removed and its deletion done), polling as eventually does, and
// fails t when within passes first.
func (f *fixture) waitGone(t *testing.T, name string, within time.Duration) {
	t.Helper()
	eventually(t, within, func() (bool, string) {
		_, err := f.widget(t, name)
		return apierrors.IsNotFound(err), fmt.Sprintf("Widget %s still exists: %v", name, err)
	})
}

// firstCall returns the first inner call of name that matches.
func (f *fixture) firstCall(t *testing.T, name string, match func(call) bool) call {
	t.Helper()
	for _, c := range f.inner.callsOf(name) {
		if match(c) {
			return c
		}
	}
	t.Fatalf("no matching inner call of %s", name)
	return call{}
}

// lastCall returns the last inner call of name that matches.
func (f *fixture) lastCall(t *testing.T, name string, match func(call) bool) call {
	t.Helper()
	calls := f.inner.callsOf(name)
	for i := len(calls) - 1; i >= 0; i-- {
		if match(calls[i]) {
			return calls[i]
		}
	}
	t.Fatalf("no matching inner call of %s among %d", name, len(calls))
	return call{}
}

// errNotStopped is what a told pass returns while the workloads it stops
// are still running.
var errNotStopped = errors.New("workloads not stopped yet")

// passesAskToRunAgain makes every pass of name for which when holds return
// no error and ask to run again after every (its reconciler is not done:
// workloads still stopping, data still being dropped) until the returned
// flag is set; every other pass returns a zero Result.
func (f *fixture) passesAskToRunAgain(name string, every time.Duration, when func(claimmw.State) bool) *atomic.Bool {
	done := new(atomic.Bool)
	f.inner.setHook(func(_ context.Context, n string, c call) (reconcile.Result, error) {
		if n == name && when(c.state) && !done.Load() {
			return reconcile.Result{RequeueAfter: every}, nil
		}
		return reconcile.Result{}, nil
	})
	return done
}

// namesKey reports whether grants name key.
func namesKey(grants []claimmw.Grant, key string) bool {
	return slices.ContainsFunc(grants, func(g claimmw.Grant) bool { return g.Key == key })
}

// failPassesOf makes every pass of name for which fails holds fail while
// the returned flag is set.
func (f *fixture) failPassesOf(name string, fails func(claimmw.State) bool) *atomic.Bool {
	var failing atomic.Bool
	failing.Store(true)
	f.inner.setFail(func(n string, c call) error {
		if n == name && fails(c.state) && failing.Load() {
			return errNotStopped
		}
		return nil
	})
	return &failing
}

// failToldPassesOf makes every pass of name that is told to stop (parked, or
// giving keys up, or deleting) fail while the returned flag is set.
func (f *fixture) failToldPassesOf(name string) *atomic.Bool {
	return f.failPassesOf(name, func(s claimmw.State) bool { return !s.Granted || len(s.Releasing) > 0 })
}
