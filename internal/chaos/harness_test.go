package chaos_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/internal/chaos"
	"github.com/ocf-claim/claim/internal/history"
	"github.com/ocf-claim/claim/internal/testclaimant"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
)

var env *envtest.Env

func TestMain(m *testing.M) {
	envtest.Main(m, &env, testclaimant.EnvOptions())
}

var (
	seedFlag  = flag.Int64("seed", -1, "replay one seed of TestChaos and TestMiddlewareChaos (also CHAOS_SEED)")
	seedsFlag = flag.Int("seeds", 0, "how many seeds TestChaos and TestMiddlewareChaos run (also CHAOS_SEEDS; default 3)")
)

// seeds returns the seeds TestChaos and TestMiddlewareChaos run: one to
// replay, or 1..N.
func seeds(t *testing.T) []uint64 {
	t.Helper()
	one := *seedFlag
	if s := os.Getenv("CHAOS_SEED"); s != "" && one < 0 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("CHAOS_SEED=%q: %v", s, err)
		}
		one = n
	}
	if one >= 0 {
		return []uint64{uint64(one)}
	}
	n := *seedsFlag
	if s := os.Getenv("CHAOS_SEEDS"); s != "" && n == 0 {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("CHAOS_SEEDS=%q: %v", s, err)
		}
		n = v
	}
	if n <= 0 {
		n = 3
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i + 1)
	}
	return out
}

// run is the shape of one randomized run.
type run struct {
	slots, keys, steps int
	profile            chaos.Profile
	// livenessCrash is the chance that a participant crashes between a
	// liveness verdict of "gone" and its takeover write.
	livenessCrash float64
	// backend stores the records; lease.Backend unless a test breaks it.
	backend backends.Factory
	// during runs beside the participants, which keep going until it
	// returns (the restart test restarts the control plane from it).
	during func(ctx context.Context) error
	// on is the control plane; the package's own when nil.
	on *envtest.Env
}

func (r run) env() *envtest.Env {
	if r.on != nil {
		return r.on
	}
	return env
}

var small = run{slots: 4, keys: 3, steps: 24, profile: chaos.Default, livenessCrash: 0.05, backend: lease.Backend}

// result is what one seed did and what the checker found.
type result struct {
	ops        []history.Op
	started    map[int]time.Time // when each participant process started
	summary    history.Summary
	violations []history.Violation
	stats      *chaos.Stats
}

// world is the shared state of one seed: the namespace, the log, every
// holder ever created.
type world struct {
	run
	ns    string
	cfg   claim.Config
	keys  []string
	log   *history.Log
	stats *chaos.Stats
	admin client.Client

	mu      sync.Mutex
	holders map[types.UID]claim.Holder
	busy    atomic.Bool // during is still running
	started map[int]time.Time
}

// more reports whether a participant that took n of budget steps goes on.
func (w *world) more(n, budget int) bool { return n < budget || w.busy.Load() }

// retry calls f until it succeeds or ctx ends, for the world's own writes,
// which must happen even while the API server is away.
func retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		if err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r run) play(t *testing.T, seed uint64) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin, err := r.env().NewClient()
	if err != nil {
		t.Fatal(err)
	}
	w := &world{run: r, ns: r.env().Namespace(t), log: &history.Log{}, stats: &chaos.Stats{}, admin: admin, holders: map[types.UID]claim.Holder{}, started: map[int]time.Time{}}
	w.cfg = claim.Config{Namespace: w.ns}
	for i := range r.keys {
		w.keys = append(w.keys, fmt.Sprintf("chaos|backend-%d.%s.svc:9200", i, w.ns))
	}
	rec, err := startRecorder(ctx, r.env(), w.ns)
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for i := range r.slots {
		rng := rand.New(rand.NewPCG(seed, uint64(i)))
		wg.Go(func() { w.slot(ctx, t, i, rng) })
	}
	duringErr := make(chan error, 1)
	if r.during != nil {
		w.busy.Store(true)
		go func() { duringErr <- r.during(ctx); w.busy.Store(false) }()
	} else {
		duringErr <- nil
	}
	wg.Wait()
	if err := <-duringErr; err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}

	left := w.finalSweep(ctx, t)
	versions, err := rec.sync(ctx, w.admin)
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	s, vs := history.Check(w.log.Ops(), versions, left)
	return result{ops: w.log.Ops(), started: w.started, summary: s, violations: vs, stats: w.stats}
}

// afterRestart counts the grants made after t to processes started before t.
func (r result) afterRestart(t time.Time) int {
	n := 0
	for _, op := range r.ops {
		if op.Granted() && op.Invoked.After(t) && r.started[op.Process].Before(t) {
			n++
		}
	}
	return n
}

// slot runs participants for one holder name in turn: each life is a
// process with its own client, fault schedule and claimer; it ends in a
// crash (the holder stays or is deleted) or by deleting its own holder, and
// the next life starts with the surviving holder or a recreated one.
func (w *world) slot(ctx context.Context, t *testing.T, i int, rng *rand.Rand) {
	name := fmt.Sprintf("holder-%d", i)
	var cm *corev1.ConfigMap
	steps := 0
	for w.more(steps, w.steps) && ctx.Err() == nil {
		if cm == nil {
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name}}
			if err := retry(ctx, func() error { return w.admin.Create(ctx, cm) }); err != nil {
				t.Errorf("creating holder %s: %v", name, err)
				return
			}
		}
		alive, n := w.life(ctx, t, cm, rng, w.steps-steps)
		steps += n
		if !alive || rng.Float64() < 0.5 {
			// The holder is deleted: by itself, or by the world after its
			// process crashed (the pod and its CR went away).
			if alive {
				w.deleteHolder(ctx, t, cm)
			}
			cm = nil
		}
	}
}

func (w *world) holderOf(t *testing.T, c *claim.Claimer, cm *corev1.ConfigMap) claim.Holder {
	h, err := c.HolderOf(cm)
	if err != nil {
		t.Fatalf("holder of %s: %v", cm.Name, err)
	}
	w.mu.Lock()
	w.holders[h.UID] = h
	w.mu.Unlock()
	return h
}

func (w *world) deleteHolder(ctx context.Context, t *testing.T, cm *corev1.ConfigMap) {
	done := w.log.Begin(history.Op{Kind: history.OpDeleteHolder, Holder: cm.UID})
	err := retry(ctx, func() error {
		err := w.admin.Delete(ctx, cm, client.Preconditions{UID: &cm.UID})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	done("", "", err)
	if err != nil {
		t.Errorf("deleting holder %s: %v", cm.Name, err)
	}
}

// life runs one participant process for at most budget steps. It reports
// whether the holder is still alive when the process ends, and how many
// steps it took.
func (w *world) life(ctx context.Context, t *testing.T, cm *corev1.ConfigMap, rng *rand.Rand, budget int) (bool, int) {
	ctx, crash := context.WithCancel(ctx)
	defer crash()
	w.mu.Lock()
	proc := len(w.started)
	w.started[proc] = time.Now()
	w.mu.Unlock()
	raw, err := w.env().NewClient()
	if err != nil {
		t.Fatal(err)
	}
	c := chaos.Wrap(raw, chaos.NewSchedule(rng.Uint64(), w.profile, w.stats, crash))
	liveness := claim.HolderExists(c)
	claimer, err := claim.New(c, c, w.cfg, claim.WithBackend(w.backend), claim.WithLiveness(claim.LivenessFunc(
		func(ctx context.Context, rec claim.Record) (bool, error) {
			alive, err := liveness.Alive(ctx, rec)
			if err == nil && !alive && rng.Float64() < w.livenessCrash {
				// Crash between judging the holder gone and the takeover.
				crash()
			}
			return alive, err
		})))
	if err != nil {
		t.Fatal(err)
	}
	self := w.holderOf(t, claimer, cm)
	n := 0
	for ; w.more(n, budget); n++ {
		if ctx.Err() != nil {
			return true, n
		}
		switch r := rng.Float64(); {
		case r < 0.2:
			done := w.log.Begin(history.Op{Kind: history.OpRelease, Holder: self.UID, Process: proc})
			err := claimer.Release(ctx, self)
			if ctx.Err() == nil {
				done("", "", err)
			}
		case r < 0.25:
			w.deleteHolder(ctx, t, cm)
			return false, n + 1
		default:
			key := w.keys[rng.IntN(len(w.keys))]
			done := w.log.Begin(history.Op{Kind: history.OpAcquire, Key: key, Holder: self.UID, Process: proc})
			_, o, err := claimer.Acquire(ctx, key, self)
			if ctx.Err() != nil {
				// Crashed: the process never saw the answer.
				return true, n + 1
			}
			done(o.Reason, o.Token, err)
			if o.Granted() {
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond) // the guarded work
			}
			if err != nil {
				time.Sleep(20 * time.Millisecond) // the controller's backoff
			}
		}
	}
	return true, n
}

// finalSweep releases every holder ever created, as their finalizers would,
// without faults, and returns the records left afterwards.
func (w *world) finalSweep(ctx context.Context, t *testing.T) []history.Version {
	c, err := claim.New(w.admin, w.admin, w.cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	holders := make([]claim.Holder, 0, len(w.holders))
	for _, h := range w.holders {
		holders = append(holders, h)
	}
	w.mu.Unlock()
	for _, h := range holders {
		err := retry(ctx, func() error {
			done := w.log.Begin(history.Op{Kind: history.OpFinalRelease, Holder: h.UID})
			err := c.Release(ctx, h)
			done("", "", err)
			return err
		})
		if err != nil {
			t.Errorf("final release of %s: %v", h, err)
		}
	}
	var list coordinationv1.LeaseList
	if err := w.admin.List(ctx, &list, client.InNamespace(w.ns)); err != nil {
		t.Fatal(err)
	}
	var left []history.Version
	for i := range list.Items {
		if list.Items[i].Name != sentinelName {
			left = append(left, versionOf(&list.Items[i], false))
		}
	}
	return left
}

const sentinelName = "chaos-sentinel"

// recorder keeps every version of every Lease in a namespace, from a watch
// that resumes where it stopped when the API server goes away.
type recorder struct {
	mu       sync.Mutex
	versions []history.Version
	err      error
	sentinel chan struct{}
	ns       string
}

func versionOf(l *coordinationv1.Lease, deleted bool) history.Version {
	return history.Version{
		Key:             l.Annotations[backends.DefaultKeyAnnotation],
		Name:            l.Name,
		UID:             l.UID,
		ResourceVersion: l.ResourceVersion,
		Holder:          types.UID(l.Annotations[backends.DefaultHolderUIDAnnotation]),
		HolderName:      l.Annotations[backends.DefaultHolderNameAnnotation],
		Deleted:         deleted,
		Seen:            time.Now(),
	}
}

func startRecorder(ctx context.Context, e *envtest.Env, ns string) (*recorder, error) {
	c, err := e.NewClient()
	if err != nil {
		return nil, err
	}
	var list coordinationv1.LeaseList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing Leases before watching: %w", err)
	}
	r := &recorder{sentinel: make(chan struct{}), ns: ns}
	rv := list.ResourceVersion
	go func() {
		for ctx.Err() == nil {
			wi, err := c.Watch(ctx, &coordinationv1.LeaseList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
			if err != nil {
				time.Sleep(100 * time.Millisecond) // the API server is restarting
				continue
			}
			rv = r.consume(wi, rv)
			if r.failed() {
				return
			}
		}
	}()
	return r, nil
}

// consume records events until the watch ends and returns the last version
// seen, to resume from.
func (r *recorder) consume(wi watch.Interface, rv string) string {
	defer wi.Stop()
	for ev := range wi.ResultChan() {
		switch ev.Type {
		case watch.Error:
			r.mu.Lock()
			r.err = fmt.Errorf("watch of Leases failed at version %s: %w", rv, apierrors.FromObject(ev.Object))
			r.mu.Unlock()
			return rv
		case watch.Bookmark:
			if l, ok := ev.Object.(*coordinationv1.Lease); ok {
				rv = l.ResourceVersion
			}
			continue
		}
		l, ok := ev.Object.(*coordinationv1.Lease)
		if !ok {
			continue
		}
		rv = l.ResourceVersion
		if l.Name == sentinelName {
			if ev.Type == watch.Added {
				close(r.sentinel)
			}
			continue
		}
		r.mu.Lock()
		r.versions = append(r.versions, versionOf(l, ev.Type == watch.Deleted))
		r.mu.Unlock()
	}
	return rv
}

func (r *recorder) failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err != nil
}

// sync writes a sentinel Lease and waits until the watch delivered it, so
// that every earlier write has been recorded, and returns the versions.
func (r *recorder) sync(ctx context.Context, c client.Client) ([]history.Version, error) {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: sentinelName}}
	if err := c.Create(ctx, l); err != nil {
		return nil, fmt.Errorf("writing the watch sentinel: %w", err)
	}
	select {
	case <-r.sentinel:
	case <-time.After(30 * time.Second):
		return nil, errors.New("the Lease watch did not deliver the sentinel within 30s")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	return append([]history.Version(nil), r.versions...), nil
}

// countSince is how many Lease versions (writes and deletions, the sentinel
// aside) the watch delivered since t.
func (r *recorder) countSince(t time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, v := range r.versions {
		if v.Seen.After(t) {
			n++
		}
	}
	return n
}
