package bench

import (
	"context"
	"fmt"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/internal/testclaimant"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// Environment variables `make bench` sets.
const (
	// envFull runs every scenario at its full size.
	envFull = "BENCH_FULL"
	// envScale overrides the number of holders of the scale scenario.
	envScale = "BENCH_SCALE"
	// envReport names the markdown file the results are written to.
	envReport = "BENCH_REPORT"
	// envMicro names the saved output of the pkg/claim Go benchmarks to
	// include in the report.
	envMicro = "BENCH_MICRO"
	// envCommand is the command that produced the run, for the report.
	envCommand = "BENCH_COMMAND"
)

var env *envtest.Env

func TestMain(m *testing.M) {
	envtest.Main(m, &env, testclaimant.EnvOptions())
}

// sizes are how much each scenario does. The smoke sizes keep every
// scenario compiled and correct in `make test` within a few seconds each.
type sizes struct {
	full       bool
	passes     int // scenarios 1 and 2
	opRuns     int // scenario 3 and baseline (b)
	handovers  int // scenario 4, per series
	listProbes int // scenario 4: consistent reads measured
	requeue    time.Duration
	rounds     int // scenario 5, per claimant count
	contenders []int
	scale      int // scenario 6
	// scaleBudget bounds the time spent creating the scale scenario's
	// holders; the scale reached is what the table states.
	scaleBudget time.Duration
	probes      int // scenario 6: fresh keys acquired per probe, and the sweep's claims
	workers     int
	leKeys      int // baseline (a)
	window      time.Duration
	fanOut      int // scenario 7: objects parked on one key
	bystanders  int // scenario 7: objects on keys of their own
	// fanOutFew and bystandersMany: scenario 7 again, few waiters among
	// many bystanders.
	fanOutFew      int
	bystandersMany int
	// fanOutReleases is how many releases in a row scenario 7 times, the
	// holder of each the successor of the one before.
	fanOutReleases int
	lossRuns       int // scenario 8, per way of losing the key
	// quiet is how long no pass may start before scenario 7 counts the
	// passes of a release as complete.
	quiet time.Duration
}

func sizesFromEnv(t *testing.T) sizes {
	s := sizes{passes: 2, opRuns: 2, handovers: 2, listProbes: 2, requeue: time.Second, rounds: 1, contenders: []int{2},
		scale: 20, scaleBudget: time.Minute, probes: 3, workers: 8, leKeys: 1, window: 3 * time.Second,
		fanOut: 20, bystanders: 5, fanOutFew: 5, bystandersMany: 20, fanOutReleases: 2, lossRuns: 2, quiet: time.Second}
	if os.Getenv(envFull) != "" {
		s = sizes{full: true, passes: 1000, opRuns: 100, handovers: 100, listProbes: 20, requeue: time.Second, rounds: 5,
			contenders: []int{2, 10, 50}, scale: 10000, scaleBudget: 4 * time.Minute, probes: 100, workers: 16, leKeys: 10, window: 20 * time.Second,
			fanOut: 1000, bystanders: 100, fanOutFew: 100, bystandersMany: 10000, fanOutReleases: 5, lossRuns: 50, quiet: 2 * time.Second}
	}
	if v := os.Getenv(envScale); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 20 {
			t.Fatalf("%s=%q: want a number of at least 20", envScale, v)
		}
		s.scale = n
	}
	return s
}

// inner is the operator's own reconciler: it does nothing but note when
// each object was first run with its keys granted, and when and how it was
// run at all (the middleware runs it in every granted pass and, parked, in
// the pass that finds a key lost). A pass told to stop using keys
// (State.Releasing) takes stopTook, as scaling workloads down would, and
// notes when it returned.
type inner struct {
	mu       sync.Mutex
	granted  map[string]time.Time
	runs     map[string][]innerRun
	stopTook time.Duration
	stopped  map[string]time.Time
}

// innerRun is one call of the inner reconciler.
type innerRun struct {
	at      time.Time
	granted bool
	// releasing is true when the pass was told to stop using keys it holds.
	releasing bool
}

func (r *inner) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s, _ := claimmw.StateFrom(ctx)
	now := time.Now()
	r.mu.Lock()
	if r.runs == nil {
		r.granted, r.runs, r.stopped = map[string]time.Time{}, map[string][]innerRun{}, map[string]time.Time{}
	}
	releasing := len(s.Releasing) > 0
	r.runs[req.Name] = append(r.runs[req.Name], innerRun{at: now, granted: s.Granted, releasing: releasing})
	if _, seen := r.granted[req.Name]; s.Granted && !seen {
		r.granted[req.Name] = now
	}
	took := r.stopTook
	r.mu.Unlock()
	if !releasing || took == 0 {
		return reconcile.Result{}, nil
	}
	select {
	case <-time.After(took):
	case <-ctx.Done():
		return reconcile.Result{}, ctx.Err()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped[req.Name] = time.Now()
	return reconcile.Result{}, nil
}

// setStopTook makes every later pass told to stop using keys take d.
func (r *inner) setStopTook(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopTook = d
}

// stoppedAt returns when name's last pass told to stop using keys
// returned success.
func (r *inner) stoppedAt(name string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.stopped[name]
	return at, ok
}

// firstRunAfter returns name's first run of the inner reconciler at or after
// t that match accepts.
func (r *inner) firstRunAfter(name string, t time.Time, match func(innerRun) bool) (innerRun, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, run := range r.runs[name] {
		if !run.at.Before(t) && match(run) {
			return run, true
		}
	}
	return innerRun{}, false
}

// waitRunAfter waits for name's first run of the inner reconciler at or
// after t that match accepts. It polls memory only, so it adds no requests.
func (r *inner) waitRunAfter(tb testing.TB, name string, t time.Time, match func(innerRun) bool, within time.Duration) innerRun {
	tb.Helper()
	var run innerRun
	envtest.EventuallyEvery(tb, within, time.Millisecond, func() (ok bool, _ string) {
		run, ok = r.firstRunAfter(name, t, match)
		return ok, "the inner reconciler did not run as expected for " + name
	})
	return run
}

// anyRun, parkedRun and releasingRun select runs of the inner reconciler.
func anyRun(innerRun) bool         { return true }
func parkedRun(r innerRun) bool    { return !r.granted }
func releasingRun(r innerRun) bool { return r.releasing }

func (r *inner) grantedAt(name string) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.granted[name]
	return at, ok
}

// waitGranted waits until the inner reconciler ran for name with its keys
// granted, and returns when. It polls memory only, so it adds no requests.
func (r *inner) waitGranted(t *testing.T, name string, within time.Duration) time.Time {
	t.Helper()
	var at time.Time
	envtest.EventuallyEvery(t, within, time.Millisecond, func() (ok bool, _ string) {
		at, ok = r.grantedAt(name)
		return ok, name + " was not granted"
	})
	return at
}

// rig is one operator process: a manager whose every request is counted,
// restricted to one namespace that also holds the Leases, with the
// middleware around inner.
type rig struct {
	ns     string
	api    *counter
	calls  *clientCalls
	client client.Client
	reader client.Reader
	mw     *claimmw.Middleware
	inner  *inner
	// passes are the reconciles the controller started (controller rigs
	// only).
	passes *passLog
}

// passLog notes when the controller started each reconcile, by object name.
// SetupWithManager completes the builder with the middleware itself, so no
// wrapper can stand between the controller and it; the controller builds
// the logger of every Reconcile call with the builder's LogConstructor,
// exactly once per call (and with a nil request for its own lines), so that
// is where every pass, parked ones included, is seen without changing what
// runs.
type passLog struct {
	mu     sync.Mutex
	starts map[string][]time.Time
	last   time.Time
}

// logConstructor returns the LogConstructor that notes each pass and logs
// as the manager's logger does.
func (p *passLog) logConstructor(base logr.Logger) func(*reconcile.Request) logr.Logger {
	return func(req *reconcile.Request) logr.Logger {
		if req == nil {
			return base
		}
		now := time.Now()
		p.mu.Lock()
		if p.starts == nil {
			p.starts = map[string][]time.Time{}
		}
		p.starts[req.Name] = append(p.starts[req.Name], now)
		p.last = now
		p.mu.Unlock()
		return base.WithValues("namespace", req.Namespace, "name", req.Name)
	}
}

// since returns how many passes of each object started at or after t.
func (p *passLog) since(t time.Time) map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for name, starts := range p.starts {
		for _, at := range starts {
			if !at.Before(t) {
				out[name]++
			}
		}
	}
	return out
}

// between returns the starts of name's passes in [from, to].
func (p *passLog) between(name string, from, to time.Time) []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []time.Time
	for _, at := range p.starts[name] {
		if !at.Before(from) && !at.After(to) {
			out = append(out, at)
		}
	}
	return out
}

// waitQuiet waits until no pass started for quiet and returns when the last
// one started.
func (p *passLog) waitQuiet(tb testing.TB, quiet, within time.Duration) time.Time {
	tb.Helper()
	var last time.Time
	envtest.EventuallyEvery(tb, within, quiet/10, func() (bool, string) {
		p.mu.Lock()
		last = p.last
		p.mu.Unlock()
		since := time.Since(last)
		return since >= quiet, fmt.Sprintf("passes still started (last %s ago)", since)
	})
	return last
}

type rigOptions struct {
	// controller runs the middleware in a controller; otherwise the
	// benchmark calls Reconcile itself.
	controller bool
	// wake watches the Leases with the middleware's ClaimEvents handler.
	wake bool
	// parkedRequeue is the parked objects' requeue (default: an hour, so
	// that only a wake-up can explain a quick handover).
	parkedRequeue time.Duration
	metrics       bool
	// tenants are namespaces the manager caches beside the rig's own (which
	// holds the records), with its Lease cache not restricted to the claim
	// namespace: objects there are reconciled too.
	tenants []string
	// workers is the controller's MaxConcurrentReconciles; default 1, the
	// controller-runtime default.
	workers int
	// unlimited turns the client's rate limiter off (QPS -1), as
	// controller-runtime's config loader does by default; otherwise the
	// envtest config's QPS 1000 applies.
	unlimited bool
	// maxKeys is claimmw.WithMaxKeys; 0 keeps the middleware's default.
	maxKeys int
	// disclosure is claimmw.WithDisclosure; the zero value is the
	// middleware's default.
	disclosure claimmw.Disclosure
}

func newRig(t *testing.T, ns string, o rigOptions) *rig {
	t.Helper()
	r := &rig{ns: ns, api: &counter{}, calls: &clientCalls{}, inner: &inner{}, passes: &passLog{}}
	cfg := r.api.wrap(env.Config)
	if o.unlimited {
		cfg.QPS, cfg.Burst = -1, 0
	}
	mopts := env.ManagerOptions(append([]string{ns}, o.tenants...)...)
	mopts.NewClient = envtest.WrapClient(r.calls.wrapClient)
	mgr, err := ctrl.NewManager(cfg, mopts)
	if err != nil {
		t.Fatal(err)
	}
	r.client, r.reader = mgr.GetClient(), mgr.GetAPIReader()
	requeue := o.parkedRequeue
	if requeue == 0 {
		requeue = time.Hour
	}
	r.mw, err = claimmw.Wrap(r.inner,
		claimmw.FromManager(mgr),
		claimmw.For(&testclaimant.Claimant{}),
		claimmw.WithClaim(claim.Config{Namespace: ns}, claim.WithBackend(lease.Backend)),
		claimmw.WithKeys(specKeys),
		claimmw.WithRequeue(requeue, time.Hour),
		claimmw.WithMetrics(o.metrics),
		claimmw.WithMaxKeys(o.maxKeys),
		claimmw.WithDisclosure(o.disclosure),
	)
	if err != nil {
		t.Fatal(err)
	}
	if o.controller {
		b := ctrl.NewControllerManagedBy(mgr).For(&testclaimant.Claimant{}).
			WithOptions(controller.Options{MaxConcurrentReconciles: max(o.workers, 1)}).
			WithLogConstructor(r.passes.logConstructor(mgr.GetLogger().WithName("claimant")))
		var err error
		if o.wake {
			err = r.mw.SetupWithManager(mgr, b)
		} else {
			err = b.Complete(r.mw)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	envtest.RunManager(t, mgr)
	if !mgr.GetCache().WaitForCacheSync(context.Background()) {
		t.Fatal("manager cache did not sync")
	}
	return r
}

func specKeys(_ context.Context, obj client.Object) ([]string, error) {
	return obj.(*testclaimant.Claimant).Spec.Keys, nil
}

// reconcileOnce runs one pass of the middleware for name.
func (r *rig) reconcileOnce(ctx context.Context, name string) (reconcile.Result, error) {
	return r.mw.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: r.ns, Name: name}})
}

// settle reconciles name until a pass writes nothing and its condition has
// reason, so that the measured passes start from a steady state (the
// cache has seen the middleware's own writes).
func (r *rig) settle(t *testing.T, name string, reason conditions.Reason) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < 200; i++ {
		before := r.api.snapshot()
		_, err := r.reconcileOnce(ctx, name)
		if err == nil && r.api.since(before).writes() == 0 && conditionReason(t, r.ns, name) == string(reason) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s did not settle with reason %s (has %q)", name, reason, conditionReason(t, r.ns, name))
}

// conditionReason reads name's claim condition reason, uncached.
func conditionReason(t *testing.T, ns, name string) string {
	t.Helper()
	c := &testclaimant.Claimant{}
	if err := env.APIReader.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
		return ""
	}
	if cond := meta.FindStatusCondition(c.Status.Conditions, string(conditions.Claimed)); cond != nil {
		return cond.Reason
	}
	return ""
}

func newClaimant(ns, name string, keys ...string) *testclaimant.Claimant {
	return &testclaimant.Claimant{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: testclaimant.ClaimantSpec{Keys: keys}}
}

func newConfigMap(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// parallel runs do(0..n-1) on a bounded pool of workers and returns the
// first error.
func parallel(n, workers int, do func(i int) error) error {
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || first.Load() != nil {
					return
				}
				if err := do(i); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return nil
}

// latencies collects durations and reports percentiles.
type latencies []time.Duration

// pct is the nearest-rank percentile p (0-100).
func (l latencies) pct(p int) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[max(i-1, 0)]
}

func (l latencies) String() string {
	return fmt.Sprintf("p50 %s, p99 %s (n=%d)", ms(l.pct(50)), ms(l.pct(99)), len(l))
}

func ms(d time.Duration) string {
	switch {
	case d >= 2*time.Minute:
		return fmt.Sprintf("%.2f min", d.Minutes())
	case d >= 10*time.Second:
		return fmt.Sprintf("%.1f s", d.Seconds())
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	}
}

// heapInUse is the live heap after two collections.
func heapInUse() uint64 {
	var m goruntime.MemStats
	goruntime.GC()
	goruntime.GC()
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc
}
