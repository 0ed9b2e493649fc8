package chaos_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/internal/testclaimant"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// actor is the inner reconciler of the checker's world, shared by every
// operator process of a seed as the cluster is: when a pass acts for a key
// it starts a workload for that key (a StatefulSet, a migration) that keeps
// running after the pass; only a pass told to stop it, that returns
// success, stops it. A workload's life is an acting window, the unit the
// checker judges. The actor records every call, every window and every
// Lease Delete the operators send.
type actor struct {
	// records reads a key's record uncached, at the start of each call
	// that acts: the object must hold it whenever it acts.
	records *claim.Claimer
	// objects reads the object uncached, at the start of each call that
	// acts: its claim condition must say it may act (Claimed=True,
	// Stopping) whenever it does, which is what a waiter in any process
	// asks before it acts.
	objects client.Reader
	// ignoreGranted makes it act for every key its object names, granted
	// or not (a broken inner reconciler).
	ignoreGranted bool
	// normalize is the seed's key normalizer, as the checker applies it:
	// every key the actor learns (from State, from the spec) is normalized
	// by it before it names a workload, so that workloads, and so acting
	// windows, are per key as the middleware compares keys, whatever
	// spelling the middleware handed on. The normalizer is idempotent, so
	// that records reads a key normalized already as the key.
	normalize func(string) string

	mu      sync.Mutex
	rng     *rand.Rand
	fail    float64
	crashP  float64 // chance that a told pass crashes its operator midway
	next    int64
	starts  map[int64]time.Time // pass -> when it began
	names   map[int64]string    // pass -> the name of its object
	ops     map[int64]*operator // pass -> the operator process running it
	readers map[*operator]client.Reader
	open    map[wkey]*window
	windows []*window
	acts    []act
	// releases are the Lease Deletes the operators sent.
	releases []release
	crashes  int
	// held are the objects whose told passes the world holds back: each
	// waits, before it stops anything, until the world lets it go (a slow
	// cleanup).
	held map[types.UID]*heldStop
	// refused are the objects whose status writes the world has refused,
	// in every operator process, until it allows them again.
	refused map[types.UID]bool
	// refusedWaiting are the objects whose WaitingForHandover writes are
	// refused (refuseWaiting).
	refusedWaiting map[types.UID]bool
	// slowToBegin are the objects whose passes, in the processes of one
	// shard, the world holds back before they begin (a busy controller):
	// by name, the shard and a channel closed when they may go on.
	slowToBegin map[string]slowPasses
	// slowStop is the chance that a told pass that neither fails nor
	// crashes is not done stopping: it returns no error and asks to run
	// again (its workloads are still going away), and its windows stay
	// open until a told pass returns a zero Result. Drawn from its own
	// stream (stopRng), so that the other draws of a seed stay as they were.
	slowStop float64
	stopRng  *rand.Rand
}

// heldStop is a told pass the world holds back: entered is closed when one
// begins to wait, release lets it (and every later one) go on.
type heldStop struct {
	entered, release chan struct{}
	once             sync.Once
}

// holdStops makes every told pass of uid wait until letGo; entered is
// closed once one waits.
func (a *actor) holdStops(uid types.UID) (entered <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held == nil {
		a.held = map[types.UID]*heldStop{}
	}
	h := &heldStop{entered: make(chan struct{}), release: make(chan struct{})}
	a.held[uid] = h
	return h.entered
}

// slowPasses is what holdPasses keeps of one object: the shard whose
// processes hold its passes back, and a channel closed once they may go on.
type slowPasses struct {
	shard   int
	release chan struct{}
}

// holdPasses makes every pass of the object named name, in the processes
// of shard only, wait before it begins (before the middleware reads
// anything) until the returned func is called, or at most slowPassesMax:
// the object's passes are slow to begin there, as those of a busy
// controller are, while its workloads run on. The processes of other
// shards, asked to reconcile it too, are not held.
func (a *actor) holdPasses(name string, shard int) (letGo func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.slowToBegin == nil {
		a.slowToBegin = map[string]slowPasses{}
	}
	sp := slowPasses{shard: shard, release: make(chan struct{})}
	a.slowToBegin[name] = sp
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			close(sp.release)
			if a.slowToBegin[name].release == sp.release {
				delete(a.slowToBegin, name)
			}
		})
	}
}

// slowPassesMax bounds how long holdPasses holds one pass back: a process
// that ends waits for its passes.
const slowPassesMax = 5 * time.Second

// letGo lets the told passes of uid held by holdStops go on.
func (a *actor) letGo(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if h := a.held[uid]; h != nil {
		close(h.release)
		delete(a.held, uid)
	}
}

// refuseStatus makes every status write of uid fail, before it applies,
// until allowStatus: an admission policy that refuses the object's status
// for a while.
func (a *actor) refuseStatus(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refused == nil {
		a.refused = map[types.UID]bool{}
	}
	a.refused[uid] = true
}

// allowStatus ends refuseStatus and refuseWaiting.
func (a *actor) allowStatus(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.refused, uid)
	delete(a.refusedWaiting, uid)
}

// refusesStatus reports whether the status writes of uid are refused.
func (a *actor) refusesStatus(uid types.UID) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refused[uid]
}

// refuseWaiting makes every status write of uid that says it waits for a
// handover (WaitingForHandover) fail, before it applies, until
// allowStatus; its other status writes apply.
func (a *actor) refuseWaiting(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refusedWaiting == nil {
		a.refusedWaiting = map[types.UID]bool{}
	}
	a.refusedWaiting[uid] = true
}

// refusesStatusOf reports whether the status write of obj is refused
// (refuseStatus, refuseWaiting).
func (a *actor) refusesStatusOf(obj client.Object) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refused[obj.GetUID()] {
		return true
	}
	c, ok := obj.(*testclaimant.Claimant)
	if !ok || !a.refusedWaiting[obj.GetUID()] {
		return false
	}
	cond := meta.FindStatusCondition(c.Status.Conditions, string(conditions.Claimed))
	return cond != nil && cond.Reason == string(conditions.ReasonWaitingForHandover)
}

// newestOpen returns the window that opened last, if it opened after
// after and is still open.
func (a *actor) newestOpen(after time.Time) (window, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := len(a.windows) - 1; i >= 0; i-- {
		win := a.windows[i]
		if !win.start.After(after) {
			return window{}, false
		}
		if a.open[wkey{uid: win.uid, key: win.key}] == win {
			return *win, true
		}
	}
	return window{}, false
}

// openFor returns uid's window for key if it is open and opened after
// after.
func (a *actor) openFor(uid types.UID, key string, after time.Time) (window, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w := a.open[wkey{uid: uid, key: key}]; w != nil && w.start.After(after) {
		return *w, true
	}
	return window{}, false
}

// passEnded waits up to within for a call of uid's inner reconciler made
// in a pass begun after after to end, and reports whether one did.
func (a *actor) passEnded(uid types.UID, after time.Time, within time.Duration) bool {
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		a.mu.Lock()
		ended := slices.ContainsFunc(a.acts, func(x act) bool { return x.uid == uid && x.passStart.After(after) && !x.end.IsZero() })
		a.mu.Unlock()
		if ended || time.Now().After(deadline) {
			return ended
		}
	}
}

// quietIn waits until quiet has passed without a pass beginning in a
// process of shard, or within has.
func (a *actor) quietIn(shard int, quiet, within time.Duration) {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var last time.Time
		a.mu.Lock()
		for n, at := range a.starts {
			if op := a.ops[n]; op != nil && op.shard == shard && at.After(last) {
				last = at
			}
		}
		a.mu.Unlock()
		if time.Since(last) >= quiet {
			return
		}
	}
}

// wkey is one workload: an object (by UID) acting for a key.
type wkey struct {
	uid types.UID
	key string
}

// window is one acting window: from the start of the first inner call
// that acted for the key until the end of the told pass that stopped the
// workload and returned success (zero while it runs).
type window struct {
	object     string
	uid        types.UID
	key        string
	token      claim.Token
	start, end time.Time
	// passStart is when the pass that started it began: the earliest time
	// that pass can have read the record it acted on.
	passStart time.Time
	// opened and closed are the passes that started and stopped it.
	opened, closed int64
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
// that happened), and when it was sent.
func (a *actor) deleting(ctx context.Context, opts []client.DeleteOption) {
	do := &client.DeleteOptions{}
	do.ApplyOptions(opts)
	rv := ""
	if do.Preconditions != nil && do.Preconditions.ResourceVersion != nil {
		rv = *do.Preconditions.ResourceVersion
	}
	a.mu.Lock()
	pass := passOf(ctx)
	a.releases = append(a.releases, release{pass: pass, object: a.names[pass], version: rv, sent: time.Now()})
	a.mu.Unlock()
}

// passBegins returns the log constructor of op's controller: the
// controller calls it with the request as each pass begins, before the
// middleware reads anything, which is the earliest time the pass can have
// read a record. It numbers the pass and notes when it began and where.
func (a *actor) passBegins(op *operator) func(*reconcile.Request) logr.Logger {
	return func(req *reconcile.Request) logr.Logger {
		if req == nil {
			return logr.New(passSink{})
		}
		a.mu.Lock()
		if sp, ok := a.slowToBegin[req.Name]; ok && op != nil && op.shard == sp.shard {
			a.mu.Unlock()
			select {
			case <-sp.release:
			case <-time.After(slowPassesMax):
			}
			a.mu.Lock()
		}
		defer a.mu.Unlock()
		a.next++
		a.starts[a.next] = time.Now()
		a.names[a.next] = req.Name
		a.ops[a.next] = op
		return logr.New(passSink{pass: a.next})
	}
}

// told reports whether a pass with state s must stop the workload of key
// (normalized): a deletion pass stops everything once it cleaned up; a
// granted pass every key it was not granted (given up, handed over, no
// longer named); any other pass everything.
func (a *actor) told(s claimmw.State, key string) bool {
	if s.Deleting || !s.Granted {
		return true
	}
	if slices.ContainsFunc(s.Handovers, func(h claimmw.Handover) bool { return a.normalize(h.Key) == key }) {
		return true
	}
	return !slices.ContainsFunc(s.Grants, func(g claimmw.Grant) bool { return a.normalize(g.Key) == key })
}

func (a *actor) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	s, _ := claimmw.StateFrom(ctx)
	pass := passOf(ctx)
	a.mu.Lock()
	op := a.ops[pass]
	reader := a.readers[op]
	a.mu.Unlock()
	obj := &testclaimant.Claimant{}
	// The cache of the process running the pass holds the incarnation the
	// pass is about: a recreated object replaces it only after the
	// finalizer of the old one came off, which waits for this pass.
	if reader != nil {
		_ = reader.Get(ctx, req.NamespacedName, obj)
	}
	a.mu.Lock()
	rec := act{object: req.Name, uid: obj.UID, pass: pass, passStart: a.starts[pass], state: s}
	work := time.Duration(a.rng.IntN(8)+1) * time.Millisecond
	fail := a.rng.Float64() < a.fail
	crash := a.rng.Float64() < a.crashP
	again := a.stopRng != nil && a.stopRng.Float64() < a.slowStop
	a.mu.Unlock()
	rec.start = time.Now()
	switch {
	case s.Deleting:
		// A deletion pass acts for its Grants: it cleans up their
		// resources.
		rec.acted = s.Grants
	case s.Granted:
		// A key the pass hands over is one it is told to move its
		// workloads off (State.Handovers): it starts nothing for it.
		for _, g := range s.Grants {
			if !slices.ContainsFunc(s.Handovers, func(h claimmw.Handover) bool { return a.normalize(h.Key) == a.normalize(g.Key) }) {
				rec.acted = append(rec.acted, g)
			}
		}
	case a.ignoreGranted:
		for _, k := range obj.Spec.Keys {
			rec.acted = append(rec.acted, claimmw.Grant{Key: k})
		}
	}
	// A pass told to release a record cleans up what the object keeps for
	// its key, whether or not it acted for it before: it acts for it, and
	// stops acting for it only when the pass succeeded.
	rec.acted = append(rec.acted, s.Releasing...)
	// Each key as the middleware compares keys, once: a workload is per
	// normalized key, whatever spelling the pass was handed.
	seen := map[string]bool{}
	rec.acted = slices.DeleteFunc(slices.Clone(rec.acted), func(g claimmw.Grant) bool {
		dup := seen[a.normalize(g.Key)]
		seen[a.normalize(g.Key)] = true
		return dup
	})
	for i := range rec.acted {
		rec.acted[i].Key = a.normalize(rec.acted[i].Key)
	}
	// The object must hold the record of every key it acts for, read
	// uncached as the inner call starts.
	for _, g := range rec.acted {
		if obj.UID == "" {
			break
		}
		r, err := a.records.Current(ctx, g.Key)
		if err != nil {
			continue // the read failed (a crashed process): nothing learnt
		}
		if !r.Exists || r.Holder.UID != obj.UID {
			rec.unheld = append(rec.unheld, unheld{key: g.Key, holder: r.Holder.UID, at: time.Now()})
		}
	}
	// The keys it acts for in this pass, or may still act for (its
	// windows still open): its condition must say it may act for each.
	var mayActFor []string
	for _, g := range rec.acted {
		mayActFor = append(mayActFor, g.Key)
	}
	a.mu.Lock()
	for k := range a.open {
		if k.uid == obj.UID && !slices.Contains(mayActFor, k.key) {
			mayActFor = append(mayActFor, k.key)
		}
	}
	a.mu.Unlock()
	if len(mayActFor) > 0 && obj.UID != "" && a.objects != nil {
		cur := &testclaimant.Claimant{}
		if err := a.objects.Get(ctx, req.NamespacedName, cur); err == nil && cur.UID == obj.UID {
			c := meta.FindStatusCondition(cur.Status.Conditions, string(conditions.Claimed))
			switch {
			case !saysMayAct(c) && len(rec.acted) > 0:
				rec.unsaid = &unsaid{at: time.Now()}
				if c != nil {
					rec.unsaid.status, rec.unsaid.reason = c.Status, c.Reason
				}
			case saysMayAct(c):
				said, exact := claimmw.ActsFor(*c)
				missing := slices.DeleteFunc(slices.Clone(mayActFor), func(k string) bool { return slices.Contains(said, k) })
				if exact && len(missing) > 0 {
					slices.Sort(missing)
					rec.unsaid = &unsaid{status: c.Status, reason: c.Reason, at: time.Now(), keys: missing, message: c.Message}
				}
			}
		}
	}
	a.mu.Lock()
	for _, g := range rec.acted {
		if obj.UID == "" {
			break // the object is not in this process's cache: nothing to start
		}
		k := wkey{uid: obj.UID, key: g.Key}
		if a.open[k] == nil {
			w := &window{object: req.Name, uid: obj.UID, key: g.Key, token: g.Token, start: rec.start, passStart: rec.passStart, opened: pass}
			a.open[k] = w
			a.windows = append(a.windows, w)
		}
	}
	stopping := false
	for k := range a.open {
		if k.uid == obj.UID && a.told(s, k.key) {
			stopping = true
		}
	}
	hold := a.held[obj.UID]
	a.mu.Unlock()
	if hold != nil && stopping {
		hold.once.Do(func() { close(hold.entered) })
		select {
		case <-hold.release:
		case <-ctx.Done():
		}
	}
	if len(rec.acted) > 0 || stopping {
		time.Sleep(work) // the guarded work, or the stop
	}
	var err error
	var res reconcile.Result
	switch {
	case crash && stopping && op != nil:
		// The operator dies in the middle of the told pass: the stop did
		// not finish.
		a.mu.Lock()
		a.crashes++
		a.mu.Unlock()
		op.crash()
		err = errors.New("chaos: the operator crashed in the middle of the pass")
	case fail:
		err = errors.New("chaos: the inner pass failed")
	case ctx.Err() != nil:
		// The operator stopped under the pass.
		err = context.Cause(ctx)
	case again && stopping:
		// Not done stopping: it asks to run again soon, and what it was
		// told to stop still runs.
		res = reconcile.Result{RequeueAfter: slowStopRequeue}
	}
	rec.end, rec.err, rec.requeued = time.Now(), err, !res.IsZero()
	a.mu.Lock()
	if err == nil && res.IsZero() {
		for k, w := range a.open {
			if k.uid == obj.UID && a.told(s, k.key) {
				w.end, w.closed = rec.end, pass
				delete(a.open, k)
			}
		}
	}
	a.acts = append(a.acts, rec)
	a.mu.Unlock()
	return res, err
}

// slowStopChance is the actor's slowStop in every profile; slowStopRequeue
// is when a told pass that is not done stopping asks to run again.
const (
	slowStopChance  = 0.25
	slowStopRequeue = 30 * time.Millisecond
)

// calm stops the inner failures, crashes and slow stops, for the quiescent
// end.
// holdCrashes stops told passes from crashing their operator midway
// until the returned func is called.
func (a *actor) holdCrashes() (restore func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	was := a.crashP
	a.crashP = 0
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.crashP = was
	}
}

func (a *actor) calm() {
	a.mu.Lock()
	a.fail, a.crashP, a.slowStop = 0, 0, 0
	a.mu.Unlock()
}

func (a *actor) recorded() ([]act, []release, []window) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ws := make([]window, len(a.windows))
	for i, w := range a.windows {
		ws[i] = *w
	}
	return slices.Clone(a.acts), slices.Clone(a.releases), ws
}
