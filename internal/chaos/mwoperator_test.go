package chaos_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/internal/chaos"
	"github.com/ocf-claim/claim/internal/testclaimant"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
	"github.com/ocf-claim/claim/pkg/expiry"
	"github.com/ocf-claim/claim/pkg/finalizer"
)

// mwFeatures are the parts of the real world a seed turns on, each drawn
// from the seed: the checker's profiles.
type mwFeatures struct {
	// innerFails: the inner pass fails 30% of the time, not 5%.
	innerFails bool
	// statusFails: 15% of the status writes fail before they apply.
	statusFails bool
	// lag: the informers deliver every event 0–150 ms late.
	lag bool
	// renewal: WithRenewal and expiry liveness on a fake clock that
	// advances 1 s every 50 ms while the world acts (lease 10 s).
	renewal bool
	// fairness: WithFairness.
	fairness bool
	// labels: records carry Config.Labels and the Lease cache is restricted
	// to them; some objects start with records written before the labels.
	labels bool
	// setless: some objects start with records written before claim sets.
	setless bool
	// handover: the world asks holders to hand a key to a named object,
	// behind a gate that opens once the old holder's workload stopped.
	handover bool
	// second: a second middleware reconciles the kind in the same manager
	// (its own name, condition and finalizer; it names no keys), so the
	// first keeps records without a claim set, which might be the second's.
	second bool
	// restarts: the operator crashes before and after writes, between a
	// claim write and the status write, in the middle of told passes, and
	// is rolled (sometimes two processes overlap for a moment).
	restarts bool
	// shards: two operator processes run at once for the whole run, each
	// working the objects of its shard (shardOf), as a label-sharded
	// operator does: its cache of the kind holds only the objects labelled
	// for its shard (shardLabel), while its queue receives every request,
	// among them those every event of a record makes for the holder it
	// names, of either shard, whose passes find nothing in that cache. The
	// slow shard's informer of the kind lags (slowCacheLag), and so does
	// the fast shard's informer of Leases (fastLeaseLag).
	shards bool
	// sharedCache (with shards): each process caches every object of the
	// kind instead, and its queue drops every request for an object of the
	// other shard (shardQueue): an operator sharded by a filter on its
	// queue. Drawn from a stream of its own for one shards seed in three,
	// so that the other profiles of every seed are as before.
	sharedCache bool
	// partialCache (with shards, caches not shared): each process sets
	// claimmw.WithPartialCache, as docs/middleware.md asks of a
	// label-sharded operator. On whenever the operator restarts (without it
	// the one-actor promise does not hold across a restart of a waiter's
	// shard), and for odd seeds without restarts: even ones run without it,
	// a process's memory of the holders its records named the only thing
	// that finds another shard's holder (mutant UnseenHolderForgotten), and
	// eraseUnseen restarts no process.
	partialCache bool
	// relabel: every other operator process (by start order: each rolling
	// update is an upgrade or a rollback, and the two shards differ) labels
	// records by holder name instead of by UID, so releases that label
	// records differently write the same records.
	relabel bool
	// mixedCase: every Claimer of the seed normalizes keys by lower-casing
	// them (Config.Normalize), and the world spells each key it writes in a
	// spec in a case of its own (mwWorld.spelled), so that one key is named
	// in several spellings, by one object from edit to edit, by two objects
	// at once, and now and then twice in one spec.
	mixedCase bool
}

// featuresOf draws the profiles of seed; the first three seeds, those of
// make test, share every profile out between them.
func featuresOf(seed uint64) mwFeatures {
	switch seed {
	case 1:
		return mwFeatures{innerFails: true, statusFails: true, handover: true, restarts: true, mixedCase: true}
	case 2:
		return mwFeatures{lag: true, renewal: true, labels: true}
	case 3:
		return mwFeatures{setless: true, fairness: true, second: true, restarts: true}
	}
	rng := rand.New(rand.NewPCG(seed, 0xfea7))
	p := func(x float64) bool { return rng.Float64() < x }
	f := mwFeatures{innerFails: p(0.3), statusFails: p(0.3), lag: p(0.4), renewal: p(0.3), fairness: p(0.3),
		labels: p(0.3), setless: p(0.25), handover: p(0.3), second: p(0.2), restarts: p(0.6), shards: p(0.3), relabel: p(0.3),
		mixedCase: p(0.5)}
	f.sharedCache = f.shards && rand.New(rand.NewPCG(seed, 0x5ca)).IntN(3) == 0
	f.partialCache = f.shards && !f.sharedCache && (f.restarts || seed%2 == 1)
	return f
}

// lowerKey is the key normalizer of the mixed-case profile: "Store-1" and
// "store-1" name one backend.
func lowerKey(key string) (string, error) { return strings.ToLower(key), nil }

// normalizer is the Config.Normalize of every Claimer of a seed with f:
// lowerKey with mixed-case, the default (keys as given) otherwise.
func (f mwFeatures) normalizer() func(string) (string, error) {
	if f.mixedCase {
		return lowerKey
	}
	return nil
}

// normalize is the normalizer as the checker applies it, to compare the
// keys specs name with each other and with the keys of records.
func (f mwFeatures) normalize() func(string) string {
	if f.mixedCase {
		return strings.ToLower
	}
	return verbatim
}

func (f mwFeatures) String() string {
	var on []string
	for _, x := range []struct {
		on   bool
		name string
	}{{f.innerFails, "inner-fails"}, {f.statusFails, "status-fails"}, {f.lag, "lag"}, {f.renewal, "renewal"}, {f.fairness, "fairness"},
		{f.labels, "labels"}, {f.setless, "setless"}, {f.handover, "handover"}, {f.second, "second-middleware"}, {f.restarts, "restarts"},
		{f.shards, "shards"}, {f.shards && f.sharedCache, "shared-cache"}, {f.partialCache, "partial-cache"}, {f.relabel, "relabel"}, {f.mixedCase, "mixed-case"}} {
		if x.on {
			on = append(on, x.name)
		}
	}
	if len(on) == 0 {
		return "plain"
	}
	return strings.Join(on, "+")
}

// recordLabels are the labels of the labels profile.
var recordLabels = map[string]string{"chaos.ocf.dev/records": "yes"}

// byHolderName is the HolderLabels of the relabel profile's other release.
func byHolderName(h claim.Holder) map[string]string {
	return map[string]string{"chaos.ocf.dev/holder-name": h.Name}
}

// The second middleware's condition type and finalizer.
const (
	secondCondition = conditions.Type("SecondClaimed")
	secondFinalizer = finalizer.Name("chaos.ocf.dev/second")
)

// handoverAnnotation names, on a holder, the object the world asks it to
// hand its keys to.
const handoverAnnotation = "chaos.ocf.dev/handover-to"

// Timings of the renewal profile, in fake time.
const (
	leaseDuration = 10 * time.Second
	renewEvery    = 2 * time.Second
	renewDeadline = 6 * time.Second
)

// operator is one operator process: a manager with its caches, the
// middleware and its renewals.
type operator struct {
	id int
	// shard is the shard whose objects it works, allShards for every
	// object.
	shard  int
	mw     *claimmw.Middleware
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
	// ending is set once the process was told to end (a crash, or the
	// end of a roll): it still runs until done, but no roll may pick it
	// as the process to replace, or two processes would run on.
	ending atomic.Bool
	fleet  *fleet
	scheds []*chaos.Schedule
	// synced waits until the process's caches of its kind and of records
	// synced: from then on its middleware resumes the renewals of what its
	// objects hold.
	synced func()
}

// The shards of the shards profile: each object belongs to one (shardOf),
// and one process of each shard runs at a time, apart from the overlaps of
// its rolls. allShards is the shard of a process that works every object.
const (
	allShards = -1
	// fastShard's process sees the objects of the kind at once; slowShard's
	// sees them slowShardLag late.
	fastShard, slowShard = 0, 1
)

// shardOf is the shard of the object named name (claimant-N: N's parity;
// fastShard for a name that ends in no number).
func shardOf(name string) int {
	n, err := strconv.Atoi(name[strings.LastIndexByte(name, '-')+1:])
	if err != nil {
		return fastShard
	}
	return n % 2
}

// shardLabel is the label the world gives every object it creates, whose
// value is its shard (shardOf); the process of a shard caches only the
// objects whose label is its own, unless the cache is shared.
const shardLabel = "chaos.ocf.dev/shard"

// shardLabels are the labels of the object named name.
func shardLabels(name string) map[string]string {
	return map[string]string{shardLabel: strconv.Itoa(shardOf(name))}
}

// The lags of the shards profile's slow informers, each event late by a
// time drawn between the bounds, in order. slowCacheLag, of slowShard's
// informer of the kind, is beyond the half second a granted pass waits for
// its manager's cache to show its own Claimed write (claimmw's
// cacheShowsWait, and its sleeps between reads): that cache is never
// shown fresh, and the check before acting reads every object naming the
// key. fastLeaseLag, of fastShard's informer of Leases, is long enough that
// its process does not see, before an object of slowShard that took a key
// from one of its own acts, that the key was taken.
var (
	slowCacheLag = [2]time.Duration{1900 * time.Millisecond, 1950 * time.Millisecond}
	fastLeaseLag = [2]time.Duration{1400 * time.Millisecond, 1450 * time.Millisecond}
)

// shardQueue is the workqueue of a process of one shard with the
// sharedCache profile: it drops every request for an object of another
// shard, as a sharded operator whose processes all cache every object
// works only its own. The controller's own queue (controller-runtime's
// priority queue) does the rest. A label-sharded operator has no such
// queue: its queue receives every request, and its cache shows only its
// shard's objects.
type shardQueue struct {
	priorityqueue.PriorityQueue[reconcile.Request]
	shard int
}

func (q shardQueue) ours(items []reconcile.Request) []reconcile.Request {
	return slices.DeleteFunc(slices.Clone(items), func(r reconcile.Request) bool { return shardOf(r.Name) != q.shard })
}

func (q shardQueue) Add(item reconcile.Request) {
	if shardOf(item.Name) == q.shard {
		q.PriorityQueue.Add(item)
	}
}

func (q shardQueue) AddAfter(item reconcile.Request, d time.Duration) {
	if shardOf(item.Name) == q.shard {
		q.PriorityQueue.AddAfter(item, d)
	}
}

func (q shardQueue) AddRateLimited(item reconcile.Request) {
	if shardOf(item.Name) == q.shard {
		q.PriorityQueue.AddRateLimited(item)
	}
}

func (q shardQueue) AddWithOpts(o priorityqueue.AddOpts, items ...reconcile.Request) {
	if ours := q.ours(items); len(ours) > 0 {
		q.PriorityQueue.AddWithOpts(o, ours...)
	}
}

// controllerOptions are the options of op's controllers: the queue of its
// shard, when it works one and caches every object.
func (op *operator) controllerOptions(o controller.Options) controller.Options {
	if op.shard == allShards || !op.fleet.f.sharedCache {
		return o
	}
	o.NewQueue = func(name string, rl workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
		return shardQueue{shard: op.shard, PriorityQueue: priorityqueue.New(name, func(o *priorityqueue.Opts[reconcile.Request]) {
			o.Log = quiet
			o.RateLimiter = rl
		})}
	}
	return o
}

// lags returns, for each kind process id of shard informs itself of, the
// lag of each event its informer delivers (nil: at once); nil when no
// informer lags.
func (fl *fleet) lags(id, shard int) func(runtime.Object) func() time.Duration {
	if !fl.f.lag && !fl.f.shards {
		return nil
	}
	rng := rand.New(rand.NewPCG(fl.seed, 0x1a6^uint64(id)))
	var mu sync.Mutex
	draw := func(f func() time.Duration) func() time.Duration {
		return func() time.Duration {
			mu.Lock()
			defer mu.Unlock()
			return f()
		}
	}
	between := func(b [2]time.Duration) func() time.Duration {
		return draw(func() time.Duration { return b[0] + time.Duration(rng.Int64N(int64(b[1]-b[0]))) })
	}
	return func(obj runtime.Object) func() time.Duration {
		_, isLease := obj.(*coordinationv1.Lease)
		switch {
		case fl.f.shards && shard == fastShard && isLease:
			return between(fastLeaseLag)
		case fl.f.shards && shard == slowShard && !isLease:
			return between(slowCacheLag)
		case fl.f.lag:
			return draw(func() time.Duration { return time.Duration(rng.IntN(150)) * time.Millisecond })
		}
		return nil
	}
}

// crash ends the process at once, as a kill would: its passes see their
// context cancelled wherever they are; a new process replaces it.
func (op *operator) crash() {
	if !op.ending.CompareAndSwap(false, true) {
		// Already ending (crashed, or being rolled): whoever ended it
		// starts its replacement.
		op.cancel()
		return
	}
	op.once.Do(func() {
		op.cancel()
		op.fleet.replace(op)
	})
}

// fleet runs the operator processes of one seed, one at a time (one per
// shard with shards) except for the brief overlaps of a rolling update.
type fleet struct {
	t     *testing.T
	r     mwRun
	seed  uint64
	ns    string
	f     mwFeatures
	a     *actor
	stats *chaos.Stats
	clock *clocktesting.FakeClock
	gate  claim.HandoverGate

	mu       sync.Mutex
	ctx      context.Context //nolint:containedctx // the seed's lifetime, which every process of the seed shares
	live     map[*operator]bool
	next     int
	calm     bool
	stopped  bool
	pending  int // replacements under way
	restarts int
	overlaps []period
	// lives are the processes' lifetimes, for a failing seed's timeline.
	lives []life
	// afterClaimWrite counts the crashes between a claim write and the
	// status write.
	afterClaimWrite int
	// refusal is the fault of the last move (writesWhileReleasesFail).
	refusal releasesRefused
}

// start builds and starts one operator process, working shard.
func (fl *fleet) start(shard int) (*operator, error) {
	fl.mu.Lock()
	fl.next++
	id := fl.next
	calm := fl.calm
	fl.mu.Unlock()
	op := &operator{id: id, shard: shard, done: make(chan struct{}), fleet: fl}
	profile := fl.r.profile
	if fl.f.restarts {
		profile.CrashBefore, profile.CrashAfter = 0.002, 0.002
	}
	stats := fl.stats
	writes := chaos.NewSchedule(fl.seed^uint64(id)<<20, profile, stats, op.crash)
	reads := chaos.NewSchedule(fl.seed^0x5bd1e995^uint64(id)<<20, profile, stats, op.crash)
	statusFail := 0.0
	if fl.f.statusFails {
		statusFail = 0.15
	}
	status := rand.New(rand.NewPCG(fl.seed, uint64(id)))
	var statusMu sync.Mutex
	op.scheds = []*chaos.Schedule{writes, reads}
	if calm {
		writes.SetEnabled(false)
		reads.SetEnabled(false)
	}
	mopts := env.ManagerOptions(fl.ns)
	mopts.Cache.ByObject = map[client.Object]cache.ByObject{}
	if fl.f.labels {
		mopts.Cache.ByObject[&coordinationv1.Lease{}] = lease.CacheByObject(fl.ns, recordLabels)
	}
	if shard != allShards && !fl.f.sharedCache {
		// A label-sharded operator: its cache of the kind holds its
		// shard's objects only.
		mopts.Cache.ByObject[&testclaimant.Claimant{}] = cache.ByObject{Label: labels.SelectorFromSet(labels.Set{shardLabel: strconv.Itoa(shard)})}
	}
	if lagOf := fl.lags(id, shard); lagOf != nil {
		mopts.Cache.NewInformer = func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
			if lag := lagOf(obj); lag != nil {
				lw = laggingLW{inner: lw, lag: lag}
			}
			return toolscache.NewSharedIndexInformer(lw, obj, resync, idx)
		}
	}
	// Injected faults make the controller and the event recorder log an
	// error per failed call; the checker, not the log, judges the run.
	mopts.Logger = quiet
	mopts.NewClient = envtest.WrapClient(func(c client.WithWatch) client.WithWatch {
		if fl.r.readsOwnWrites {
			c = readsOwnWrites(c)
		}
		return faultyWrites(c, writes, fl.a.deleting, func(obj client.Object) bool {
			if fl.a.refusesStatusOf(obj) {
				return true
			}
			statusMu.Lock()
			defer statusMu.Unlock()
			return status.Float64() < statusFail && !fl.quiet()
		}, func(obj client.Object) {
			if _, isLease := obj.(*coordinationv1.Lease); !isLease || !fl.f.restarts || fl.quiet() {
				return
			}
			statusMu.Lock()
			crash := status.Float64() < 0.03
			statusMu.Unlock()
			if crash {
				fl.mu.Lock()
				fl.afterClaimWrite++
				fl.mu.Unlock()
				op.crash()
			}
		}, &fl.refusal)
	})
	mgr, err := ctrl.NewManager(rest.CopyConfig(env.Config), mopts)
	if err != nil {
		return nil, err
	}
	rawReader, err := env.NewClient()
	if err != nil {
		return nil, err
	}
	apiReader := chaos.Wrap(rawReader, reads)
	cfg := claim.Config{Namespace: fl.ns, Normalize: fl.f.normalizer()}
	if fl.f.labels {
		cfg.Labels = recordLabels
	}
	if fl.f.relabel && id%2 == 0 {
		cfg.HolderLabels = byHolderName
	}
	backend := lease.Backend
	if fl.r.backend != nil {
		backend = func(rd client.Reader, wr client.Client, cfg backends.Config) (backends.Backend, error) {
			b, err := lease.Backend(rd, wr, cfg)
			if err != nil {
				return nil, err
			}
			return leaseRecords{fl.r.backend(b)}, nil
		}
	}
	claimOpts := []claim.Option{claim.WithBackend(backend)}
	switch {
	case fl.r.liveness != nil:
		claimOpts = append(claimOpts, claim.WithLiveness(fl.r.liveness))
	case fl.f.renewal:
		// A fresh process has seen no renewal yet: it waits a whole
		// lease before it judges anyone expired. A holder whose object
		// is gone is gone whatever the clock says.
		exp, err := expiry.New(leaseDuration, fl.clock)
		if err != nil {
			return nil, err
		}
		exists := claim.HolderExists(apiReader)
		claimOpts = append(claimOpts, claim.WithClock(fl.clock), claim.WithLiveness(claim.LivenessFunc(func(ctx context.Context, rec claim.Record) (bool, error) {
			if alive, err := exp.Alive(ctx, rec); err != nil || !alive {
				return alive, err
			}
			return exists.Alive(ctx, rec)
		})))
	}
	if fl.gate != nil {
		claimOpts = append(claimOpts, claim.WithHandoverGate(fl.gate))
	}
	opts := []claimmw.Option{
		claimmw.FromManager(mgr),
		claimmw.WithAPIReader(apiReader),
		claimmw.For(&testclaimant.Claimant{}),
		claimmw.WithClaim(cfg, claimOpts...),
		claimmw.WithKeys(claimantKeys),
		// Long intervals: a parked object moves only when it is woken.
		claimmw.WithRequeue(time.Hour, time.Hour),
		claimmw.WithMetrics(false),
	}
	if fl.r.ignoreGranted || fl.seed%2 == 0 {
		// Even seeds run the inner reconciler in every parked pass too,
		// with State.Granted false: it must not act there.
		opts = append(opts, claimmw.WhileParked(claimmw.RunInnerWhileParked))
	}
	if fl.f.fairness {
		opts = append(opts, claimmw.WithFairness())
	}
	if fl.f.renewal {
		opts = append(opts, claimmw.WithRenewal(expiry.KeeperConfig{Duration: leaseDuration, RenewEvery: renewEvery, RenewDeadline: renewDeadline, Clock: fl.clock}))
	}
	if fl.f.handover {
		opts = append(opts, claimmw.WithHandover(handoverTo))
	}
	if shard != allShards && fl.f.partialCache {
		// What docs/middleware.md asks of a label-sharded operator.
		opts = append(opts, claimmw.WithPartialCache(fl.ns))
	}
	mw, err := claimmw.Wrap(fl.a, opts...)
	if err != nil {
		return nil, err
	}
	op.mw = mw
	b := ctrl.NewControllerManagedBy(mgr).
		For(&testclaimant.Claimant{}).
		WithOptions(op.controllerOptions(controller.Options{MaxConcurrentReconciles: 2})).
		WithLogConstructor(fl.a.passBegins(op))
	if fl.r.wakeOnlyWaiters {
		// The predicate silences the middleware's own watch of records;
		// a raw source, which predicates do not reach, delivers them to
		// waiters only.
		b = b.WithEventFilter(predicate.NewPredicateFuncs(func(o client.Object) bool {
			_, isLease := o.(*coordinationv1.Lease)
			return !isLease
		})).WatchesRawSource(source.Kind[client.Object](mgr.GetCache(), &coordinationv1.Lease{}, waitersOnly{inner: mw.ClaimEvents(), reader: mgr.GetClient()}))
	}
	if err := mw.SetupWithManager(mgr, b); err != nil {
		return nil, err
	}
	if fl.f.second {
		second, err := claimmw.Wrap(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }),
			claimmw.FromManager(mgr), claimmw.WithAPIReader(apiReader), claimmw.For(&testclaimant.Claimant{}), claimmw.WithName("second"),
			claimmw.WithConditionType(secondCondition), claimmw.WithFinalizer(secondFinalizer),
			claimmw.WithClaim(claim.Config{Namespace: fl.ns}, claim.WithBackend(lease.Backend)),
			claimmw.WithKeys(func(context.Context, client.Object) ([]string, error) { return nil, nil }), claimmw.WithMetrics(false))
		if err != nil {
			return nil, err
		}
		if err := second.SetupWithManager(mgr, ctrl.NewControllerManagedBy(mgr).For(&testclaimant.Claimant{}).
			WithOptions(op.controllerOptions(controller.Options{})).WithLogConstructor(fl.a.passBegins(nil))); err != nil {
			return nil, err
		}
	}
	fl.a.mu.Lock()
	fl.a.readers[op] = mgr.GetClient()
	fl.a.mu.Unlock()
	ctx, cancel := context.WithCancel(fl.ctx)
	op.synced = func() {
		// The informers a middleware starts from (its kind's and the
		// records'), each synced: a Lease informer created only when the
		// controller starts is not among those WaitForCacheSync waits for.
		// The process's own context: one that ends before its caches
		// synced is waited for no longer (its replacement is).
		for _, obj := range []client.Object{&testclaimant.Claimant{}, &coordinationv1.Lease{}} {
			if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
				return
			}
		}
		mgr.GetCache().WaitForCacheSync(ctx)
	}
	op.cancel = cancel
	fl.mu.Lock()
	fl.live[op] = true
	fl.mu.Unlock()
	fl.mu.Lock()
	fl.lives = append(fl.lives, life{id: id, shard: shard, from: time.Now()})
	n := len(fl.lives) - 1
	fl.mu.Unlock()
	go func() {
		defer close(op.done)
		if err := mgr.Start(ctx); err != nil && fl.ctx.Err() == nil {
			fl.t.Errorf("seed %d: operator %d: %v", fl.seed, id, err)
		}
		fl.mu.Lock()
		fl.lives[n].to = time.Now()
		fl.mu.Unlock()
	}()
	return op, nil
}

// calmWhile runs f with the operators' faults and crashes held off, as
// settle turns them off, and turns them on again after it.
func (fl *fleet) calmWhile(f func()) {
	restore := fl.a.holdCrashes()
	fl.setCalm(true)
	defer func() {
		fl.setCalm(false)
		restore()
	}()
	f()
}

// setCalm turns the operators' faults off (calm) or on again: the
// processes started from now on start so, and the live ones follow.
func (fl *fleet) setCalm(calm bool) {
	fl.mu.Lock()
	fl.calm = calm
	var ops []*operator
	for op := range fl.live {
		ops = append(ops, op)
	}
	fl.mu.Unlock()
	for _, op := range ops {
		for _, s := range op.scheds {
			s.SetEnabled(!calm)
		}
	}
}

// quiet reports whether the faults stopped.
func (fl *fleet) quiet() bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.calm
}

// replace starts a process in place of op once op has stopped.
func (fl *fleet) replace(op *operator) {
	fl.mu.Lock()
	fl.pending++
	fl.mu.Unlock()
	go func() {
		defer func() {
			fl.mu.Lock()
			fl.pending--
			fl.mu.Unlock()
		}()
		<-op.done
		fl.mu.Lock()
		delete(fl.live, op)
		fl.restarts++
		stopped := fl.stopped
		fl.mu.Unlock()
		if stopped || fl.ctx.Err() != nil {
			return
		}
		next, err := fl.start(op.shard)
		if err != nil {
			fl.t.Errorf("seed %d: restarting the operator: %v", fl.seed, err)
			return
		}
		next.synced()
		time.Sleep(resumeGrace)
	}()
}

// clockTick is how often the renewal profile's clock moves (by ten times
// as much). A tick taken more than two periods after the one before does
// not move it, as a slow API server does not: the test process, in which
// every operator process runs, was starved of CPU, and its renewals were
// late too.
const clockTick = 50 * time.Millisecond

// apiStall is how long a read of the API server may take before the
// renewal profile's clock stands still: on that clock a lease is one second
// of real time and a holder has 400 ms between its renew deadline and its
// lease's end to be told and stop, which a loaded machine (a slow API
// server, a starved process) can take on its own. Time-based claims promise
// nothing about an operator whose round trips take a good part of a lease
// (docs/middleware.md, Time-based claims); stalls of that kind made
// takeovers by expiry while the told pass was still on its way, under a load
// of 8 to 17 on 2 cores, in two seeds in a day.
const apiStall = 50 * time.Millisecond

// apiStalled reports whether a read of the seed's namespace took longer
// than apiStall, or failed.
func apiStalled(ctx context.Context, c client.Client, ns string) bool {
	start := time.Now()
	err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
	return err != nil || time.Since(start) > apiStall
}

// resumeGrace is how long after its caches synced a new process is still
// counted as starting: the time its middleware's start lists what its
// objects hold and renews it (docs/middleware.md, Time-based claims, asks
// that this stays well inside the lease duration; on the renewal profile's
// clock the lease is one second of real time, which a loaded machine's
// start alone can take).
const resumeGrace = 250 * time.Millisecond

// down reports whether a shard's process is being replaced (between its
// end and resumeGrace after its replacement's caches synced). The renewal
// profile's clock stands still then: a process that is down renews
// nothing, and time-based claims promise nothing about an operator that
// is down longer than a lease while another process judges its holders
// (docs/middleware.md, Time-based claims).
func (fl *fleet) down() bool {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.pending > 0
}

// waitReplacements waits until no replacement is under way.
func (fl *fleet) waitReplacements() {
	for {
		fl.mu.Lock()
		n := fl.pending
		fl.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// roll replaces a running process, as a rolling update does; with overlap
// the new one starts first and both run for a moment.
func (fl *fleet) roll(overlap time.Duration) {
	fl.mu.Lock()
	var old *operator
	for op := range fl.live {
		// A process that is already ending is being replaced: rolling it
		// too would start a second replacement beside the first.
		if op.ending.CompareAndSwap(false, true) {
			old = op
			break
		}
	}
	fl.mu.Unlock()
	if old == nil {
		return
	}
	if overlap == 0 {
		old.once.Do(func() {
			old.cancel()
			fl.replace(old)
		})
		return
	}
	from := time.Now()
	fl.mu.Lock()
	fl.pending++
	fl.mu.Unlock()
	next, err := fl.start(old.shard)
	if err != nil {
		fl.mu.Lock()
		fl.pending--
		fl.mu.Unlock()
		fl.t.Errorf("seed %d: starting an overlapping operator: %v", fl.seed, err)
		return
	}
	go func() {
		defer func() {
			fl.mu.Lock()
			fl.pending--
			fl.mu.Unlock()
		}()
		next.synced()
		time.Sleep(resumeGrace)
	}()
	time.Sleep(overlap)
	old.once.Do(func() { old.cancel() })
	<-old.done
	fl.mu.Lock()
	delete(fl.live, old)
	fl.restarts++
	fl.overlaps = append(fl.overlaps, period{from: from, to: time.Now()})
	fl.mu.Unlock()
}

// restartAround stops the process working shard, calls between while no
// process of that shard runs, then starts its replacement and waits until
// its caches synced: a restart in which something happens that the new
// process never sees as an event. Without a process of shard to stop (one
// is being replaced already), between is called all the same, and it
// reports false.
func (fl *fleet) restartAround(shard int, between func()) bool {
	fl.mu.Lock()
	var old *operator
	for op := range fl.live {
		if op.shard == shard && op.ending.CompareAndSwap(false, true) {
			old = op
			break
		}
	}
	if old != nil {
		fl.pending++
	}
	fl.mu.Unlock()
	if old == nil {
		between()
		return false
	}
	defer func() {
		fl.mu.Lock()
		fl.pending--
		fl.mu.Unlock()
	}()
	old.once.Do(func() { old.cancel() })
	<-old.done
	fl.mu.Lock()
	delete(fl.live, old)
	fl.restarts++
	fl.mu.Unlock()
	between()
	next, err := fl.start(shard)
	if err != nil {
		fl.t.Errorf("seed %d: restarting the operator of shard %d: %v", fl.seed, shard, err)
		return false
	}
	next.synced()
	time.Sleep(resumeGrace)
	return true
}

// settle turns every fault off, waits for pending restarts, and leaves one
// process running (one per shard).
func (fl *fleet) settle() {
	fl.setCalm(true)
	fl.a.calm()
	fl.waitReplacements()
	fl.mu.Lock()
	for op := range fl.live {
		for _, s := range op.scheds {
			s.SetEnabled(false)
		}
	}
	fl.mu.Unlock()
}

// stopAll stops every process and waits for them.
func (fl *fleet) stopAll() {
	fl.mu.Lock()
	fl.stopped = true
	fl.mu.Unlock()
	fl.waitReplacements()
	fl.mu.Lock()
	var ops []*operator
	for op := range fl.live {
		ops = append(ops, op)
	}
	fl.mu.Unlock()
	for _, op := range ops {
		op.once.Do(func() { op.cancel() })
		<-op.done
	}
}

// handoverTo is the HandoverFunc of the handover profile: the object the
// holder's annotation names, when there is one.
func handoverTo(_ context.Context, obj client.Object, _ string) (client.ObjectKey, bool, error) {
	name := obj.GetAnnotations()[handoverAnnotation]
	if name == "" || name == obj.GetName() {
		return client.ObjectKey{}, false, nil
	}
	return client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}, true, nil
}

// laggingLW delivers its watch events late, in order, as a slow informer
// would: the cache and every event handler see the world late.
type laggingLW struct {
	inner toolscache.ListerWatcher
	lag   func() time.Duration
}

func (l laggingLW) List(o metav1.ListOptions) (runtime.Object, error) { return l.inner.List(o) }

func (l laggingLW) Watch(o metav1.ListOptions) (watch.Interface, error) {
	w, err := l.inner.Watch(o)
	if err != nil {
		return nil, err
	}
	return newLaggingWatch(w, l.lag), nil
}

func (l laggingLW) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	return toolscache.ToListerWatcherWithContext(l.inner).ListWithContext(ctx, o)
}

func (l laggingLW) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := toolscache.ToListerWatcherWithContext(l.inner).WatchWithContext(ctx, o)
	if err != nil {
		return nil, err
	}
	return newLaggingWatch(w, l.lag), nil
}

type laggingWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func newLaggingWatch(inner watch.Interface, lag func() time.Duration) *laggingWatch {
	w := &laggingWatch{inner: inner, out: make(chan watch.Event), stop: make(chan struct{})}
	type timed struct {
		ev watch.Event
		at time.Time
	}
	queue := make(chan timed, 4096)
	go func() {
		defer close(queue)
		for ev := range inner.ResultChan() {
			select {
			case queue <- timed{ev: ev, at: time.Now().Add(lag())}:
			case <-w.stop:
				return
			}
		}
	}()
	go func() {
		defer close(w.out)
		for te := range queue {
			if d := time.Until(te.at); d > 0 {
				select {
				case <-time.After(d):
				case <-w.stop:
					return
				}
			}
			select {
			case w.out <- te.ev:
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *laggingWatch) Stop() {
	w.once.Do(func() {
		close(w.stop)
		w.inner.Stop()
	})
}

func (w *laggingWatch) ResultChan() <-chan watch.Event { return w.out }

// describeFleet words what the fleet did, for the summary line.
func (fl *fleet) describe() string {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fmt.Sprintf("restarts=%d overlaps=%d", fl.restarts, len(fl.overlaps))
}

func (r mwRun) play(t *testing.T, seed uint64) mwResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ns := env.Namespace(t)
	admin, err := env.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	rec, err := startRecorder(ctx, env, ns)
	if err != nil {
		t.Fatal(err)
	}
	gone, err := watchGone(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	f := featuresOf(seed)
	if r.features != nil {
		f = *r.features
	}
	keys := make([]string, r.keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("store-%d", i)
	}
	innerFail := r.innerFail
	if f.innerFails {
		innerFail = 0.3
	}
	stats := &chaos.Stats{}
	a := &actor{ignoreGranted: r.ignoreGranted, normalize: f.normalize(), rng: rand.New(rand.NewPCG(seed, 0xac7)), fail: innerFail,
		starts: map[int64]time.Time{}, names: map[int64]string{}, ops: map[int64]*operator{}, readers: map[*operator]client.Reader{}, open: map[wkey]*window{}}
	if f.restarts {
		a.crashP = 0.03
	}
	// In every profile a told pass may not be done stopping: the contract
	// says that only a zero Result ends a told pass (docs/middleware.md).
	a.slowStop, a.stopRng = slowStopChance, rand.New(rand.NewPCG(seed, 0x510))
	fl := &fleet{t: t, r: r, seed: seed, ns: ns, f: f, a: a, stats: stats, ctx: ctx, live: map[*operator]bool{},
		clock: clocktesting.NewFakeClock(time.Now())}
	if f.handover {
		// The gate of a careful operator (PodsGone): a key passes on only
		// once the previous holder's workload for it stopped.
		fl.gate = claim.GateFunc(func(_ context.Context, key string, prev claim.Holder) (bool, string, error) {
			a.mu.Lock()
			defer a.mu.Unlock()
			if a.open[wkey{uid: prev.UID, key: key}] != nil {
				return false, "the previous holder's workload still runs", nil
			}
			return true, "", nil
		})
	}
	w := &mwWorld{ns: ns, admin: admin, rng: rand.New(rand.NewPCG(seed, 0xbeef)), keys: keys, deleted: map[types.UID]time.Time{}, actor: a,
		normalize: f.normalize(), restartAround: fl.restartAround, partialCache: f.partialCache}
	if f.mixedCase {
		w.spelling = rand.New(rand.NewPCG(seed, 0xca5e))
	}
	for i := range r.objects {
		w.names = append(w.names, fmt.Sprintf("claimant-%d", i))
	}
	// Given the objects, some of them holding records written by an older
	// version of the operator (before the labels, before claim sets)
	for _, name := range w.names {
		w.create(ctx, t, name)
	}
	setName := ""
	{
		probe, err := claimmw.Wrap(a, claimmw.WithClient(admin), claimmw.WithAPIReader(admin), claimmw.For(&testclaimant.Claimant{}),
			claimmw.WithClaim(claim.Config{Namespace: ns, Normalize: f.normalizer()}), claimmw.WithKeys(claimantKeys), claimmw.WithMetrics(false))
		if err != nil {
			t.Fatal(err)
		}
		setName = probe.Claimer().Config().Set
	}
	if f.labels || f.setless {
		old := claim.Config{Namespace: ns, Set: setName, Normalize: f.normalizer()}
		if f.setless {
			old.Set = ""
		}
		w.seedRecords(ctx, t, old)
	}

	cfg := claim.Config{Namespace: ns, Set: setName, Normalize: f.normalizer()}
	if f.labels {
		cfg.Labels = recordLabels
	}
	w.expiry, err = claim.New(admin, admin, cfg, claim.WithBackend(lease.Backend),
		claim.WithLiveness(claim.LivenessFunc(func(context.Context, claim.Record) (bool, error) { return false, nil })))
	if err != nil {
		t.Fatal(err)
	}
	a.records, a.objects = w.expiry, admin
	// And one operator process (more during a rolling update), or one per
	// shard
	shards := []int{allShards}
	if f.shards {
		shards = []int{fastShard, slowShard}
	}
	for _, shard := range shards {
		if _, err := fl.start(shard); err != nil {
			t.Fatal(err)
		}
	}
	defer fl.stopAll()
	ticking := make(chan struct{})
	var stepped, stalled atomic.Int64 // the clock's ticks, moved and held back
	if f.renewal {
		go func() {
			tick := time.NewTicker(clockTick)
			defer tick.Stop()
			last := time.Now()
			for {
				select {
				case <-ticking:
					return
				case <-tick.C:
					now := time.Now()
					late := now.Sub(last) > 2*clockTick
					last = now
					switch {
					case fl.down():
					case late || apiStalled(ctx, admin, ns):
						stalled.Add(1)
					default:
						stepped.Add(1)
						fl.clock.Step(500 * time.Millisecond)
					}
				}
			}
		}()
	}

	// When the world edits, deletes and recreates objects, deletes records
	// (among them records a holder made to wait keeps while another object
	// waits), takes keys over, asks for handovers and restarts the
	// operator, for the seed's steps
	plays := r.acrossShards
	if f.shards && f.sharedCache && plays == 0 {
		// A waiter's cache that shows the holder waiting while it acts is
		// what the check after the waiter's own write must not trust: the
		// move is staged first, before the world's other moves keep the
		// processes busy, where its timing holds (played only among them,
		// it let mutant FreshCacheAssumed pass 29 seeds).
		plays = 2
	}
	if plays > 0 {
		// Staged in calm: a restart would give the waiter's process a
		// cache listed afresh, without the lag the move needs.
		fl.calmWhile(func() {
			for range plays {
				w.eraseFreshAcrossShards(ctx, t)
			}
		})
	}
	for range r.steps {
		time.Sleep(time.Duration(w.rng.IntN(30)) * time.Millisecond)
		name := w.names[w.rng.IntN(len(w.names))]
		switch p := w.rng.Float64(); {
		case p < 0.28:
			w.edit(ctx, t, name)
		case p < 0.35:
			w.swap(ctx, t)
		case p < 0.45:
			w.deleteObject(ctx, t, name)
		case p < 0.57:
			w.create(ctx, t, name)
		case p < 0.64:
			w.deleteRecord(ctx, t, false)
		case p < 0.70 && f.shards:
			w.eraseFreshAcrossShards(ctx, t)
		case p < 0.70:
			w.eraseFresh(ctx, t)
		case p < 0.83:
			w.takeOver(ctx, t)
		case p < 0.90 && f.handover:
			w.askHandover(ctx, t)
		case p >= 0.90 && p < 0.94 && f.restarts:
			overlap := time.Duration(0)
			if w.rng.IntN(3) == 0 {
				overlap = time.Duration(50+w.rng.IntN(150)) * time.Millisecond
			}
			fl.roll(overlap)
		default:
			// The rest, and the steps of a profile that is off: a holder
			// made to wait loses the record it keeps.
			w.eraseKept(ctx, t)
		}
	}

	// The last moves are those most likely to leave damage behind, each
	// on objects the next ones leave alone: a key taken over, a key swap
	// between two holders, a held key dropped from a Claimed object's
	// keys, the record of a Claimed holder deleted, the record a holder
	// made to wait keeps deleted while another object waits, the record
	// of a key only its holder names deleted, the record of a holder
	// whose key set was emptied deleted while its told pass still runs,
	// and the record of a holder whose keys turned invalid deleted once it
	// says InvalidKey.
	// They need holders: every object exists again and had a moment to
	// acquire.
	for _, name := range w.names {
		w.create(ctx, t, name)
	}
	time.Sleep(500 * time.Millisecond)
	w.touched = map[types.UID]bool{}
	if r.lossFirst {
		w.deleteRecord(ctx, t, true)
	}
	w.takeOver(ctx, t)
	if f.restarts {
		// The operator dies right after the loss, before it may have
		// handled it: a new process, which remembers nothing, must still
		// tell the holder from its condition.
		fl.roll(0)
	}
	w.swap(ctx, t)
	w.drop(ctx, t)
	if !r.lossFirst {
		w.deleteRecord(ctx, t, true)
	}
	w.eraseKept(ctx, t)
	w.eraseLone(ctx, t)
	w.eraseStopping(ctx, t)
	w.eraseInvalid(ctx, t)
	if f.mixedCase {
		w.eraseSpelled(ctx, t)
	}
	if f.partialCache {
		w.eraseUnconfirmed(ctx, t)
	}
	finishUnseen := func() {}
	if f.shards && !f.sharedCache {
		finishUnseen = w.eraseUnseen(ctx, t)
	}

	// And then everything stops: no faults, no edits, no restarts, and
	// time stands still
	close(ticking)
	if f.renewal {
		t.Logf("seed %d: the clock moved %d ticks and stood still for %d while the API server was slow", seed, stepped.Load(), stalled.Load())
	}
	fl.settle()
	finishUnseen()
	// Renewals the last tick of the clock set off land before the state
	// is judged: they were sent while time still moved.
	time.Sleep(200 * time.Millisecond)
	quietStart := time.Now()
	var final []error
	for {
		objs, leases := w.state(ctx, t)
		final = checkQuiescent(objs, leases, f.normalize())
		if len(final) == 0 || time.Since(quietStart) > r.quiet {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	converged := time.Since(quietStart)
	// Then, once settled, the claim writes stop: within the time the
	// state had to settle, a whole quiet interval passes without one, and
	// the state still passes every quiescent rule after it. A livelock
	// looks settled at every snapshot and writes in every interval; a
	// write the state still owed (a renewal by a process started just
	// before, a retry after its backoff) is followed by quiet.
	if len(final) == 0 {
		settledAt, writes := time.Now(), 0
		for {
			from := time.Now()
			time.Sleep(quietFor)
			n := rec.countSince(from)
			objs, leases := w.state(ctx, t)
			final = checkQuiescent(objs, leases, f.normalize())
			if n == 0 || len(final) > 0 {
				break
			}
			writes += n
			if time.Since(quietStart) > r.quiet {
				final = append(final, violate(errWritesGoOn, "", "%d claim writes, and no quiet interval of %s, in the %s after the state looked settled", writes, quietFor, time.Since(settledAt).Round(time.Millisecond)))
				break
			}
		}
	}
	if len(final) == 0 {
		final = fl.writesWhileReleasesFail(ctx, t, w, rec)
	}
	objs, leases := w.state(ctx, t)
	state := describe(objs, leases)
	fl.stopAll()
	versions, err := rec.sync(ctx, admin)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}

	// Then the checker judges the history and the quiescent state
	acts, releases, windows := a.recorded()
	h := mwHistory{acts: acts, releases: releases, windows: windows, outside: w.outside, deleted: w.deleted, gone: gone.snapshot(),
		versions: versions, handovers: f.handover, renewal: f.renewal, overlaps: fl.overlaps, lives: fl.lives}
	res := mwResult{history: h, stats: stats, counts: w.counts, converged: converged, state: state, features: f}
	res.violations = append(checkHistory(h), final...)
	res.counts.restarts, res.counts.overlaps = fl.restarts, len(fl.overlaps)
	res.counts.crashes = a.crashes
	res.counts.crashesAfterClaimWrite = fl.afterClaimWrite
	res.counts.windows = len(windows)
	for _, x := range h.acts {
		res.counts.passes++
		if x.state.Granted {
			res.counts.grantedPasses++
			res.counts.grants += len(x.state.Grants)
		}
		if x.err != nil && slices.ContainsFunc(windows, func(w window) bool {
			return w.uid == x.uid && !w.start.After(x.start) && (w.end.IsZero() || w.end.After(x.end))
		}) {
			res.counts.failedTold++
		}
		if x.requeued {
			res.counts.slowStops++
		}
	}
	return res
}

// quietFor is how long the settled state must go without a claim write.
const quietFor = 1500 * time.Millisecond

// writesWhileReleasesFail is the run's last move, on the settled state:
// with every Lease delete refused (the operator lost the right to delete
// Leases), a holder stops naming a key it holds and another holder is
// deleted. Once a release was refused, a whole quiet interval must pass
// within r.quiet without a status write or a claim write: a pass that
// keeps failing to release a record after the pass that knew it goes
// succeeded backs off, rather than write (and so wake itself) in each.
// Then deletes work again, and the state must settle as before; it
// returns the violations of both.
func (fl *fleet) writesWhileReleasesFail(ctx context.Context, t *testing.T, w *mwWorld, rec *recorder) []error {
	t.Helper()
	fl.refusal.on.Store(true)
	w.touched = map[types.UID]bool{}
	w.drop(ctx, t)
	if claimed := w.claimed(ctx, t); len(claimed) > 0 {
		var names []string
		for uid, obj := range claimed {
			if !w.touched[uid] {
				names = append(names, obj.Name)
			}
		}
		if len(names) > 0 {
			slices.Sort(names)
			w.deleteObject(ctx, t, names[w.rng.IntN(len(names))])
		}
	}
	var out []error
	for end := time.Now().Add(10 * time.Second); fl.refusal.refused.Load() == 0 && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	if fl.refusal.refused.Load() == 0 {
		t.Logf("seed %d: writesWhileReleasesFail: no release was refused within 10s (no holder to drop a key or delete)", fl.seed)
	} else {
		start := time.Now()
		defer func() {
			fl.refusal.mu.Lock()
			total := fmt.Sprint(fl.refusal.total, fl.refusal.said)
			fl.refusal.mu.Unlock()
			t.Logf("seed %d: writesWhileReleasesFail: %d deletes refused; judged %s after the first; status writes meanwhile: %s", fl.seed, fl.refusal.refused.Load(), time.Since(start).Round(time.Millisecond), total)
		}()
		for {
			from, statusBefore := time.Now(), fl.refusal.statusWrites.Load()
			_ = fl.refusal.writersSince()
			time.Sleep(quietFor)
			status, claims := fl.refusal.statusWrites.Load()-statusBefore, rec.countSince(from)
			if status == 0 && claims == 0 {
				break
			}
			if time.Since(start) > fl.r.quiet {
				out = append(out, violate(errWritesGoOn, "", "while every release is refused (%d refused): %d status writes (%s) and %d claim writes in the last %s, and no quiet interval in the %s since a release was first refused",
					fl.refusal.refused.Load(), status, fl.refusal.writersSince(), claims, quietFor, time.Since(start).Round(time.Millisecond)))
				break
			}
		}
	}
	fl.refusal.on.Store(false)
	// The passes that failed to release retry after the controller's
	// backoff, which grew while they failed: the state has twice as long
	// to settle.
	quietStart := time.Now()
	for {
		objs, leases := w.state(ctx, t)
		final := checkQuiescent(objs, leases, fl.f.normalize())
		if len(final) == 0 || time.Since(quietStart) > 2*fl.r.quiet {
			return append(out, final...)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// goneRecorder notes when each object disappeared from the API server.
type goneRecorder struct {
	mu   sync.Mutex
	gone map[types.UID]time.Time
}

func (g *goneRecorder) snapshot() map[types.UID]time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return maps.Clone(g.gone)
}

// watchGone watches the objects of ns and notes each deletion.
func watchGone(ctx context.Context, ns string) (*goneRecorder, error) {
	c, err := env.NewClient()
	if err != nil {
		return nil, err
	}
	wi, err := c.Watch(ctx, &testclaimant.ClaimantList{}, client.InNamespace(ns))
	if err != nil {
		return nil, fmt.Errorf("watching objects: %w", err)
	}
	g := &goneRecorder{gone: map[types.UID]time.Time{}}
	go func() {
		defer wi.Stop()
		for ev := range wi.ResultChan() {
			if o, ok := ev.Object.(*testclaimant.Claimant); ok && ev.Type == watch.Deleted {
				g.mu.Lock()
				g.gone[o.UID] = time.Now()
				g.mu.Unlock()
			}
		}
	}()
	return g, nil
}
