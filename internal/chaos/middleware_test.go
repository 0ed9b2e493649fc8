package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/ocf-claim/claim/internal/chaos"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// mwRun is the shape of one randomized run of the middleware: objects
// Claimants under one manager contend for as many keys as keys says while
// the world edits, deletes and recreates them, deletes records and takes
// keys over from outside, and the manager's writes and uncached reads meet
// injected faults.
type mwRun struct {
	objects, keys, steps int
	// profile is the fault profile of the manager's writes and of its
	// uncached reads.
	profile chaos.Profile
	// innerFail is the chance that an inner pass fails.
	innerFail float64
	// quiet bounds how long the state may take to converge once the
	// world and the faults stopped.
	quiet time.Duration

	// The broken pieces of the tests that show the checker fails; a
	// correct run leaves them at their zero value.

	// backend wraps the Lease backend.
	backend func(backends.Backend) backends.Backend
	// liveness replaces the default liveness.
	liveness claim.Liveness
	// ignoreGranted makes the inner reconciler act for every key its object
	// names, granted or not, and run in every parked pass.
	ignoreGranted bool
	// wakeOnlyWaiters delivers a record's change only to objects that do
	// not say Claimed=True: a holder whose record is deleted or taken over
	// is never told.
	wakeOnlyWaiters bool
}

// mwProfile is chaos.Default without the crashes: a crashed manager is a
// restarted process, which this run does not model. About one call in four
// misbehaves.
var mwProfile = chaos.Profile{Conflict: 0.05, Timeout: 0.04, Throttle: 0.03, Ambiguous: 0.05, Delay: 0.08, MaxDelay: 20 * time.Millisecond}

var mwSmall = mwRun{objects: 6, keys: 3, steps: 80, profile: mwProfile, innerFail: 0.05, quiet: 20 * time.Second}

// quiet is a logger that drops everything. logr.Discard() would not do: a
// manager takes its nil sink for "no logger given" and logs anyway.
var quiet = funcr.New(func(string, string) {}, funcr.Options{})

// mwResult is what one seed did and what the checker found.
type mwResult struct {
	history    mwHistory
	violations []error
	stats      *chaos.Stats
	counts     mwCounts
	converged  time.Duration
	// state is the objects and records at the end, in words.
	state string
}

// mwCounts counts what the world did and how often the inner acted.
type mwCounts struct {
	edits, deletions, creations, recordDeletions, takeovers int
	passes, grantedPasses, grants                           int
}

func (c mwCounts) String() string {
	return fmt.Sprintf("passes=%d granted-passes=%d grants=%d edits=%d deletions=%d creations=%d record-deletions=%d takeovers=%d",
		c.passes, c.grantedPasses, c.grants, c.edits, c.deletions, c.creations, c.recordDeletions, c.takeovers)
}

func (c *mwCounts) add(o mwCounts) {
	c.edits += o.edits
	c.deletions += o.deletions
	c.creations += o.creations
	c.recordDeletions += o.recordDeletions
	c.takeovers += o.takeovers
	c.passes += o.passes
	c.grantedPasses += o.grantedPasses
	c.grants += o.grants
}

func (r mwResult) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "violations=%d %s; converged in %s; %s", len(r.violations), r.counts, r.converged.Round(time.Millisecond), r.stats)
	for i, v := range r.violations {
		if i == 20 {
			fmt.Fprintf(&b, "\n  ... and %d more", len(r.violations)-i)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(v.Error())
	}
	if len(r.violations) > 0 {
		b.WriteString("\nafter quiescence:")
		b.WriteString(r.state)
	}
	return b.String()
}

// caught reports whether some violation breaks rule.
func (r mwResult) caught(rule error) bool {
	return slices.ContainsFunc(r.violations, func(v error) bool { return errors.Is(v, rule) })
}

// claimantKeys is the run's keys function: a Claimant's spec.keys.
func claimantKeys(_ context.Context, obj client.Object) ([]string, error) {
	return obj.(*Claimant).Spec.Keys, nil
}

// faultyWrites injects s's faults into c's writes only. The manager's reads
// come from its cache, which does not fail in a real operator: a failed
// index lookup in an event handler would lose a wake-up the middleware
// cannot be blamed for. Every Lease Delete is told to deleting first.
func faultyWrites(c client.WithWatch, s *chaos.Schedule, deleting func(context.Context, []client.DeleteOption)) client.WithWatch {
	f := chaos.Wrap(c, s)
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, _ client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return f.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, _ client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return f.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, _ client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			return f.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, _ client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, isLease := obj.(*coordinationv1.Lease); isLease {
				deleting(ctx, opts)
			}
			return f.Delete(ctx, obj, opts...)
		},
	})
}

// actor is the inner reconciler: it records every call, when it acts for
// which key with which token, and sleeps a few milliseconds while it acts
// to widen the window in which two actors would overlap.
type actor struct {
	reader        client.Reader // the manager's cache, for the object's UID
	ignoreGranted bool

	mu       sync.Mutex
	rng      *rand.Rand
	fail     float64
	next     int64
	starts   map[int64]time.Time // pass -> when it began
	acts     []act
	releases []release
}

// passSink is a logger that drops everything and carries the number of
// the controller's pass it was made for. The controller puts it in the
// context of the pass, and the middleware passes that context on to the
// inner reconciler and to the claim writes, so the inner call and each
// Lease Delete tell which pass they belong to.
type passSink struct{ pass int64 }

func (passSink) Init(logr.RuntimeInfo)            {}
func (passSink) Enabled(int) bool                 { return false }
func (passSink) Info(int, string, ...any)         {}
func (passSink) Error(error, string, ...any)      {}
func (s passSink) WithValues(...any) logr.LogSink { return s }
func (s passSink) WithName(string) logr.LogSink   { return s }

// passOf returns the number of the pass ctx belongs to, 0 for none.
func passOf(ctx context.Context) int64 {
	s, _ := logr.FromContextOrDiscard(ctx).GetSink().(passSink)
	return s.pass
}

// deleting records that a pass asked to delete a record, fenced on the
// version rv, whatever the answer (a lost response may hide a deletion
// that happened).
func (a *actor) deleting(ctx context.Context, opts []client.DeleteOption) {
	do := &client.DeleteOptions{}
	do.ApplyOptions(opts)
	rv := ""
	if do.Preconditions != nil && do.Preconditions.ResourceVersion != nil {
		rv = *do.Preconditions.ResourceVersion
	}
	a.mu.Lock()
	a.releases = append(a.releases, release{pass: passOf(ctx), version: rv})
	a.mu.Unlock()
}

// passBegins is the controller's log constructor: the controller calls it
// with the request as each pass begins, before the middleware reads
// anything, which is the earliest time the pass can have read a record. It
// numbers the pass and notes when it began.
func (a *actor) passBegins(req *reconcile.Request) logr.Logger {
	if req == nil {
		return logr.New(passSink{})
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.next++
	a.starts[a.next] = time.Now()
	return logr.New(passSink{pass: a.next})
}

func (a *actor) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s, _ := claimmw.StateFrom(ctx)
	obj := &Claimant{}
	// The cache holds the incarnation this pass is about: a recreated
	// object replaces it only after the finalizer of the old one came off,
	// which waits for this pass.
	_ = a.reader.Get(ctx, req.NamespacedName, obj)
	pass := passOf(ctx)
	a.mu.Lock()
	rec := act{object: req.Name, uid: obj.UID, pass: pass, passStart: a.starts[pass], state: s}
	work := time.Duration(a.rng.IntN(8)+1) * time.Millisecond
	fail := a.rng.Float64() < a.fail
	a.mu.Unlock()
	rec.start = time.Now()
	switch {
	case s.Granted:
		rec.acted = s.Grants
	case a.ignoreGranted && !s.Deleting:
		for _, k := range obj.Spec.Keys {
			rec.acted = append(rec.acted, claimmw.Grant{Key: k})
		}
	}
	if len(rec.acted) > 0 {
		time.Sleep(work) // the guarded work
	}
	var err error
	if fail {
		err = errors.New("chaos: the inner pass failed")
	}
	rec.end, rec.err = time.Now(), err
	a.mu.Lock()
	a.acts = append(a.acts, rec)
	a.mu.Unlock()
	return reconcile.Result{}, err
}

func (a *actor) stopFailing() {
	a.mu.Lock()
	a.fail = 0
	a.mu.Unlock()
}

func (a *actor) recorded() ([]act, []release) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.acts), slices.Clone(a.releases)
}

// mwWorld is what happens to the objects and records from outside the
// manager: one goroutine, driven by the seed.
type mwWorld struct {
	ns     string
	admin  client.Client
	expiry *claim.Claimer
	rng    *rand.Rand
	keys   []string
	names  []string

	outside []outside
	deleted map[types.UID]time.Time
	counts  mwCounts
	// touched are the objects the world edited or took a key over for,
	// which their own pass will read again.
	touched map[types.UID]bool
}

func (r mwRun) play(t *testing.T, seed uint64) mwResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
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

	// Given one manager whose writes and uncached reads meet faults
	stats := &chaos.Stats{}
	writes := chaos.NewSchedule(seed, r.profile, stats, func() {})
	reads := chaos.NewSchedule(seed^0x5bd1e995, r.profile, stats, func() {})
	a := &actor{ignoreGranted: r.ignoreGranted, rng: rand.New(rand.NewPCG(seed, 0xac7)), fail: r.innerFail, starts: map[int64]time.Time{}}
	mgr, err := ctrl.NewManager(rest.CopyConfig(env.Config), ctrl.Options{
		Scheme:     env.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		// Injected faults make the controller and the event recorder log an
		// error per failed call; the checker, not the log, judges the run.
		Logger: quiet,
		NewClient: func(cfg *rest.Config, o client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(cfg, o)
			if err != nil {
				return nil, err
			}
			return faultyWrites(c, writes, a.deleting), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	rawReader, err := env.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	apiReader := chaos.Wrap(rawReader, reads)
	keys := make([]string, r.keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("store-%d", i)
	}
	backend := lease.Backend
	if r.backend != nil {
		backend = func(rd client.Reader, wr client.Client, cfg backends.Config) (backends.Backend, error) {
			b, err := lease.Backend(rd, wr, cfg)
			if err != nil {
				return nil, err
			}
			return leaseRecords{r.backend(b)}, nil
		}
	}
	claimOpts := []claim.Option{claim.WithBackend(backend)}
	if r.liveness != nil {
		claimOpts = append(claimOpts, claim.WithLiveness(r.liveness))
	}
	a.reader = mgr.GetClient()
	opts := []claimmw.Option{
		claimmw.FromManager(mgr),
		claimmw.WithAPIReader(apiReader),
		claimmw.For(&Claimant{}),
		claimmw.WithClaim(claim.Config{Namespace: ns}, claimOpts...),
		claimmw.WithKeys(claimantKeys),
		// Long intervals: a parked object moves only when it is woken.
		claimmw.WithRequeue(time.Hour, time.Hour),
		claimmw.WithMetrics(false),
	}
	if r.ignoreGranted || seed%2 == 0 {
		// Even seeds run the inner reconciler in every parked pass too,
		// with State.Granted false: it must not act there.
		opts = append(opts, claimmw.WhileParked(claimmw.RunInnerWhileParked))
	}
	mw, err := claimmw.Wrap(a, opts...)
	if err != nil {
		t.Fatal(err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&Claimant{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		// The passes log nowhere: injected faults make every failed one
		// log an error, and the checker, not the log, judges the run.
		WithLogConstructor(a.passBegins)
	if r.wakeOnlyWaiters {
		// The predicate silences the middleware's own watch of records;
		// a raw source, which predicates do not reach, delivers them to
		// waiters only.
		b = b.WithEventFilter(predicate.NewPredicateFuncs(func(o client.Object) bool {
			_, isLease := o.(*coordinationv1.Lease)
			return !isLease
		})).WatchesRawSource(source.Kind[client.Object](mgr.GetCache(), &coordinationv1.Lease{}, waitersOnly{inner: mw.ClaimEvents(), reader: mgr.GetClient()}))
	}
	if err := mw.SetupWithManager(mgr, b); err != nil {
		t.Fatal(err)
	}
	mgrCtx, stopMgr := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(mgrCtx) }()
	stop := sync.OnceFunc(func() {
		stopMgr()
		if err := <-stopped; err != nil {
			t.Errorf("seed %d: manager: %v", seed, err)
		}
	})
	defer stop()

	expiry, err := claim.New(admin, admin, mw.Claimer().Config(), claim.WithBackend(lease.Backend),
		claim.WithLiveness(claim.LivenessFunc(func(context.Context, claim.Record) (bool, error) { return false, nil })))
	if err != nil {
		t.Fatal(err)
	}
	w := &mwWorld{ns: ns, admin: admin, expiry: expiry, rng: rand.New(rand.NewPCG(seed, 0xbeef)), keys: keys, deleted: map[types.UID]time.Time{}}
	for i := range r.objects {
		w.names = append(w.names, fmt.Sprintf("claimant-%d", i))
	}

	// When the world edits, deletes and recreates objects, deletes records
	// and takes keys over, for the seed's steps
	for _, name := range w.names {
		w.create(ctx, t, name)
	}
	for range r.steps {
		time.Sleep(time.Duration(w.rng.IntN(30)) * time.Millisecond)
		name := w.names[w.rng.IntN(len(w.names))]
		switch p := w.rng.Float64(); {
		case p < 0.30:
			w.edit(ctx, t, name)
		case p < 0.37:
			w.swap(ctx, t)
		case p < 0.47:
			w.deleteObject(ctx, t, name)
		case p < 0.60:
			w.create(ctx, t, name)
		case p < 0.75:
			w.deleteRecord(ctx, t, false)
		case p < 0.90:
			w.takeOver(ctx, t)
		}
	}

	// The last moves are those most likely to leave damage behind, each
	// on objects the next ones leave alone: a key taken over, a key swap
	// between two holders, a held key dropped from a Claimed object's
	// keys, and the record of a Claimed holder deleted.
	// They need holders: every object exists again and had a moment to
	// acquire.
	for _, name := range w.names {
		w.create(ctx, t, name)
	}
	time.Sleep(500 * time.Millisecond)
	w.touched = map[types.UID]bool{}
	w.takeOver(ctx, t)
	w.swap(ctx, t)
	w.drop(ctx, t)
	w.deleteRecord(ctx, t, true)

	// And then everything stops: no faults, no edits
	writes.SetEnabled(false)
	reads.SetEnabled(false)
	a.stopFailing()
	quiet := time.Now()
	var final []error
	for {
		objs, leases := w.state(ctx, t)
		final = checkQuiescent(objs, leases)
		if len(final) == 0 || time.Since(quiet) > r.quiet {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	converged := time.Since(quiet)
	objs, leases := w.state(ctx, t)
	state := describe(objs, leases)
	stop()
	versions, err := rec.sync(ctx, admin)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}

	// Then the checker judges the history and the quiescent state
	acts, releases := a.recorded()
	h := mwHistory{acts: acts, releases: releases, outside: w.outside, deleted: w.deleted, versions: versions}
	res := mwResult{history: h, stats: stats, counts: w.counts, converged: converged, state: state}
	res.violations = append(checkHistory(h), final...)
	for _, x := range h.acts {
		res.counts.passes++
		if x.state.Granted {
			res.counts.grantedPasses++
			res.counts.grants += len(x.state.Grants)
		}
	}
	return res
}

// describe words the objects and records, one a line.
func describe(objs []Claimant, leases []coordinationv1.Lease) string {
	var b strings.Builder
	for _, o := range objs {
		fmt.Fprintf(&b, "\n  %s %s keys=%q deleting=%t", o.Name, o.UID, o.Spec.Keys, o.DeletionTimestamp != nil)
		if c := meta.FindStatusCondition(o.Status.Conditions, string(conditions.Claimed)); c != nil {
			fmt.Fprintf(&b, " %s/%s (generation %d of %d): %s", c.Status, c.Reason, c.ObservedGeneration, o.Generation, c.Message)
		}
	}
	for _, l := range leases {
		if key, ok := l.Annotations[backends.DefaultKeyAnnotation]; ok {
			fmt.Fprintf(&b, "\n  record %s of %q: holder %s %s, version %s", l.Name, key,
				l.Annotations[backends.DefaultHolderNameAnnotation], l.Annotations[backends.DefaultHolderUIDAnnotation], l.ResourceVersion)
		}
	}
	return b.String()
}

// randomKeys is a random subset of the keys, in random order (the
// middleware sorts them).
func (w *mwWorld) randomKeys() []string {
	var out []string
	for _, k := range w.keys {
		if w.rng.IntN(2) == 0 {
			out = append(out, k)
		}
	}
	w.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func (w *mwWorld) get(ctx context.Context, t *testing.T, name string) *Claimant {
	t.Helper()
	obj := &Claimant{}
	err := w.admin.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return obj
}

func (w *mwWorld) create(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	obj := &Claimant{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}, Spec: ClaimantSpec{Keys: w.randomKeys()}}
	err := w.admin.Create(ctx, obj)
	switch {
	case apierrors.IsAlreadyExists(err):
	case err != nil:
		t.Fatalf("creating %s: %v", name, err)
	default:
		w.counts.creations++
	}
}

func (w *mwWorld) edit(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	obj := w.get(ctx, t, name)
	if obj == nil || obj.DeletionTimestamp != nil {
		return
	}
	w.setKeys(ctx, t, obj, w.randomKeys())
}

// setKeys sets the keys of obj (that incarnation: a UID precondition),
// reading it again when the middleware's own writes (the finalizer) moved
// it on, as a person's kubectl edit would.
func (w *mwWorld) setKeys(ctx context.Context, t *testing.T, obj *Claimant, keys []string) {
	t.Helper()
	uid := obj.UID
	for {
		obj.Spec.Keys = slices.Clone(keys)
		err := w.admin.Update(ctx, obj)
		switch {
		case err == nil:
			w.counts.edits++
			return
		case apierrors.IsConflict(err):
			if obj = w.get(ctx, t, obj.Name); obj == nil || obj.UID != uid || obj.DeletionTimestamp != nil {
				return
			}
		case apierrors.IsNotFound(err):
			return
		default:
			t.Fatalf("setting the keys of %s: %v", obj.Name, err)
		}
	}
}

// swap makes two objects that each hold a key name both keys, one right
// after the other: each now waits for a key the other holds, the key swap
// that only the give-up rule keeps from deadlocking.
func (w *mwWorld) swap(ctx context.Context, t *testing.T) {
	t.Helper()
	var list coordinationv1.LeaseList
	if err := w.admin.List(ctx, &list, client.InNamespace(w.ns)); err != nil {
		t.Fatalf("listing records: %v", err)
	}
	held := map[types.UID][]string{}
	for _, l := range list.Items {
		if key, ok := l.Annotations[backends.DefaultKeyAnnotation]; ok {
			uid := types.UID(l.Annotations[backends.DefaultHolderUIDAnnotation])
			held[uid] = append(held[uid], key)
		}
	}
	var objs []*Claimant
	for _, name := range w.names {
		if obj := w.get(ctx, t, name); obj != nil && obj.DeletionTimestamp == nil && len(held[obj.UID]) > 0 {
			objs = append(objs, obj)
		}
	}
	if len(objs) < 2 {
		return
	}
	w.rng.Shuffle(len(objs), func(i, j int) { objs[i], objs[j] = objs[j], objs[i] })
	a, b := objs[0], objs[1]
	w.touch(a)
	w.touch(b)
	x, y := held[a.UID][w.rng.IntN(len(held[a.UID]))], held[b.UID][w.rng.IntN(len(held[b.UID]))]
	for _, obj := range []*Claimant{a, b} {
		w.setKeys(ctx, t, obj, []string{x, y})
	}
}

// drop removes a key it holds from the keys of an object that says
// Claimed=True: the key must be released.
func (w *mwWorld) drop(ctx context.Context, t *testing.T) {
	t.Helper()
	var list coordinationv1.LeaseList
	if err := w.admin.List(ctx, &list, client.InNamespace(w.ns)); err != nil {
		t.Fatalf("listing records: %v", err)
	}
	claimed := w.claimed(ctx, t)
	type held struct {
		obj *Claimant
		key string
	}
	var candidates []held
	for _, l := range list.Items {
		key, ok := l.Annotations[backends.DefaultKeyAnnotation]
		if obj, isClaimed := claimed[types.UID(l.Annotations[backends.DefaultHolderUIDAnnotation])]; ok && isClaimed && slices.Contains(obj.Spec.Keys, key) && !w.touched[obj.UID] {
			candidates = append(candidates, held{obj, key})
		}
	}
	if len(candidates) == 0 {
		return
	}
	c := candidates[w.rng.IntN(len(candidates))]
	w.touch(c.obj)
	w.setKeys(ctx, t, c.obj, slices.DeleteFunc(slices.Clone(c.obj.Spec.Keys), func(k string) bool { return k == c.key }))
}

func (w *mwWorld) deleteObject(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	obj := w.get(ctx, t, name)
	if obj == nil || obj.DeletionTimestamp != nil {
		return
	}
	w.deleted[obj.UID] = time.Now()
	err := w.admin.Delete(ctx, obj, client.Preconditions{UID: &obj.UID})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("deleting %s: %v", name, err)
	}
	w.counts.deletions++
}

// touch notes that obj's own pass will run again, during the last moves.
func (w *mwWorld) touch(obj *Claimant) {
	if w.touched != nil {
		w.touched[obj.UID] = true
	}
}

// claimed returns the live objects that say Claimed=True, by UID.
func (w *mwWorld) claimed(ctx context.Context, t *testing.T) map[types.UID]*Claimant {
	t.Helper()
	out := map[types.UID]*Claimant{}
	for _, name := range w.names {
		obj := w.get(ctx, t, name)
		if obj == nil || obj.DeletionTimestamp != nil {
			continue
		}
		if c := meta.FindStatusCondition(obj.Status.Conditions, string(conditions.Claimed)); c != nil && c.Status == metav1.ConditionTrue {
			out[obj.UID] = obj
		}
	}
	return out
}

// deleteRecord deletes a random record, as kubectl claims release or a
// GitOps prune would; with ofClaimed, only a record of a holder that says
// Claimed=True and names the key.
func (w *mwWorld) deleteRecord(ctx context.Context, t *testing.T, ofClaimed bool) {
	t.Helper()
	var list coordinationv1.LeaseList
	if err := w.admin.List(ctx, &list, client.InNamespace(w.ns)); err != nil {
		t.Fatalf("listing records: %v", err)
	}
	var claimed map[types.UID]*Claimant
	if ofClaimed {
		claimed = w.claimed(ctx, t)
	}
	var ours []coordinationv1.Lease
	for _, l := range list.Items {
		key, ok := l.Annotations[backends.DefaultKeyAnnotation]
		if !ok {
			continue
		}
		if ofClaimed {
			h, ok := claimed[types.UID(l.Annotations[backends.DefaultHolderUIDAnnotation])]
			if !ok || !slices.Contains(h.Spec.Keys, key) || w.touched[h.UID] {
				continue
			}
		}
		ours = append(ours, l)
	}
	if len(ours) == 0 {
		return
	}
	l := ours[w.rng.IntN(len(ours))]
	invoked := time.Now()
	err := w.admin.Delete(ctx, &l, client.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion})
	switch {
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		// Nothing was deleted: no fault to excuse anything with.
	case err != nil:
		t.Fatalf("deleting record %s: %v", l.Name, err)
	default:
		w.outside = append(w.outside, outside{kind: outsideDelete, key: l.Annotations[backends.DefaultKeyAnnotation], lease: l.UID, invoked: invoked, returned: time.Now()})
		w.counts.recordDeletions++
	}
}

// takeOver acquires a key a random object names through a Claimer whose
// liveness says every holder expired, as another replica with time-based
// liveness would after a pause.
func (w *mwWorld) takeOver(ctx context.Context, t *testing.T) {
	t.Helper()
	obj := w.get(ctx, t, w.names[w.rng.IntN(len(w.names))])
	if obj == nil || obj.DeletionTimestamp != nil || len(obj.Spec.Keys) == 0 {
		return
	}
	// A key another object holds: the takeover is what is injected.
	var held []string
	for _, k := range obj.Spec.Keys {
		rec, err := w.expiry.Current(ctx, k)
		if err != nil {
			t.Fatalf("reading the record of %q: %v", k, err)
		}
		if rec.Ours() && rec.Holder.UID != obj.UID {
			held = append(held, k)
		}
	}
	if len(held) == 0 {
		return
	}
	key := held[w.rng.IntN(len(held))]
	w.touch(obj)
	self, err := w.expiry.HolderOf(obj)
	if err != nil {
		t.Fatal(err)
	}
	invoked := time.Now()
	_, o, err := w.expiry.Acquire(ctx, key, self)
	if err != nil {
		t.Logf("expiry takeover of %q for %s: %v", key, obj.Name, err)
		return
	}
	if o.Reason == claim.ReasonTakenOver {
		w.outside = append(w.outside, outside{kind: outsideTakeover, key: o.Key, holder: obj.UID, invoked: invoked, returned: time.Now()})
		w.counts.takeovers++
	}
}

// state reads every object and record, uncached.
func (w *mwWorld) state(ctx context.Context, t *testing.T) ([]Claimant, []coordinationv1.Lease) {
	t.Helper()
	var objs ClaimantList
	if err := w.admin.List(ctx, &objs, client.InNamespace(w.ns)); err != nil {
		t.Fatalf("listing objects: %v", err)
	}
	var leases coordinationv1.LeaseList
	if err := w.admin.List(ctx, &leases, client.InNamespace(w.ns)); err != nil {
		t.Fatalf("listing records: %v", err)
	}
	return objs.Items, leases.Items
}

// leaseRecords keeps a wrapped backend's record type visible, so that the
// middleware still watches Leases.
type leaseRecords struct{ backends.Backend }

func (leaseRecords) RecordType() client.Object { return &coordinationv1.Lease{} }

// waitersOnly hands a record's event to inner with a queue that drops every
// object that says Claimed=True: the broken wake-up of the tests.
type waitersOnly struct {
	inner  handler.EventHandler
	reader client.Reader
}

type waiterQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	ctx    context.Context
	reader client.Reader
}

func (q waiterQueue) Add(req reconcile.Request) {
	obj := &Claimant{}
	if err := q.reader.Get(q.ctx, req.NamespacedName, obj); err == nil {
		if c := meta.FindStatusCondition(obj.Status.Conditions, string(conditions.Claimed)); c != nil && c.Status == metav1.ConditionTrue {
			return
		}
	}
	q.TypedRateLimitingInterface.Add(req)
}

func (h waitersOnly) queue(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) waiterQueue {
	return waiterQueue{TypedRateLimitingInterface: q, ctx: ctx, reader: h.reader}
}

func (h waitersOnly) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.inner.Create(ctx, e, h.queue(ctx, q))
}

func (h waitersOnly) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.inner.Update(ctx, e, h.queue(ctx, q))
}

func (h waitersOnly) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.inner.Delete(ctx, e, h.queue(ctx, q))
}

func (h waitersOnly) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.inner.Generic(ctx, e, h.queue(ctx, q))
}

// TestMiddlewareChaos is the randomized run at the middleware level: four
// Claimants under a real manager contend for three keys while their key
// sets are edited, they are deleted and recreated, records are deleted and
// taken over from outside, and the manager's API calls meet conflicts,
// timeouts, throttling, lost responses and delays. The checker judges what
// the inner reconciler did and the state after quiescence. It runs 3 seeds
// by default; `make chaos SEEDS=N` runs N, and -seed=N (or CHAOS_SEED=N)
// replays one.
func TestMiddlewareChaos(t *testing.T) {
	list := seeds(t)
	total := mwCounts{}
	stats := &chaos.Stats{}
	violations := 0
	for _, seed := range list {
		// Given four objects, three keys and the fault profile
		// When the world and the faults act for one seed, then stop
		res := mwSmall.play(t, seed)
		total.add(res.counts)
		stats.Add(res.stats)
		violations += len(res.violations)
		// Then every promise of the middleware holds
		if len(res.violations) > 0 {
			t.Errorf("seed %d: %s\nreplay: go test ./internal/chaos/ -run '^TestMiddlewareChaos$' -seed=%d  (or CHAOS_SEED=%d make chaos)",
				seed, res.report(), seed, seed)
		}
		if res.counts.grants == 0 {
			t.Errorf("seed %d granted nothing: the run proves nothing", seed)
		}
	}
	t.Logf("middleware chaos summary: seeds=%d violations=%d %s %s", len(list), violations, total, stats)
}

// catches runs r seed after seed until the checker reports one of rules,
// and fails the test when maxSeeds seeds passed.
func catches(t *testing.T, r mwRun, maxSeeds uint64, rules ...error) {
	t.Helper()
	for seed := uint64(1); seed <= maxSeeds; seed++ {
		res := r.play(t, seed)
		if slices.ContainsFunc(rules, res.caught) {
			t.Logf("seed %d caught it: %s", seed, res.report())
			return
		}
		t.Logf("seed %d did not report %v: %s", seed, rules, res.report())
	}
	t.Fatalf("%d seeds with the broken piece passed the checker's rules %v", maxSeeds, rules)
}

// broken is the run the tests that break a piece start from: the same
// world and faults, a shorter wait for a convergence that may never come.
var mwBroken = func() mwRun { r := mwSmall; r.quiet = 5 * time.Second; return r }()

// TestMiddlewareChaosCatchesWakingOnlyWaiters: a record's change reaches only
// objects that do not say Claimed=True, so a holder whose record was deleted
// or taken over is never told and goes on saying Claimed.
func TestMiddlewareChaosCatchesWakingOnlyWaiters(t *testing.T) {
	// Given the run with record events delivered to waiters only
	r := mwBroken
	r.wakeOnlyWaiters = true
	// When it runs, Then an object says Claimed=True for a key it lost
	catches(t, r, 5, errClaimedNotHeld)
}

// skipsSweep is a backend whose List finds nothing: the give-up rule and
// the deletion sweep never see a record to release.
type skipsSweep struct{ backends.Backend }

func (skipsSweep) List(context.Context, claim.Holder) ([]claim.Record, error) { return nil, nil }

// TestMiddlewareChaosCatchesASweepThatSkipsKeys: held keys no longer named,
// and the keys of deleted objects, are never released.
func TestMiddlewareChaosCatchesASweepThatSkipsKeys(t *testing.T) {
	// Given the run with a sweep that finds no record
	r := mwBroken
	r.backend = func(b backends.Backend) backends.Backend { return skipsSweep{b} }
	// When it runs, Then a record outlives its holder's claim, or a parked
	// object keeps a key after the one it waits for (the give-up rule
	// finds nothing to give up either)
	catches(t, r, 5, errLeak, errHoldsWhileWaiting, errDeadlock)
}

// keepsWhileParked is a backend whose Delete does nothing while the
// record's holder is parked (exists, is not being deleted, does not say
// Claimed=True): parked objects keep the keys they no longer name and the
// keys after the one they wait for.
type keepsWhileParked struct {
	backends.Backend
	reader client.Reader
}

func (b keepsWhileParked) Delete(ctx context.Context, prev claim.Record) error {
	obj := &Claimant{}
	if err := b.reader.Get(ctx, prev.Holder.NamespacedName(), obj); err == nil && obj.UID == prev.Holder.UID && obj.DeletionTimestamp == nil {
		if c := meta.FindStatusCondition(obj.Status.Conditions, string(conditions.Claimed)); c == nil || c.Status != metav1.ConditionTrue {
			return nil
		}
	}
	return b.Backend.Delete(ctx, prev)
}

// TestMiddlewareChaosCatchesParkedObjectsThatKeepKeys: a parked object that
// keeps the keys after the one it waits for can hold a key another waits
// for while it waits for one that other holds (a key-swap deadlock).
func TestMiddlewareChaosCatchesParkedObjectsThatKeepKeys(t *testing.T) {
	// Given the run with parked objects that release nothing
	reader, err := env.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	r := mwBroken
	r.backend = func(b backends.Backend) backends.Backend { return keepsWhileParked{Backend: b, reader: reader} }
	// When it runs, Then a parked object holds a key after the one it waits
	// for, parked objects wait for each other, or one keeps a key it no
	// longer names
	catches(t, r, 5, errHoldsWhileWaiting, errDeadlock, errLeak)
}

// everyRecordMine is a backend whose List returns every record of the
// run's keys as the asking holder's: a release without the UID filter.
type everyRecordMine struct {
	backends.Backend
	keys []string
}

func (b everyRecordMine) List(ctx context.Context, holder claim.Holder) ([]claim.Record, error) {
	var out []claim.Record
	for _, k := range b.keys {
		rec, err := b.Get(ctx, k)
		if err != nil {
			return nil, err
		}
		if rec.Ours() {
			rec.Holder = holder
			out = append(out, rec)
		}
	}
	return out, nil
}

// TestMiddlewareChaosCatchesAReleaseWithoutTheHolderFilter: an object's
// release deletes the records of other holders.
func TestMiddlewareChaosCatchesAReleaseWithoutTheHolderFilter(t *testing.T) {
	// Given the run with a release that takes every record for its own
	r := mwBroken
	keys := make([]string, r.keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("store-%d", i)
	}
	r.backend = func(b backends.Backend) backends.Backend { return everyRecordMine{Backend: b, keys: keys} }
	// When it runs, Then a record is deleted whose holder was never told
	catches(t, r, 5, errUntoldRelease)
}

// TestMiddlewareChaosCatchesALivenessThatSaysDead: every holder is judged
// gone, so live holders lose their keys to whoever asks next.
func TestMiddlewareChaosCatchesALivenessThatSaysDead(t *testing.T) {
	// Given the run with a liveness that says every holder is gone
	r := mwBroken
	r.liveness = claim.LivenessFunc(func(context.Context, claim.Record) (bool, error) { return false, nil })
	// When it runs, Then a live holder's record passes to another
	catches(t, r, 5, errTakeover)
}

// TestMiddlewareChaosCatchesAnInnerThatIgnoresGranted: an inner reconciler
// that acts for the keys its object names whether or not they were granted.
func TestMiddlewareChaosCatchesAnInnerThatIgnoresGranted(t *testing.T) {
	// Given the run with an inner that acts in parked passes too
	r := mwBroken
	r.ignoreGranted = true
	// When it runs, Then two objects act for one key at once
	catches(t, r, 5, errOverlap)
}
