package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/internal/chaos"
	"github.com/ocf-claim/claim/internal/mutant"
	"github.com/ocf-claim/claim/internal/testclaimant"
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
	// lossFirst makes the last moves begin with the deletion of a Claimed
	// holder's record: with three keys, the takeover, swap and drop before
	// it usually leave it no holder they did not touch.
	lossFirst bool
	// features replaces the profiles the seed draws.
	features *mwFeatures
	// acrossShards is how many eraseFreshAcrossShards moves the world
	// begins with (the shards profile must be on).
	acrossShards int
	// readsOwnWrites makes the manager's client answer a read of an object
	// of the kind with the version it wrote itself last, when its cache
	// shows an older one; its lists still come from the cache.
	readsOwnWrites bool
}

// mwProfile is chaos.Default without the crashes, which the restarts
// profile adds (a crash there is an operator restart). About one call in
// four misbehaves.
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
	state    string
	features mwFeatures
}

// mwCounts counts what the world did and how often the inner acted.
type mwCounts struct {
	edits, deletions, creations, recordDeletions, takeovers, handovers int
	// keptErased counts the records deleted by eraseKept; freshErased
	// those deleted by eraseFresh and eraseFreshAcrossShards, shardErased
	// those by the latter, loneErased those by eraseLone, stoppingErased
	// those by eraseStopping, which also counts the keys it took over from
	// a stopping holder (stoppingTakenOver), invalidErased those by
	// eraseInvalid, unseenErased those by eraseUnseen, unseenRestarted the
	// deletions among them the waiter's process was restarted around
	// (fleet.restartAround), unseenFresh the times its finish restarted the
	// waiter's process once the faults stopped and saw the waiter's first
	// pass there end, unconfirmedErased those by eraseUnconfirmed,
	// unconfirmedRestarted the restarts of the waiter's process after them.
	// slowStops are the
	// told passes that asked to run again, not done stopping (the actor's
	// slowStop).
	keptErased, freshErased, shardErased, loneErased   int
	stoppingErased, stoppingTakenOver, invalidErased   int
	unseenErased, unseenRestarted, unseenFresh         int
	unconfirmedErased, unconfirmedRestarted            int
	passes, grantedPasses, grants, windows, failedTold int
	slowStops                                          int
	// mixedCase counts the keys the world wrote in a spec in another
	// spelling than the normalized one (the mixed-case profile), namedTwice
	// the specs it wrote that name one key in two spellings, spelledErased
	// the records deleted by eraseSpelled.
	mixedCase, namedTwice, spelledErased                int
	restarts, overlaps, crashes, crashesAfterClaimWrite int
}

func (c mwCounts) String() string {
	return fmt.Sprintf("passes=%d granted-passes=%d grants=%d windows=%d failed-told-passes=%d slow-stops=%d edits=%d deletions=%d creations=%d record-deletions=%d kept-erased=%d fresh-erased=%d shard-erased=%d lone-erased=%d stopping-erased=%d stopping-taken-over=%d invalid-erased=%d unseen-erased=%d unseen-restarted=%d unseen-fresh=%d unconfirmed-erased=%d unconfirmed-restarted=%d takeovers=%d handover-asks=%d restarts=%d overlapping-restarts=%d mid-pass-crashes=%d crashes-after-claim-write=%d mixed-case-namings=%d named-twice=%d spelled-erased=%d",
		c.passes, c.grantedPasses, c.grants, c.windows, c.failedTold, c.slowStops, c.edits, c.deletions, c.creations, c.recordDeletions, c.keptErased, c.freshErased, c.shardErased, c.loneErased, c.stoppingErased, c.stoppingTakenOver, c.invalidErased, c.unseenErased, c.unseenRestarted, c.unseenFresh, c.unconfirmedErased, c.unconfirmedRestarted, c.takeovers, c.handovers,
		c.restarts, c.overlaps, c.crashes, c.crashesAfterClaimWrite, c.mixedCase, c.namedTwice, c.spelledErased)
}

func (c *mwCounts) add(o mwCounts) {
	c.edits += o.edits
	c.deletions += o.deletions
	c.creations += o.creations
	c.recordDeletions += o.recordDeletions
	c.keptErased += o.keptErased
	c.freshErased += o.freshErased
	c.shardErased += o.shardErased
	c.loneErased += o.loneErased
	c.stoppingErased += o.stoppingErased
	c.stoppingTakenOver += o.stoppingTakenOver
	c.invalidErased += o.invalidErased
	c.unseenErased += o.unseenErased
	c.unseenRestarted += o.unseenRestarted
	c.unseenFresh += o.unseenFresh
	c.unconfirmedErased += o.unconfirmedErased
	c.unconfirmedRestarted += o.unconfirmedRestarted
	c.takeovers += o.takeovers
	c.passes += o.passes
	c.grantedPasses += o.grantedPasses
	c.grants += o.grants
	c.windows += o.windows
	c.failedTold += o.failedTold
	c.slowStops += o.slowStops
	c.handovers += o.handovers
	c.restarts += o.restarts
	c.overlaps += o.overlaps
	c.crashes += o.crashes
	c.crashesAfterClaimWrite += o.crashesAfterClaimWrite
	c.mixedCase += o.mixedCase
	c.namedTwice += o.namedTwice
	c.spelledErased += o.spelledErased
}

func (r mwResult) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "profile %s: violations=%d %s; converged in %s; %s", r.features, len(r.violations), r.counts, r.converged.Round(time.Millisecond), r.stats)
	for i, v := range r.violations {
		if i == 20 {
			fmt.Fprintf(&b, "\n  ... and %d more", len(r.violations)-i)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(v.Error())
	}
	if len(r.violations) > 0 || os.Getenv(timelineEnv) != "" {
		b.WriteString("\nafter quiescence:")
		b.WriteString(r.state)
		b.WriteString(r.timeline())
	}
	return b.String()
}

// timelineEnv names a key whose timeline a seed's report shows even when
// it reports no violation: to see how a move played out.
const timelineEnv = "CHAOS_TIMELINE"

// caught reports whether some violation breaks rule.
func (r mwResult) caught(rule error) bool {
	return slices.ContainsFunc(r.violations, func(v error) bool { return errors.Is(v, rule) })
}

// claimantKeys is the run's keys function: a Claimant's spec.keys.
func claimantKeys(_ context.Context, obj client.Object) ([]string, error) {
	return obj.(*testclaimant.Claimant).Spec.Keys, nil
}

// faultyWrites injects s's faults into c's writes only. The manager's reads
// come from its cache, which does not fail in a real operator: a failed
// index lookup in an event handler would lose a wake-up the middleware
// cannot be blamed for. Every Lease Delete is told to deleting first. A
// status write of obj fails, before it applies, when statusFails says so
// (an admission policy or RBAC on /status refusing it). claimWritten is called
// after each Lease create or update that applied, before its answer
// returns: where a crash falls between the claim write and the status write.
func faultyWrites(c client.WithWatch, s *chaos.Schedule, deleting func(context.Context, []client.DeleteOption), statusFails func(obj client.Object) bool, claimWritten func(client.Object), rr *releasesRefused) client.WithWatch {
	f := chaos.Wrap(c, s)
	return interceptor.NewClient(c, interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			if statusFails(obj) {
				return apierrors.NewForbidden(schema.GroupResource{Group: "chaos.ocf.dev", Resource: "claimants/status"}, obj.GetName(), errors.New("chaos: the status write was refused"))
			}
			rr.statusWrites.Add(1)
			rr.wrote(obj)
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
		Create: func(ctx context.Context, _ client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			err := f.Create(ctx, obj, opts...)
			if err == nil {
				claimWritten(obj)
			}
			return err
		},
		Update: func(ctx context.Context, _ client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			err := f.Update(ctx, obj, opts...)
			if err == nil {
				claimWritten(obj)
			}
			return err
		},
		Patch: func(ctx context.Context, _ client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			return f.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, _ client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, isLease := obj.(*coordinationv1.Lease); isLease {
				if rr.on.Load() {
					rr.refused.Add(1)
					return apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, obj.GetName(), errors.New("chaos: the operator may not delete Leases"))
				}
				deleting(ctx, opts)
			}
			return f.Delete(ctx, obj, opts...)
		},
	})
}

// releasesRefused is the fault of the run's last move (while on, every
// Lease delete is refused before it applies, as when the operator lost the
// right to delete Leases) and what it counts: the deletes refused, and the
// status writes sent (not refused by statusFails) all run long.
type releasesRefused struct {
	on           atomic.Bool
	refused      atomic.Int64
	statusWrites atomic.Int64

	mu sync.Mutex
	// writers counts, while on, the status writes sent per object, and
	// the reason of the claim condition each wrote last.
	writers map[string]int
	said    map[string]string
	// total counts them for the whole time the fault was on.
	total map[string]int
}

// wrote notes a status write of obj sent while the fault is on.
func (rr *releasesRefused) wrote(obj client.Object) {
	if !rr.on.Load() {
		return
	}
	reason := ""
	if c, ok := obj.(*testclaimant.Claimant); ok {
		for _, cond := range c.Status.Conditions {
			if cond.Type == string(conditions.Claimed) {
				reason = cond.Reason + ": " + cond.Message
			}
		}
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.writers == nil {
		rr.writers = map[string]int{}
	}
	if rr.said == nil {
		rr.said = map[string]string{}
	}
	if rr.total == nil {
		rr.total = map[string]int{}
	}
	rr.writers[obj.GetName()]++
	rr.total[obj.GetName()]++
	rr.said[obj.GetName()] = reason
}

// writersSince describes the objects whose status writes were sent since
// the counts were last reset, and resets them.
func (rr *releasesRefused) writersSince() string {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	var out []string
	for name, n := range rr.writers {
		out = append(out, fmt.Sprintf("%s %d (last %q)", name, n, rr.said[name]))
	}
	slices.Sort(out)
	rr.writers = nil
	return strings.Join(out, "; ")
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
	// actor is the inner reconciler, whose workloads eraseFresh watches.
	actor *actor
	// normalize is the key normalizer of the seed's Claimers, as the
	// checker applies it (canonical); spelling, with the mixed-case
	// profile, draws the spelling of each key the world writes in a spec
	// (nil: keys are written as they are).
	normalize func(string) string
	spelling  *rand.Rand

	outside []outside
	deleted map[types.UID]time.Time
	counts  mwCounts
	// touched are the objects the world edited or took a key over for,
	// which their own pass will read again.
	touched map[types.UID]bool
	// restartAround restarts the process of a shard around what the world
	// does meanwhile (fleet.restartAround).
	restartAround func(shard int, between func()) bool
	// partialCache says the seed's label-sharded processes set
	// claimmw.WithPartialCache: only they can find a holder no process of
	// a restarted shard ever saw.
	partialCache bool
}

// describe words the objects and records, one a line.
func describe(objs []testclaimant.Claimant, leases []coordinationv1.Lease) string {
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

func (w *mwWorld) get(ctx context.Context, t *testing.T, name string) *testclaimant.Claimant {
	t.Helper()
	obj := &testclaimant.Claimant{}
	err := w.admin.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return obj
}

// named returns the keys obj names as the middleware compares them:
// normalized, sorted, each once.
func (w *mwWorld) named(obj *testclaimant.Claimant) []string {
	return namedKeys(obj.Spec.Keys, w.normalize)
}

// spelled returns keys as the world writes them in a spec. With the
// mixed-case profile, each in a spelling drawn at random (spell), and, one
// time in eight, one of them named a second time in a spelling of its own,
// as specs written by hand or by several tools do; as they are otherwise.
// The draws have a stream of their own, so that the other draws of a seed
// are as they were.
func (w *mwWorld) spelled(keys []string) []string {
	if w.spelling == nil {
		return slices.Clone(keys)
	}
	out := make([]string, 0, len(keys)+1)
	for _, k := range keys {
		out = append(out, w.spell(k))
	}
	if len(keys) > 0 && w.spelling.IntN(8) == 0 {
		out = append(out, w.spell(keys[w.spelling.IntN(len(keys))]))
	}
	return out
}

// written counts, in a spec the world wrote, the keys spelled otherwise
// than normalized and whether it names a key twice.
func (w *mwWorld) written(keys []string) {
	for _, k := range keys {
		if k != w.normalize(k) {
			w.counts.mixedCase++
		}
	}
	if len(namedKeys(keys, w.normalize)) < len(keys) {
		w.counts.namedTwice++
	}
}

// spell returns one spelling of key, which the lower-casing normalizer
// maps back to it: as it is, capitalized, upper-cased, or each letter's
// case drawn.
func (w *mwWorld) spell(key string) string {
	key = strings.ToLower(key)
	if key == "" {
		return key
	}
	switch w.spelling.IntN(4) {
	case 0:
		return key
	case 1:
		return strings.ToUpper(key[:1]) + key[1:]
	case 2:
		return strings.ToUpper(key)
	}
	var b strings.Builder
	for _, r := range key {
		if w.spelling.IntN(2) == 0 {
			r = unicode.ToUpper(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (w *mwWorld) create(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	obj := &testclaimant.Claimant{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name, Labels: shardLabels(name)}, Spec: testclaimant.ClaimantSpec{Keys: w.spelled(w.randomKeys())}}
	err := w.admin.Create(ctx, obj)
	switch {
	case apierrors.IsAlreadyExists(err):
	case err != nil:
		t.Fatalf("creating %s: %v", name, err)
	default:
		w.counts.creations++
		w.written(obj.Spec.Keys)
	}
}

// createNaming creates the object named name, naming keys as given (nil:
// none), for a move that makes its own objects, and fails t when the Create
// fails.
func (w *mwWorld) createNaming(ctx context.Context, t *testing.T, name string, keys []string) *testclaimant.Claimant {
	t.Helper()
	obj := &testclaimant.Claimant{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: name, Labels: shardLabels(name)}, Spec: testclaimant.ClaimantSpec{Keys: keys}}
	if err := w.admin.Create(ctx, obj); err != nil {
		t.Fatalf("creating %s: %v", name, err)
	}
	w.counts.creations++
	w.written(obj.Spec.Keys)
	return obj
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
// it on, as a person's kubectl edit would. The keys are written spelled
// (spelled): with the mixed-case profile, in a spelling drawn anew.
func (w *mwWorld) setKeys(ctx context.Context, t *testing.T, obj *testclaimant.Claimant, keys []string) {
	t.Helper()
	w.writeKeys(ctx, t, obj, w.spelled(keys))
}

// writeKeys is setKeys with the keys written as given.
func (w *mwWorld) writeKeys(ctx context.Context, t *testing.T, obj *testclaimant.Claimant, keys []string) {
	t.Helper()
	uid := obj.UID
	for {
		obj.Spec.Keys = slices.Clone(keys)
		err := w.admin.Update(ctx, obj)
		switch {
		case err == nil:
			w.counts.edits++
			w.written(keys)
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
	var objs []*testclaimant.Claimant
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
	for _, obj := range []*testclaimant.Claimant{a, b} {
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
		obj *testclaimant.Claimant
		key string
	}
	var candidates []held
	for _, l := range list.Items {
		key, ok := l.Annotations[backends.DefaultKeyAnnotation]
		if obj, isClaimed := claimed[types.UID(l.Annotations[backends.DefaultHolderUIDAnnotation])]; ok && isClaimed && slices.Contains(w.named(obj), key) && !w.touched[obj.UID] {
			candidates = append(candidates, held{obj, key})
		}
	}
	if len(candidates) == 0 {
		return
	}
	c := candidates[w.rng.IntN(len(candidates))]
	w.touch(c.obj)
	w.setKeys(ctx, t, c.obj, slices.DeleteFunc(slices.Clone(c.obj.Spec.Keys), func(k string) bool { return w.normalize(k) == c.key }))
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

// touch notes, during the last moves, that a move chose obj (its own pass
// will run again, or it lost a record it is not told of): the next moves
// leave it alone.
func (w *mwWorld) touch(obj *testclaimant.Claimant) {
	if w.touched != nil {
		w.touched[obj.UID] = true
	}
}

// claimed returns the live objects that say Claimed=True, by UID.
func (w *mwWorld) claimed(ctx context.Context, t *testing.T) map[types.UID]*testclaimant.Claimant {
	t.Helper()
	out := map[types.UID]*testclaimant.Claimant{}
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
	var claimed map[types.UID]*testclaimant.Claimant
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
			if !ok || !slices.Contains(w.named(h), key) || w.touched[h.UID] {
				continue
			}
		}
		ours = append(ours, l)
	}
	if len(ours) == 0 {
		return
	}
	l := ours[w.rng.IntN(len(ours))]
	if h, ok := claimed[types.UID(l.Annotations[backends.DefaultHolderUIDAnnotation])]; ok {
		w.touch(h)
	}
	w.erase(ctx, t, l)
}

// eraseFresh waits for an object to begin acting for a key and deletes
// that key's record a moment after: a waiter woken by the deletion
// decides while the caches of its process may not yet show the condition
// the holder wrote before it began (the race the check an object makes
// after its own Claimed write, before it acts, must win from a cache that
// has shown that write: mutant FreshCacheAssumed).
func (w *mwWorld) eraseFresh(ctx context.Context, t *testing.T) {
	t.Helper()
	begun := time.Now()
	for time.Since(begun) < freshWait {
		if win, ok := w.actor.newestOpen(begun); ok {
			for _, l := range w.records(ctx, t, win.key) {
				if types.UID(l.Annotations[backends.DefaultHolderUIDAnnotation]) == win.uid {
					w.erase(ctx, t, l)
					w.counts.freshErased++
					return
				}
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// freshWait bounds how long eraseFresh waits for an object to begin acting.
const freshWait = time.Second

// eraseFreshAcrossShards is eraseFresh across the two processes of the
// shards profile, staged so that the waiter decides from a cache of the
// kind that shows the holder naming the key but not yet acting for it. An
// object of the fast shard (the holder) names a key that another object of
// that shard (the previous holder) holds, and waits; no other object names
// it. Then an object of the slow shard (the waiter) is made to name it,
// and the previous holder to give it up: the holder's process sees the
// release fastLeaseLag later and gives the holder the key, before the
// waiter's process (slowCacheLag behind on the kind) sees the waiter name
// it. Once it has, the holder's record is erased: the waiter's process,
// which sees records at once, wakes the waiter, which finds the key free;
// the holder's process sees the erasure, and the waiter's record, only
// fastLeaseLag later. The waiter's cache of the kind never shows its own
// Claimed write within the half second a pass waits for it, and when the
// pass stops waiting, with the sharedCache profile, it still shows the
// holder waiting: the check before the waiter acts must read the holder
// uncached (mutant FreshCacheAssumed trusts that cache). With caches of
// the own shard only, the waiter's cache never shows the holder: its
// process knows it from the records that name it, and must read it
// uncached all the same.
func (w *mwWorld) eraseFreshAcrossShards(ctx context.Context, t *testing.T) {
	t.Helper()
	var live, fast, slow []*testclaimant.Claimant
	for _, name := range w.names {
		obj := w.get(ctx, t, name)
		if obj == nil || obj.DeletionTimestamp != nil {
			continue
		}
		live = append(live, obj)
		if shardOf(obj.Name) == fastShard {
			fast = append(fast, obj)
		} else {
			slow = append(slow, obj)
		}
	}
	if len(fast) < 2 || len(slow) == 0 {
		return
	}
	w.rng.Shuffle(len(fast), func(i, j int) { fast[i], fast[j] = fast[j], fast[i] })
	prev, holder, waiter := fast[0], fast[1], slow[w.rng.IntN(len(slow))]
	key := w.keys[w.rng.IntN(len(w.keys))]
	// Given the previous holder holding the key, the holder waiting for
	// it, and no other object naming it
	for _, obj := range live {
		switch {
		case obj.UID == waiter.UID || obj.UID == holder.UID:
			w.setKeys(ctx, t, obj, nil)
		case obj.UID != prev.UID && slices.Contains(w.named(obj), key):
			w.setKeys(ctx, t, obj, slices.DeleteFunc(slices.Clone(obj.Spec.Keys), func(k string) bool { return w.normalize(k) == key }))
		}
	}
	w.setKeys(ctx, t, prev, []string{key})
	if !w.heldBy(ctx, t, prev, key, true) {
		return
	}
	w.setKeys(ctx, t, holder, []string{key})
	if !w.waitParked(ctx, t, holder) {
		return
	}
	// (every cache shows all that)
	time.Sleep(slowCacheLag[1] + 100*time.Millisecond)
	// When the waiter is made to name the key, and the previous holder to
	// give it up
	begun := time.Now()
	w.setKeys(ctx, t, waiter, []string{key})
	w.setKeys(ctx, t, prev, nil)
	// Then, once the holder acts and the waiter's process has seen the
	// waiter name the key, the holder's record is erased
	for ; time.Since(begun) < slowCacheLag[0]+freshWait; time.Sleep(time.Millisecond) {
		win, ok := w.actor.openFor(holder.UID, key, begun)
		if !ok {
			continue
		}
		time.Sleep(time.Until(begun.Add(slowCacheLag[1] + 30*time.Millisecond)))
		for _, l := range w.records(ctx, t, key) {
			if types.UID(l.Annotations[backends.DefaultHolderUIDAnnotation]) == win.uid {
				w.erase(ctx, t, l)
				w.counts.freshErased++
				w.counts.shardErased++
			}
		}
		return
	}
}

// erase deletes the record l, fenced on the version read, and notes the
// deletion as a fault from outside.
func (w *mwWorld) erase(ctx context.Context, t *testing.T, l coordinationv1.Lease) {
	t.Helper()
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

// eraseKept deletes, while another object waits for it, the record of a
// key a holder keeps without acting for it any more: the loss the checker
// excuses nothing for. The holder names the kept key alone and acts for it
// (after naming nothing first, so that its told pass ends every workload
// it ran, if the key was ever taken over from outside: no expiry takeover
// may excuse what follows); a live object holds a key sorted after it (one
// is made to name that key alone, if none does); the waiter names the kept
// key alone. Then the holder is made to name both keys: it parks keeping
// the record it holds and gives none up, so only its condition says it
// acted, and its reconciler must be told to stop all the same. Once its
// condition says, for that spec, that it acts for nothing, the kept record
// is deleted, again each time the holder creates it anew (keptTries); the
// waiter, woken by the deletion, may create it and act. Had the holder not
// been told, its workload would still run: an overlap.
func (w *mwWorld) eraseKept(ctx context.Context, t *testing.T) {
	t.Helper()
	live := map[types.UID]*testclaimant.Claimant{}
	var free []*testclaimant.Claimant // live objects the move may edit
	for _, name := range w.names {
		if obj := w.get(ctx, t, name); obj != nil && obj.DeletionTimestamp == nil {
			live[obj.UID] = obj
			if !w.touched[obj.UID] {
				free = append(free, obj)
			}
		}
	}
	holder := map[string]types.UID{}
	for _, k := range w.keys {
		if recs := w.records(ctx, t, k); len(recs) > 0 {
			holder[k] = types.UID(recs[0].Annotations[backends.DefaultHolderUIDAnnotation])
		}
	}
	keys := slices.Sorted(slices.Values(w.keys))
	i := w.rng.IntN(len(keys) - 1)
	kept, extra := keys[i], keys[i+1+w.rng.IntN(len(keys)-i-1)]
	take := func(o *testclaimant.Claimant) *testclaimant.Claimant {
		free = slices.DeleteFunc(free, func(x *testclaimant.Claimant) bool { return x.UID == o.UID })
		w.touch(o)
		return o
	}
	pick := func() *testclaimant.Claimant {
		if len(free) == 0 {
			return nil
		}
		return take(free[w.rng.IntN(len(free))])
	}
	// The holder: the kept key's live holder, or any object if none.
	var h *testclaimant.Claimant
	switch j := slices.IndexFunc(free, func(o *testclaimant.Claimant) bool { return o.UID == holder[kept] }); {
	case j >= 0:
		h = take(free[j])
	case live[holder[kept]] == nil:
		h = pick()
	}
	if h == nil {
		return
	}
	if slices.ContainsFunc(w.outside, func(o outside) bool { return o.kind == outsideTakeover && o.key == kept }) {
		w.setKeys(ctx, t, h, nil)
		if !w.heldBy(ctx, t, h, "", false) {
			return
		}
	}
	if !slices.Equal(w.named(h), []string{kept}) || !w.heldBy(ctx, t, h, kept, true) {
		w.setKeys(ctx, t, h, []string{kept})
		if !w.heldBy(ctx, t, h, kept, true) {
			return
		}
	}
	// A live holder of the key after it.
	if o := live[holder[extra]]; o == nil || o.UID == h.UID {
		other := pick()
		if other == nil {
			return
		}
		w.setKeys(ctx, t, other, []string{extra})
		if !w.heldBy(ctx, t, other, extra, true) {
			return
		}
	}
	waiter := pick()
	if waiter == nil {
		return
	}
	if !slices.Equal(w.named(waiter), []string{kept}) {
		w.setKeys(ctx, t, waiter, []string{kept})
	}
	w.setKeys(ctx, t, h, []string{kept, extra})
	// The holder and the waiter, both woken by the deletion, race to create
	// the record again: while the holder wins, it is deleted again.
	for range keptTries {
		if !w.waitParked(ctx, t, h) {
			return
		}
		recs := w.records(ctx, t, kept)
		i := slices.IndexFunc(recs, func(l coordinationv1.Lease) bool {
			return types.UID(l.Annotations[backends.DefaultHolderUIDAnnotation]) == h.UID
		})
		if i < 0 {
			return
		}
		w.erase(ctx, t, recs[i])
		w.counts.keptErased++
		for deadline := time.Now().Add(keptWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if len(w.records(ctx, t, kept)) > 0 {
				break
			}
		}
	}
}

// loneKey is a key no object names until eraseLone gives it to one.
const loneKey = "store-lone"

// loneSettle is how long eraseLone leaves the lone holder alone before it
// deletes the record.
const loneSettle = time.Second

// eraseLone makes an untouched live object name a key no other object
// names, waits until it holds the key and says Claimed, and deletes the
// record. Nothing else names the key, so no waiter's condition change can
// wake the holder: only the record's own events can, and a holder they do
// not reach says Claimed for a key it no longer holds.
func (w *mwWorld) eraseLone(ctx context.Context, t *testing.T) {
	t.Helper()
	var o *testclaimant.Claimant
	for _, name := range w.names {
		if obj := w.get(ctx, t, name); obj != nil && obj.DeletionTimestamp == nil && !w.touched[obj.UID] {
			o = obj
			break
		}
	}
	if o == nil {
		return
	}
	w.touch(o)
	w.setKeys(ctx, t, o, []string{loneKey})
	if !w.heldBy(ctx, t, o, loneKey, true) {
		return
	}
	// The passes its own writes set off run first: a pass after the
	// deletion would find it whatever wakes the holder.
	time.Sleep(loneSettle)
	for _, l := range w.records(ctx, t, loneKey) {
		if types.UID(l.Annotations[backends.DefaultHolderUIDAnnotation]) == o.UID {
			w.erase(ctx, t, l)
			w.counts.loneErased++
		}
	}
}

// stoppingKey, stoppingHolder and stoppingWaiter are the key and the
// objects of eraseStopping, which nothing else in the world names.
const (
	stoppingKey    = "store-stopping"
	stoppingHolder = "stopping-holder"
	stoppingWaiter = "stopping-waiter"
)

// stoppingWait is how long eraseStopping holds the holder's told pass back
// after the record is gone: time for the waiter to take the key.
const stoppingWait = 1500 * time.Millisecond

// eraseStopping deletes the record of an object that stopped naming any
// key while its told pass still runs (a slow cleanup), as another object
// waits for the key. A holder acts for the key until that pass succeeds,
// so its condition must keep saying it may act, whatever its key set says:
// the waiter, woken by the deletion, must find it so and wait. The move
// makes its own two objects and key, so that nothing else in the world
// wakes either of them. Then it plays the same with an expiry takeover in
// place of the deletion, the roles swapped: the release after the told pass
// must leave alone the record the taker holds now.
func (w *mwWorld) eraseStopping(ctx context.Context, t *testing.T) {
	t.Helper()
	// A move that cannot be staged says so: a seed that never plays it
	// proves nothing about the routes it is for.
	gaveUp := func(why string) { t.Logf("eraseStopping: not played further: %s", why) }
	h := w.createNaming(ctx, t, stoppingHolder, w.spelled([]string{stoppingKey}))
	if !w.heldBy(ctx, t, h, stoppingKey, true) {
		gaveUp("the holder did not come to hold the key")
		return
	}
	waiter := w.createNaming(ctx, t, stoppingWaiter, w.spelled([]string{stoppingKey}))
	if !w.waitParked(ctx, t, waiter) {
		gaveUp("the waiter did not park")
		return
	}
	if !w.whileStopping(ctx, t, h, func() {
		for _, l := range w.records(ctx, t, stoppingKey) {
			if types.UID(l.Annotations[backends.DefaultHolderUIDAnnotation]) == h.UID {
				w.erase(ctx, t, l)
				w.counts.stoppingErased++
			}
		}
		time.Sleep(stoppingWait)
	}) {
		gaveUp("the holder's told pass did not come")
		return
	}
	// Then the other way round, with the key taken over by expiry instead:
	// the waiter, now the holder, stops naming the key, and while its told
	// pass runs the key is taken over for the first object, which names it
	// again. The release that follows the told pass must leave the taker's
	// record alone.
	h, holder := w.get(ctx, t, stoppingHolder), w.get(ctx, t, stoppingWaiter)
	if h == nil || holder == nil || !w.heldBy(ctx, t, holder, stoppingKey, true) {
		gaveUp("the waiter did not come to hold the key")
		return
	}
	w.setKeys(ctx, t, h, []string{stoppingKey})
	if !w.waitParked(ctx, t, h) {
		gaveUp("the first holder did not park behind the waiter")
		return
	}
	if !w.whileStopping(ctx, t, holder, func() {
		if w.takeOverFor(ctx, t, h, stoppingKey) {
			w.counts.stoppingTakenOver++
		}
	}) {
		gaveUp("the waiter's told pass did not come")
	}
}

// invalidKey, invalidHolder and invalidWaiter are the key and the objects
// of eraseInvalid, which nothing else in the world names; badKey is a key
// no Claimer accepts (claim.ValidateKey: it is empty).
const (
	invalidKey    = "store-invalid"
	invalidHolder = "invalid-holder"
	invalidWaiter = "invalid-waiter"
	badKey        = ""
)

// eraseInvalid gives a holder of a key, for which another object waits, a
// spec whose keys cannot be computed (it names an invalid key beside the
// one it holds), and deletes the record of the key it holds once its
// condition says what blocks it (InvalidKey). It acted for the key: that
// condition may come only after a told pass succeeded, so the waiter,
// woken by the deletion, must find it acting for nothing before it takes
// the key. At the end its spec names nothing, so that the world settles.
// The move makes its own two objects and key, so that nothing else in the
// world wakes either of them.
func (w *mwWorld) eraseInvalid(ctx context.Context, t *testing.T) {
	t.Helper()
	gaveUp := func(why string) { t.Logf("eraseInvalid: not played further: %s", why) }
	h := w.createNaming(ctx, t, invalidHolder, w.spelled([]string{invalidKey}))
	defer w.namesNothing(ctx, t, h)
	if !w.heldBy(ctx, t, h, invalidKey, true) {
		gaveUp("the holder did not come to hold the key")
		return
	}
	waiter := w.createNaming(ctx, t, invalidWaiter, w.spelled([]string{invalidKey}))
	if !w.waitParked(ctx, t, waiter) {
		gaveUp("the waiter did not park")
		return
	}
	if h = w.get(ctx, t, invalidHolder); h == nil {
		gaveUp("the holder is gone")
		return
	}
	w.setKeys(ctx, t, h, []string{invalidKey, badKey})
	if !w.waitParked(ctx, t, h) {
		gaveUp("the holder did not say what blocks it")
		return
	}
	for _, l := range w.records(ctx, t, invalidKey) {
		if types.UID(l.Annotations[backends.DefaultHolderUIDAnnotation]) == h.UID {
			w.erase(ctx, t, l)
			w.counts.invalidErased++
		}
	}
	// Time for the waiter to take the key and act.
	time.Sleep(stoppingWait)
}

// unseenKey, unseenHolder and unseenWaiter are the key and the objects of
// eraseUnseen, which nothing else in the world names: the holder is of the
// fast shard, the waiter of the slow one (shardOf).
const (
	unseenKey    = "store-unseen"
	unseenHolder = "unseen-holder-0"
	unseenWaiter = "unseen-waiter-1"
)

// eraseUnseen (shards profile, caches not shared) deletes the record of a
// holder of one shard while it acts and an object of the other shard waits
// for the key. The waiter's process never shows the holder in its cache:
// it knows of it only from the records that name it, and every event of
// those records asks it to reconcile the holder, a pass that finds nothing
// in its cache. Woken by the deletion, the waiter must find the holder
// still acting, read uncached, and wait (mutant UnseenHolderForgotten:
// that pass forgets the holder, so the waiter finds no object that may
// act for the key and acts beside it). The holder's passes in its own
// shard's process are slow to begin meanwhile (holdPasses: a busy
// controller; its workload runs on), so that neither that process's late
// sight of the deletion (fastLeaseLag) nor a renewal that finds the record
// gone has it write the record again before the waiter decides. The
// waiter's pass and the holder's pass its process is asked for run at
// once, in either order: while the waiter waits, the holder is let go,
// holds the key again, and its record is deleted again, up to unseenTries
// times; the second time, with the partialCache profile, the waiter's
// process is stopped before the deletion and its replacement started after
// it (fleet.restartAround), so that no process of the waiter's shard ever
// saw a record name the holder: only an uncached listing of the kind finds
// it (claimmw.WithPartialCache; mutant PartialCacheTrusted asks only the
// cache and the process's memory, and the waiter acts beside the holder).
// finish, called once the faults stopped, has the holder name nothing,
// so that the waiter takes the key and the world settles. When the
// holder's stop was held, it first restarts the waiter's process and
// waits for the waiter's first pass there, which finds the holder still
// acting, and for its shard to be quiet: no pass of the waiter that a
// fault failed is then retried after its backoff, no late event of its own
// writes and no object there that stops acting wakes it (any would find
// the holder stopped by chance), and no event of the holder reaches the
// waiter's process, which must ask again (mutant
// UnseenPredecessorNotPolled). The move makes its own two objects
// and key, so that nothing else in the world wakes either of them.
func (w *mwWorld) eraseUnseen(ctx context.Context, t *testing.T) (finish func()) {
	t.Helper()
	gaveUp := func(why string) { t.Logf("eraseUnseen: not played further: %s", why) }
	h, waiter, why := w.holderAndWaiter(ctx, t, unseenKey, unseenHolder, unseenWaiter)
	stopLater := false
	finish = func() {
		if stopLater {
			// Once the faults stopped, the waiter's process starts afresh:
			// no pass of the waiter that a fault failed is retried after
			// its backoff, and the waiter's first pass there finds the
			// holder still acting. The holder is let go once no pass has
			// begun in the waiter's shard for longer than its cache lags:
			// the events of what the waiter wrote in that pass wake it
			// (once), and an object there that stops acting wakes every
			// object waiting in its process. Only asking again then tells
			// the waiter that the holder stopped. (A waiter that asks
			// again every second keeps its shard from being quiet: the
			// wait ends at its bound.)
			at := time.Now()
			shard := shardOf(unseenWaiter)
			if w.restartAround(shard, func() {}) && w.actor.passEnded(waiter.UID, at, unseenFreshWait) {
				w.counts.unseenFresh++
				w.actor.quietIn(shard, unseenQuiet, unseenQuietWait)
			}
			w.actor.letGo(h.UID)
		}
		w.namesNothing(ctx, t, h)
	}
	if why != "" {
		gaveUp(why)
		return finish
	}
	for round := range unseenTries {
		if round > 0 && (!w.heldBy(ctx, t, h, unseenKey, true) || !w.waitParked(ctx, t, waiter)) {
			return finish
		}
		letGo := w.actor.holdPasses(unseenHolder, shardOf(unseenHolder))
		erase := func() {
			for _, l := range w.records(ctx, t, unseenKey) {
				if types.UID(l.Annotations[backends.DefaultHolderUIDAnnotation]) == h.UID {
					w.erase(ctx, t, l)
					w.counts.unseenErased++
				}
			}
		}
		if round == 1 && w.partialCache {
			// The waiter's process restarts around the deletion: the new
			// one never saw a record that named the holder. The holder's
			// stop then waits for finish, once nothing but asking again
			// can tell the waiter that it stopped.
			if w.restartAround(shardOf(unseenWaiter), erase) {
				w.counts.unseenRestarted++
			}
			w.actor.holdStops(h.UID)
			stopLater = true
		} else {
			erase()
		}
		// Time for the waiter to take the key and act, while the holder's
		// passes are held back.
		time.Sleep(stoppingWait)
		letGo()
		if _, took := w.actor.openFor(waiter.UID, unseenKey, time.Time{}); took {
			return finish
		}
	}
	return finish
}

// unconfirmedKey, unconfirmedHolder and unconfirmedWaiter are the key and
// the objects of eraseUnconfirmed, which nothing else in the world names:
// the holder is of the fast shard, the waiter of the slow one (shardOf).
const (
	unconfirmedKey    = "store-unconfirmed"
	unconfirmedHolder = "unconfirmed-holder-0"
	unconfirmedWaiter = "unconfirmed-waiter-1"
)

// eraseUnconfirmed (partialCache profile) deletes the record of a holder
// of one shard while it acts and an object of the other shard waits for
// its key, while the waiter's status writes that say it waits
// (WaitingForHandover) are refused (an admission policy, for a while) and
// the holder's passes are held back (a busy controller; its workload runs
// on, and a told pass of it, once one begins, waits for the end of the
// move). The deletion is made while the waiter's shard has no process
// (fleet.restartAround): its new process, woken, writes the record, says
// Claimed (that write applies), finds the holder still acting by the
// uncached listing, and cannot say it waits: the API server says Claimed
// for it, and it holds the record. Then the waiter's process restarts
// again: the new one must not take that Claimed for a confirmed grant (mutant
// UnconfirmedClaimTrusted: it counts as acting, and the waiter acts beside
// the holder). After keptWait (or once the waiter acted) the writes are
// let through and the holder is let go; at the end the holder names nothing, so that the
// waiter takes the key and the world settles.
func (w *mwWorld) eraseUnconfirmed(ctx context.Context, t *testing.T) {
	t.Helper()
	gaveUp := func(why string) { t.Logf("eraseUnconfirmed: not played further: %s", why) }
	holderShard, waiterShard := shardOf(unconfirmedHolder), shardOf(unconfirmedWaiter)
	h, waiter, why := w.holderAndWaiter(ctx, t, unconfirmedKey, unconfirmedHolder, unconfirmedWaiter)
	defer w.namesNothing(ctx, t, h)
	if why != "" {
		gaveUp(why)
		return
	}
	letGo := w.actor.holdPasses(unconfirmedHolder, holderShard)
	defer letGo()
	// A held pass goes on after slowPassesMax: one that finds the key
	// taken is told to stop, and that stop waits for the end of the move,
	// so that the holder still acts while the waiter decides.
	w.actor.holdStops(h.UID)
	defer w.actor.letGo(h.UID)
	w.actor.refuseWaiting(waiter.UID)
	defer w.actor.allowStatus(waiter.UID)
	// The deletion is made while the waiter's shard has no process: the
	// new one never saw a record name the holder, and its cache does not
	// show it, so the check before the waiter writes its condition misses
	// it, and only the check after that write finds it.
	w.restartAround(waiterShard, func() {
		for _, l := range w.records(ctx, t, unconfirmedKey) {
			if types.UID(l.Annotations[backends.DefaultHolderUIDAnnotation]) == h.UID {
				w.erase(ctx, t, l)
				w.counts.unconfirmedErased++
			}
		}
	})
	if !w.heldBy(ctx, t, waiter, unconfirmedKey, true) {
		gaveUp("the waiter did not write the record and say Claimed")
		return
	}
	if w.restartAround(waiterShard, func() {}) {
		w.counts.unconfirmedRestarted++
	}
	// Time for the waiter to act, while the holder's passes are held back:
	// its first passes in the new process may fail (injected faults).
	for deadline := time.Now().Add(keptWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, took := w.actor.openFor(waiter.UID, unconfirmedKey, time.Time{}); took {
			return
		}
	}
}

// holderAndWaiter creates the object named holder, naming key (in a
// spelling of its own), and once it holds the key and acts for it, the
// object named waiter, naming key too, and waits until the waiter parked.
// h is the holder as created; why, when not empty, says which of those
// did not come to be (the waiter is then nil or not parked).
func (w *mwWorld) holderAndWaiter(ctx context.Context, t *testing.T, key, holder, waiter string) (h, wt *testclaimant.Claimant, why string) {
	t.Helper()
	h = w.createNaming(ctx, t, holder, w.spelled([]string{key}))
	// A new object of a busy process may take a while to hold its key:
	// up to three times keptWait.
	if !w.heldBy(ctx, t, h, key, true) && !w.heldBy(ctx, t, h, key, true) && !w.heldBy(ctx, t, h, key, true) {
		return h, nil, "the holder did not come to hold the key"
	}
	acting := false
	for deadline := time.Now().Add(keptWait); !acting && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, acting = w.actor.openFor(h.UID, key, time.Time{})
	}
	if !acting {
		return h, nil, "the holder did not act for the key"
	}
	wt = w.createNaming(ctx, t, waiter, w.spelled([]string{key}))
	if !w.waitParked(ctx, t, wt) {
		return h, wt, "the waiter did not park"
	}
	return h, wt, ""
}

// namesNothing has h, if it still exists and is not being deleted, name no
// key.
func (w *mwWorld) namesNothing(ctx context.Context, t *testing.T, h *testclaimant.Claimant) {
	t.Helper()
	if obj := w.get(ctx, t, h.Name); obj != nil && obj.UID == h.UID && obj.DeletionTimestamp == nil {
		w.setKeys(ctx, t, obj, nil)
	}
}

// unseenFreshWait bounds how long eraseUnseen's finish waits for the
// waiter's first pass in its restarted process; unseenQuietWait how long it
// then waits for unseenQuiet, longer than the slow shard's cache lags
// (slowCacheLag), without a pass in the waiter's shard.
const (
	unseenFreshWait = 5 * time.Second
	unseenQuiet     = 2500 * time.Millisecond
	unseenQuietWait = 8 * time.Second
)

// unseenTries bounds how often eraseUnseen deletes the holder's record.
const unseenTries = 3

// spelledKey, spelledHolder and spelledWaiter are the key and the objects
// of eraseSpelled, which nothing else in the world names. The waiter's
// name sorts first: objects created within the same second are ordered by
// name (claim's fairness order), and the waiter is to be the older.
const (
	spelledKey    = "store-spelled"
	spelledHolder = "spelled-b-holder"
	spelledWaiter = "spelled-a-waiter"
)

// eraseSpelled (mixed-case profile) deletes the record of a holder that
// names its key in another spelling than the object waiting for it, while
// the holder cannot say that it stopped: its status writes are refused (an
// admission policy, for a while) and its told passes are held back (a slow
// cleanup). Its condition keeps saying Claimed=True for the keys it names,
// and it acts until its told pass succeeds, so the waiter, woken by the
// deletion, must find it naming the key, whatever the spelling, and wait
// (mutant RawKeyCompared compares the holder's spelling with the waiter's
// normalized key, and acts beside it). The holder, woken too, may create
// the record anew first: it is deleted again, up to keptTries times. The
// move ends once the key stood without a record for stoppingWait after the
// last deletion (the waiter waited), or stoppingWait after the waiter took
// it. It makes its own two objects and key, so that nothing else in the
// world wakes either of them; the waiter is the older, so that with the
// fairness profile it does not yield the free key to the holder.
func (w *mwWorld) eraseSpelled(ctx context.Context, t *testing.T) {
	t.Helper()
	gaveUp := func(why string) { t.Logf("eraseSpelled: not played further: %s", why) }
	// The waiter is the older object, so that with the fairness profile it
	// does not yield the free key to the holder, which names it too.
	waiter := w.createNaming(ctx, t, spelledWaiter, nil)
	h := w.createNaming(ctx, t, spelledHolder, []string{strings.ToUpper(spelledKey)})
	if !w.heldBy(ctx, t, h, spelledKey, true) {
		gaveUp("the holder did not come to hold the key")
		return
	}
	if waiter = w.get(ctx, t, spelledWaiter); waiter == nil {
		gaveUp("the waiter is gone")
		return
	}
	w.writeKeys(ctx, t, waiter, []string{spelledKey})
	if !w.waitParked(ctx, t, waiter) {
		gaveUp("the waiter did not park")
		return
	}
	w.actor.refuseStatus(h.UID)
	entered := w.actor.holdStops(h.UID)
	defer func() {
		w.actor.allowStatus(h.UID)
		w.actor.letGo(h.UID)
	}()
	// The holder's record is deleted, and again each time the holder
	// creates it anew (a pass that met injected faults retries after its
	// backoff, a crashed process is replaced: spelledWait). The waiter,
	// woken each time, asks whether the holder may still act before it
	// writes a record: it must wait, and the key stays without a record,
	// until the move ends stoppingWait after the last deletion. A waiter
	// that takes the key is given that time to act, while the holder's
	// told pass is held back.
	erased, last := 0, time.Time{}
	for deadline := time.Now().Add(spelledWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		recs := w.records(ctx, t, spelledKey)
		if len(recs) == 0 && erased > 0 && time.Since(last) > stoppingWait {
			return
		}
		for _, l := range recs {
			switch types.UID(l.Annotations[backends.DefaultHolderUIDAnnotation]) {
			case waiter.UID:
				select {
				case <-entered:
				case <-time.After(keptWait):
				}
				time.Sleep(stoppingWait)
				return
			case h.UID:
				if erased < keptTries {
					w.erase(ctx, t, l)
					w.counts.spelledErased++
					erased, last = erased+1, time.Now()
				}
			}
		}
	}
	if erased == 0 {
		gaveUp("the holder's record was never deleted")
	}
}

// spelledWait bounds how long eraseSpelled runs once the holder cannot
// say that it stopped.
const spelledWait = 10 * time.Second

// whileStopping empties the key set of h, which holds a key, and runs
// during while its told pass is held back, then lets that pass go on. It
// reports whether the told pass came within keptWait.
func (w *mwWorld) whileStopping(ctx context.Context, t *testing.T, h *testclaimant.Claimant, during func()) bool {
	t.Helper()
	entered := w.actor.holdStops(h.UID)
	defer w.actor.letGo(h.UID)
	w.setKeys(ctx, t, h, nil)
	select {
	case <-entered:
	case <-time.After(keptWait):
		return false
	}
	during()
	return true
}

// keptTries bounds how often eraseKept deletes the kept record.
const keptTries = 8

// heldBy waits, at most keptWait, until o holds the record of key and says
// Claimed=True for its current spec (held true), or holds no record at all
// (key empty, held false); it reports whether that came to be.
func (w *mwWorld) heldBy(ctx context.Context, t *testing.T, o *testclaimant.Claimant, key string, held bool) bool {
	t.Helper()
	for deadline := time.Now().Add(keptWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var list coordinationv1.LeaseList
		if err := w.admin.List(ctx, &list, client.InNamespace(w.ns)); err != nil {
			t.Fatalf("listing records: %v", err)
		}
		has := slices.ContainsFunc(list.Items, func(l coordinationv1.Lease) bool {
			return types.UID(l.Annotations[backends.DefaultHolderUIDAnnotation]) == o.UID &&
				(key == "" || l.Annotations[backends.DefaultKeyAnnotation] == key)
		})
		if has != held {
			continue
		}
		if !held {
			return true
		}
		if obj := w.get(ctx, t, o.Name); obj != nil && obj.UID == o.UID && claimedTrue(obj) &&
			meta.FindStatusCondition(obj.Status.Conditions, string(conditions.Claimed)).ObservedGeneration == obj.Generation {
			return true
		}
	}
	return false
}

// waitParked waits, at most keptWait, until h's condition says, for its
// current spec, that it acts for nothing (False, not Stopping): the pass
// that judged the spec eraseKept set has ended. It reports whether that
// came to be; the record is erased only then, when the holder was to have
// been told.
func (w *mwWorld) waitParked(ctx context.Context, t *testing.T, h *testclaimant.Claimant) bool {
	t.Helper()
	for deadline := time.Now().Add(keptWait); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		obj := w.get(ctx, t, h.Name)
		if obj == nil || obj.UID != h.UID || obj.DeletionTimestamp != nil {
			return false
		}
		if c := meta.FindStatusCondition(obj.Status.Conditions, string(conditions.Claimed)); c != nil && c.ObservedGeneration == obj.Generation &&
			c.Status != metav1.ConditionTrue && c.Reason != string(conditions.ReasonStopping) {
			return true
		}
	}
	return false
}

// records reads the records of key, uncached.
func (w *mwWorld) records(ctx context.Context, t *testing.T, key string) []coordinationv1.Lease {
	t.Helper()
	var list coordinationv1.LeaseList
	if err := w.admin.List(ctx, &list, client.InNamespace(w.ns)); err != nil {
		t.Fatalf("listing records: %v", err)
	}
	return slices.DeleteFunc(list.Items, func(l coordinationv1.Lease) bool { return l.Annotations[backends.DefaultKeyAnnotation] != key })
}

// keptWait bounds how long eraseKept waits for the holder to park, and
// for the record to be created again.
const keptWait = 3 * time.Second

// claimedTrue reports whether obj's condition says Claimed=True.
func claimedTrue(obj *testclaimant.Claimant) bool {
	c := meta.FindStatusCondition(obj.Status.Conditions, string(conditions.Claimed))
	return c != nil && c.Status == metav1.ConditionTrue
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
	w.touch(obj)
	w.takeOverFor(ctx, t, obj, held[w.rng.IntN(len(held))])
}

// takeOverFor takes key over for obj by expiry, as another replica whose
// liveness judges the holder expired would, and notes it as a fault from
// outside; it reports whether the record now names obj.
func (w *mwWorld) takeOverFor(ctx context.Context, t *testing.T, obj *testclaimant.Claimant, key string) bool {
	t.Helper()
	self, err := w.expiry.HolderOf(obj)
	if err != nil {
		t.Fatal(err)
	}
	invoked := time.Now()
	_, o, err := w.expiry.Acquire(ctx, key, self)
	if err != nil {
		t.Logf("expiry takeover of %q for %s: %v", key, obj.Name, err)
		return false
	}
	if o.Reason == claim.ReasonTakenOver {
		w.outside = append(w.outside, outside{kind: outsideTakeover, key: o.Key, holder: obj.UID, invoked: invoked, returned: time.Now()})
		w.counts.takeovers++
	}
	return o.Granted()
}

// seedRecords writes, for about half the objects, the records of the keys
// they name as an older version of the operator would have (cfg: before
// the labels, or before claim sets): the operator finds them on re-entry.
func (w *mwWorld) seedRecords(ctx context.Context, t *testing.T, cfg claim.Config) {
	t.Helper()
	old, err := claim.New(w.admin, w.admin, cfg, claim.WithBackend(lease.Backend))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range w.names {
		obj := w.get(ctx, t, name)
		if obj == nil || w.rng.IntN(2) == 0 {
			continue
		}
		self, err := old.HolderOf(obj)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range obj.Spec.Keys {
			if _, _, err := old.Acquire(ctx, k, self); err != nil {
				t.Fatalf("writing an older version's record of %q: %v", k, err)
			}
		}
	}
}

// askHandover asks a holder to hand its keys to another object that names
// one of them, by the annotation the handover profile's HandoverFunc reads,
// and withdraws every other standing request.
func (w *mwWorld) askHandover(ctx context.Context, t *testing.T) {
	t.Helper()
	claimed := w.claimed(ctx, t)
	var holders []*testclaimant.Claimant
	for _, o := range claimed {
		holders = append(holders, o)
	}
	slices.SortFunc(holders, func(a, b *testclaimant.Claimant) int { return strings.Compare(a.Name, b.Name) })
	if len(holders) == 0 {
		return
	}
	from := holders[w.rng.IntN(len(holders))]
	var to []string
	for _, name := range w.names {
		if o := w.get(ctx, t, name); o != nil && o.UID != from.UID && o.DeletionTimestamp == nil &&
			slices.ContainsFunc(w.named(o), func(k string) bool { return slices.Contains(w.named(from), k) }) {
			to = append(to, name)
		}
	}
	if len(to) == 0 {
		return
	}
	// One standing request at a time: requests in a cycle (a to b, b to a)
	// would ask for a handover loop, which the middleware rightly obeys.
	for _, name := range w.names {
		if o := w.get(ctx, t, name); o != nil && o.UID != from.UID && o.Annotations[handoverAnnotation] != "" {
			clear := client.MergeFrom(o.DeepCopyObject().(client.Object))
			delete(o.Annotations, handoverAnnotation)
			if err := w.admin.Patch(ctx, o, clear); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				t.Fatalf("withdrawing the handover request of %s: %v", o.Name, err)
			}
		}
	}
	patch := client.MergeFrom(from.DeepCopyObject().(client.Object))
	if from.Annotations == nil {
		from.Annotations = map[string]string{}
	}
	from.Annotations[handoverAnnotation] = to[w.rng.IntN(len(to))]
	if err := w.admin.Patch(ctx, from, patch); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		t.Fatalf("asking %s for a handover: %v", from.Name, err)
	}
	w.counts.handovers++
}

// state reads every object and record, uncached.
func (w *mwWorld) state(ctx context.Context, t *testing.T) ([]testclaimant.Claimant, []coordinationv1.Lease) {
	t.Helper()
	var objs testclaimant.ClaimantList
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
	obj := &testclaimant.Claimant{}
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

// TestMiddlewareChaos is the randomized run at the middleware level: six
// Claimants under real operator processes contend for three keys while
// their key sets are edited, they are deleted and recreated, records are
// deleted (among them the record a holder made to wait keeps, while another
// object waits for its key) and taken over from outside, handovers are
// asked for and the operator restarts, and the operators' API calls meet
// conflicts, timeouts, throttling, lost responses, delays and refused
// status writes; each seed draws its profiles (mwFeatures). The checker
// judges the acting windows of the inner reconciler's workloads and the
// state after quiescence. It runs 3 seeds by default; `make chaos
// SEEDS=N` runs N, and -seed=N (or CHAOS_SEED=N) replays one.
//
// With a mutant switched on (CHAOS_MUTANT, see internal/mutant) the test
// expects the opposite: it stops at the first seed that reports a
// violation, and fails when none of its seeds does.
func TestMiddlewareChaos(t *testing.T) {
	m, err := mutant.Active()
	if err != nil {
		t.Fatal(err)
	}
	// A source of a process stopped before its caches synced logs through
	// controller-runtime's global logger; the checker, not the log, judges.
	ctrllog.SetLogger(quiet)
	list := seeds(t)
	total := mwCounts{}
	stats := &chaos.Stats{}
	violations := 0
	for i, seed := range list {
		// Given six objects, three keys and the seed's profiles
		// When the world and the faults act for one seed, then stop
		res := mwSmall.play(t, seed)
		total.add(res.counts)
		stats.Add(res.stats)
		violations += len(res.violations)
		if m != "" {
			if len(res.violations) > 0 {
				t.Logf("mutant %s caught at seed %d (seed %d of at most %d): %s", m, seed, i+1, len(list), res.report())
				return
			}
			t.Logf("mutant %s: seed %d reports nothing (profile %s: %s)", m, seed, res.features, res.counts)
			if os.Getenv(timelineEnv) != "" {
				t.Log(res.report())
			}
			continue
		}
		// Then every promise of the middleware holds
		if len(res.violations) > 0 {
			t.Errorf("seed %d: %s\nreplay: go test ./internal/chaos/ -run '^TestMiddlewareChaos$' -seed=%d  (or CHAOS_SEED=%d make chaos)",
				seed, res.report(), seed, seed)
		} else {
			t.Logf("seed %d: profile %s: %s", seed, res.features, res.counts)
		}
		if res.counts.grants == 0 {
			t.Errorf("seed %d granted nothing: the run proves nothing", seed)
		}
	}
	if m != "" {
		t.Fatalf("mutant %s: none of %d seeds reports a violation", m, len(list))
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

// mwBroken is the run the tests that break a piece start from: the same
// world and faults in the plain profile (no restart or renewal heals what
// the broken piece leaves behind), a shorter wait for a convergence that
// may never come.
var mwBroken = func() mwRun {
	r := mwSmall
	r.quiet = 5 * time.Second
	r.features = &mwFeatures{}
	return r
}()

// TestMiddlewareChaosCatchesWakingOnlyWaiters: a record's change reaches only
// objects that do not say Claimed=True, so a holder whose record was deleted
// or taken over is never told and goes on saying Claimed.
func TestMiddlewareChaosCatchesWakingOnlyWaiters(t *testing.T) {
	// Given the run with record events delivered to waiters only
	r := mwBroken
	r.wakeOnlyWaiters = true
	// and a world whose last moves begin with a Claimed holder's record
	// deleted
	r.lossFirst = true
	// When it runs, Then an object says Claimed=True for a key it lost, or,
	// when a waiter's change to WaitingForHandover wakes the holder after all
	// and its next pass is too late, two objects act for one key
	catches(t, r, 8, errClaimedNotHeld, errOverlap)
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
	obj := &testclaimant.Claimant{}
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
	// When it runs, Then a record is deleted whose holder was never told,
	// or a deletion pass, given every record as its own, acts for keys
	// other objects hold
	catches(t, r, 5, errUntoldRelease, errUnbacked)
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

// readsOwnWrites wraps c so that a Get of a Claimant answers with the
// version c itself wrote last (create, update, patch, status patch), when
// that is newer than what c's cache shows: a client that reads its own
// writes, as some caching layers do. Its Lists still answer from the cache,
// which may not show that write, nor the writes of others before it.
func readsOwnWrites(c client.WithWatch) client.WithWatch {
	var mu sync.Mutex
	written := map[types.NamespacedName]*testclaimant.Claimant{}
	note := func(obj client.Object, err error) error {
		if o, ok := obj.(*testclaimant.Claimant); ok && err == nil {
			mu.Lock()
			written[client.ObjectKeyFromObject(o)] = o.DeepCopyObject().(*testclaimant.Claimant)
			mu.Unlock()
		}
		return err
	}
	newer := func(a, b string) bool {
		x, errA := strconv.ParseUint(a, 10, 64)
		y, errB := strconv.ParseUint(b, 10, 64)
		return errA == nil && errB == nil && x > y
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if err := c.Get(ctx, key, obj, opts...); err != nil {
				return err
			}
			o, ok := obj.(*testclaimant.Claimant)
			if !ok {
				return nil
			}
			mu.Lock()
			w := written[key]
			mu.Unlock()
			if w != nil && w.UID == o.UID && newer(w.ResourceVersion, o.ResourceVersion) {
				*o = *w.DeepCopyObject().(*testclaimant.Claimant)
			}
			return nil
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return note(obj, c.Create(ctx, obj, opts...))
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return note(obj, c.Update(ctx, obj, opts...))
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			return note(obj, c.Patch(ctx, obj, p, opts...))
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			return note(obj, c.SubResource(sub).Patch(ctx, obj, p, opts...))
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return note(obj, c.SubResource(sub).Update(ctx, obj, opts...))
		},
	})
}

// TestMiddlewareChaosCatchesAClientThatReadsItsOwnWrites: the check an
// object makes before it starts acting takes the manager's cache for fresh
// once a read of the object shows the object's own Claimed write; a client
// that answers that read from its own writes, not from the cache its lists
// come from, makes a stale cache look fresh (what mutant FreshCacheAssumed
// does inside the middleware).
func TestMiddlewareChaosCatchesAClientThatReadsItsOwnWrites(t *testing.T) {
	// Given two shards whose informers lag differently, each process
	// caching every object (the waiter's cache shows the holder) and its
	// client reading its own writes, and a world that begins with the
	// erasure staged across the shards
	r := mwBroken
	r.features = &mwFeatures{shards: true, sharedCache: true}
	r.readsOwnWrites = true
	r.acrossShards = 3
	r.steps = 10
	// When it runs, Then the waiter acts while the holder its cache shows
	// waiting still acts
	catches(t, r, 3, errOverlap)
}

// timeline lists what happened to key around the first violation that
// names it: the passes that were given it or told of it, the versions of
// its record, the faults from outside and the process overlaps. It is what
// a reader of a failing seed needs to replay the interleaving by hand.
func (r mwResult) timeline() string {
	key := os.Getenv(timelineEnv)
	for _, v := range r.violations {
		if key != "" {
			break
		}
		var vv violation
		if errors.As(v, &vv) && vv.key != "" {
			key = vv.key
			break
		}
	}
	if key == "" {
		return ""
	}
	type line struct {
		at   time.Time
		what string
	}
	var lines []line
	h := r.history
	has := func(gs []claimmw.Grant) string {
		for _, g := range gs {
			if g.Key == key {
				return string(g.Token)
			}
		}
		return ""
	}
	actors := map[types.UID]bool{}
	for _, a := range h.acts {
		if has(a.acted) != "" {
			actors[a.uid] = true
		}
	}
	for _, a := range h.acts {
		var parts []string
		if t := has(a.acted); t != "" {
			parts = append(parts, "acted "+t)
		}
		if len(parts) == 0 && actors[a.uid] {
			var keys []string
			for _, g := range a.state.Grants {
				keys = append(keys, g.Key)
			}
			parts = append(parts, fmt.Sprintf("told (grants %q)", keys))
		}
		if t := has(a.state.Releasing); t != "" {
			parts = append(parts, "releasing "+t)
		}
		for _, ho := range a.state.Handovers {
			if ho.Key == key {
				parts = append(parts, "handing over to "+string(ho.Successor.UID))
			}
		}
		if len(parts) == 0 {
			continue
		}
		res := "ok"
		switch {
		case a.err != nil:
			res = "err " + a.err.Error()
		case a.requeued:
			res = "ok, asks to run again"
		}
		lines = append(lines, line{a.start, fmt.Sprintf("pass %d of %s (%s) begun %s, granted=%t deleting=%t %s %q: %s, ended %s %s",
			a.pass, a.object, a.uid, a.passStart.Format("05.000"), a.state.Granted, a.state.Deleting, a.state.Condition.Reason, a.state.Condition.Message,
			strings.Join(parts, ", "), a.end.Format("05.000"), res)})
	}
	for _, v := range h.versions {
		if v.Key == key {
			lines = append(lines, line{v.Seen, fmt.Sprintf("record v%s holder %s deleted=%t", v.ResourceVersion, v.Holder, v.Deleted)})
		}
	}
	for _, o := range h.outside {
		if o.key == key {
			lines = append(lines, line{o.invoked, fmt.Sprintf("outside %s (holder %s) returned %s", o.kind, o.holder, o.returned.Format("05.000"))})
		}
	}
	for _, rel := range h.releases {
		lines = append(lines, line{rel.sent, fmt.Sprintf("release of version %s in pass %d", rel.version, rel.pass)})
	}
	for _, p := range h.overlaps {
		lines = append(lines, line{p.from, "two processes until " + p.to.Format("05.000")})
	}
	for _, l := range h.lives {
		lines = append(lines, line{l.from, fmt.Sprintf("process %d (shard %d) starts", l.id, l.shard)})
		if !l.to.IsZero() {
			lines = append(lines, line{l.to, fmt.Sprintf("process %d (shard %d) ended", l.id, l.shard)})
		}
	}
	slices.SortStableFunc(lines, func(a, b line) int { return a.at.Compare(b.at) })
	var b strings.Builder
	fmt.Fprintf(&b, "\ntimeline of key %q:", key)
	for _, l := range lines {
		fmt.Fprintf(&b, "\n  %s %s", l.at.Format("15:04:05.000"), l.what)
	}
	return b.String()
}
