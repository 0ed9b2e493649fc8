package claimmw

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/ocf-claim/claim/internal/mutant"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// DefaultFairnessGrace is how long, by default, a sibling without a claim
// condition for its current spec counts after it was created or changed,
// and how long an object yields a free key at most.
const DefaultFairnessGrace = time.Minute

// WithFairness turns on the fairness pre-filter (claim.WithSiblings) with the
// middleware's own idea of a sibling: while a key is free, an object yields
// it to an older object that names the same key and could take it now. An
// object that is being deleted, or whose claim condition (for its current
// spec) says it waits elsewhere or cannot claim (Parked, NotFirst,
// WaitingForHandover, Foreign, InvalidKey, ClaimError), is no sibling, so a
// free key never waits for an object that will not come for it.
//
// Yielding is bounded ([WithFairnessGrace]): a sibling with no claim
// condition for its current spec (its first pass is still to come, or its
// passes fail before they write one: a finalizer patch refused for the
// object's size, a policy refusing its updates) counts only for the grace
// after it was created or last changed, and an object yields a free key for
// at most the grace after its claim condition turned false. Each object is
// woken when its grace ends, and as soon as an older sibling it may yield to
// stops counting (it parks on another key, otherwise says it cannot claim,
// stops naming the key, or is being deleted). Siblings are read from the manager's cache
// through the key index, so it needs [Middleware.SetupWithManager]. Needs
// [WithClaim]: the Claimer is built with it.
func WithFairness() Option {
	return func(c *config) {
		c.fairness = true
		if c.yieldWake == nil {
			c.yieldWake = newYieldWaker()
		}
	}
}

// WithFairnessGrace sets the grace of [WithFairness]. Default:
// [DefaultFairnessGrace].
func WithFairnessGrace(d time.Duration) Option { return func(c *config) { c.fairnessGrace = d } }

// grace is the fairness grace in effect.
func (m *Middleware) grace() time.Duration {
	if m.cfg.fairnessGrace > 0 {
		return m.cfg.fairnessGrace
	}
	return DefaultFairnessGrace
}

// blockedReasons are the claim reasons of an object that cannot take a key
// now.
var blockedReasons = map[string]bool{
	string(conditions.ReasonParked):             true,
	string(conditions.ReasonNotFirst):           true,
	string(conditions.ReasonWaitingForHandover): true,
	string(conditions.ReasonForeign):            true,
	string(conditions.ReasonInvalidKey):         true,
	string(conditions.ReasonClaimError):         true,
}

// siblings lists the objects naming key that could take it now; none when
// self has yielded for its whole grace already.
func (m *Middleware) siblings(ctx context.Context, key string, self claim.Holder) ([]claim.Holder, error) {
	list, err := m.newList()
	if err != nil {
		return nil, err
	}
	if err := m.cfg.client.List(ctx, list, client.MatchingFields{m.keysIndex(): key}); err != nil {
		return nil, fmt.Errorf("listing the objects that name claim key %q: %w", key, err)
	}
	now := time.Now()
	grace := m.grace()
	var out []claim.Holder
	var selfObj client.Object
	wakeAt := time.Time{}
	err = meta.EachListItem(list, func(o runtime.Object) error {
		obj, ok := o.(client.Object)
		if !ok {
			return nil
		}
		if obj.GetUID() == self.UID {
			selfObj = obj
			return nil
		}
		counts, until := m.couldTake(obj, grace, now)
		if !counts {
			return nil
		}
		h, err := m.claimer.HolderOf(obj)
		if err != nil {
			return err
		}
		out = append(out, h)
		if !until.IsZero() && (wakeAt.IsZero() || until.Before(wakeAt)) {
			wakeAt = until
		}
		return nil
	})
	if err != nil || selfObj == nil {
		return out, err
	}
	if done, until := yieldedEnough(m.claimCondition(selfObj), selfObj.GetGeneration(), grace, now); done {
		return nil, nil
	} else if !until.IsZero() && (wakeAt.IsZero() || until.Before(wakeAt)) {
		wakeAt = until
	}
	if len(out) > 0 && !wakeAt.IsZero() {
		m.cfg.yieldWake.at(selfObj, wakeAt.Sub(now))
	}
	return out, nil
}

// claimCondition is obj's claim condition, or nil.
func (m *Middleware) claimCondition(obj client.Object) *metav1.Condition {
	conds, err := conditionsOf(obj)
	if err != nil {
		return nil
	}
	return meta.FindStatusCondition(*conds, string(m.cfg.condType))
}

// couldTake reports whether obj could take a free key now, as far as what
// it says of itself tells, and, when it counts only for its grace, until
// when.
func (m *Middleware) couldTake(obj client.Object, grace time.Duration, now time.Time) (bool, time.Time) {
	if obj.GetDeletionTimestamp() != nil {
		return false, time.Time{}
	}
	return siblingCounts(m.claimCondition(obj), obj.GetGeneration(), changedAt(obj), grace, now)
}

// siblingCounts decides whether a sibling whose claim condition is c (nil:
// none) counts, and until when it counts if only for its grace: a sibling
// without a condition for its current generation counts for grace after
// changed; one whose condition says it cannot take the key does not count;
// any other counts.
func siblingCounts(c *metav1.Condition, generation int64, changed time.Time, grace time.Duration, now time.Time) (bool, time.Time) {
	if c == nil || c.ObservedGeneration != generation {
		until := changed.Add(grace)
		return now.Before(until), until
	}
	if c.Status == metav1.ConditionTrue || !blockedReasons[c.Reason] {
		return true, time.Time{}
	}
	return false, time.Time{}
}

// yieldedEnough decides whether an object whose claim condition is c has
// yielded a free key for its whole grace (its condition says NotFirst for
// its current generation, and turned false at least grace ago), and, when
// it has not, until when it may still yield.
func yieldedEnough(c *metav1.Condition, generation int64, grace time.Duration, now time.Time) (bool, time.Time) {
	if c == nil || c.ObservedGeneration != generation || c.Reason != string(conditions.ReasonNotFirst) || c.LastTransitionTime.IsZero() {
		return false, time.Time{}
	}
	until := c.LastTransitionTime.Add(grace)
	return !now.Before(until), until
}

// changedAt is when obj was created or last written: the latest time of
// its managed fields, or its creation time.
func changedAt(obj client.Object) time.Time {
	t := obj.GetCreationTimestamp().Time
	for _, f := range obj.GetManagedFields() {
		if f.Time != nil && f.Time.After(t) {
			t = f.Time.Time
		}
	}
	return t
}

// yieldWaker wakes an object when its yielding may end: the grace of the
// sibling it yields to, or its own, runs out. One timer per object, the
// latest request winning; events go to a channel the controller watches
// (SetupWithManager), dropped when it is full (the object's requeue still
// comes).
type yieldWaker struct {
	events chan event.GenericEvent
	mu     sync.Mutex
	timers map[types.NamespacedName]*time.Timer
}

// yieldWakeBuffer bounds the wake-ups waiting for the controller.
const yieldWakeBuffer = 1024

func newYieldWaker() *yieldWaker {
	return &yieldWaker{events: make(chan event.GenericEvent, yieldWakeBuffer), timers: map[types.NamespacedName]*time.Timer{}}
}

// at wakes obj after d (plus a moment, so that the grace has surely ended
// when its pass reads the clock).
func (w *yieldWaker) at(obj client.Object, d time.Duration) {
	if w == nil {
		return
	}
	key := client.ObjectKeyFromObject(obj)
	target := obj.DeepCopyObject().(client.Object)
	w.mu.Lock()
	defer w.mu.Unlock()
	if t, ok := w.timers[key]; ok {
		t.Stop()
	}
	w.timers[key] = time.AfterFunc(max(d, 0)+100*time.Millisecond, func() {
		w.mu.Lock()
		delete(w.timers, key)
		w.mu.Unlock()
		select {
		case w.events <- event.GenericEvent{Object: target}:
		default:
		}
	})
}

// predecessor names an object that may still be acting for key although key
// has no record: an object whose claim condition says it may act for its
// keys (Claimed, or Stopping: lost, and not yet stopped), read uncached,
// that names key, or whose keys cannot be computed now, or which may act for
// what an older spec named (Stopping, or Claimed for an older generation). Such a key was freed
// by someone other than its holder (a person or tool deleting the record,
// another writer erasing an annotation record) while the holder still acts;
// it goes to another object only once the holder's told pass succeeded, or
// the holder is gone. The holder itself, woken by the same deletion,
// acquires the key again first, as nobody else may. An object being deleted
// counts until its deletion pass succeeded (the deletion path then says
// Released). Every middleware set up on the same manager whose records of
// key are the same object is asked, so a holder reconciled by another
// middleware (another kind, another condition type) is seen too.
// Candidates come from the managers' cache through the key index, and the
// holders the key's record named as this process granted it or saw it
// change (a cache that has not yet seen a holder name the key, or a holder
// reconciled in another process, would hide it from the index). In the
// check that decides (after the record is held, before the object says it
// acts), each is read again uncached, as a cache may lag a condition
// written moments ago: one read per other object that names the key. The
// check before the record is written reads only the candidates the cache
// shows acting, and the remembered holders.
func (m *Middleware) predecessor(ctx context.Context, key string, self, recorded claim.Holder) (claim.Holder, string, bool, error) {
	if !m.indexed {
		return claim.Holder{}, "", false, nil
	}
	for _, mw := range append([]*Middleware{m}, others(m)...) {
		if mw != m && !m.sameRecord(mw, key) {
			continue
		}
		h, detail, ok, err := mw.actingFor(ctx, key, self, recorded)
		if err != nil || ok {
			return h, detail, ok, err
		}
	}
	return claim.Holder{}, "", false, nil
}

// sameRecord reports whether other stores its record of key (normalized) in
// the object m stores its own in: of one type, at one namespace and name, as
// each backend places it (claim.Claimer.RecordRef). The annotation backend
// places it on the object its Target names, whatever claim.Config.Namespace
// and Prefix say: two middlewares whose configurations differ there still
// share that record. When a backend does not say where, the configurations
// decide (one namespace, one record name). A record type that cannot be
// told counts as the same: asking one middleware too many costs reads,
// asking one too few lets a key go while its holder acts.
func (m *Middleware) sameRecord(other *Middleware, key string) bool {
	mine, okMine := m.claimer.RecordRef(key)
	theirs, okTheirs := other.claimer.RecordRef(key)
	if !okMine || !okTheirs {
		a, b := m.claimer.Config(), other.claimer.Config()
		return a.Namespace == b.Namespace && a.NameFunc(key) == b.NameFunc(key)
	}
	if mine != theirs {
		return false
	}
	tm, to := m.claimer.RecordType(), other.claimer.RecordType()
	if tm == nil || to == nil {
		return true
	}
	gm, errM := apiutil.GVKForObject(tm, m.cfg.client.Scheme())
	gt, errT := apiutil.GVKForObject(to, other.cfg.client.Scheme())
	return errM != nil || errT != nil || gm.GroupKind() == gt.GroupKind()
}

// confirmKey marks the context of the predecessor check that decides:
// the one asked after the record is held and before the object says it
// acts (claim.Claimer.Predecessor), which reads every candidate uncached.
type confirmKey struct{}

func confirmingContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, confirmKey{}, true)
}

func confirming(ctx context.Context) bool { return ctx.Value(confirmKey{}) != nil }

// freshKey marks a context in which the manager's cache of a middleware's
// kind is known to hold, for one namespace, every write made before the
// pass's own last write: the cache showed that write.
type freshKey struct{}

type freshCache struct {
	m  *Middleware
	ns string
}

func freshCacheContext(ctx context.Context, m *Middleware, ns string) context.Context {
	return context.WithValue(ctx, freshKey{}, freshCache{m: m, ns: ns})
}

// freshIn reports whether ctx says m's cache is fresh for namespace ns.
func freshIn(ctx context.Context, m *Middleware, ns string) bool {
	f, ok := ctx.Value(freshKey{}).(freshCache)
	return ok && f.m == m && f.ns == ns
}

// predecessorDetail is the Detail of an Outcome that waits for a
// predecessor.
const predecessorDetail = "the key's record no longer names it, but it may still be acting for the key until its reconciler, told to stop, succeeds"

// others returns the other middlewares set up on m's manager.
func others(m *Middleware) []*Middleware {
	var out []*Middleware
	for _, o := range setUp.onManager(m.kind.mgr) {
		if o != m {
			out = append(out, o)
		}
	}
	return out
}

// actingFor is [Middleware.predecessor] among the objects of m's kind.
func (m *Middleware) actingFor(ctx context.Context, key string, self, recorded claim.Holder) (claim.Holder, string, bool, error) {
	if m.listsUncached(ctx) {
		// The cache may not hold an object that acts for key, and a
		// restarted process remembers none: every object is listed. The
		// holders remembered in another namespace are asked below too.
		if h, detail, ok, err := m.listedActingFor(ctx, key, self, recorded); err != nil || ok {
			return h, detail, ok, err
		}
	}
	var candidates []client.Object
	for _, value := range []string{key, unknownKeys} {
		list, err := m.newList()
		if err != nil {
			return claim.Holder{}, "", false, err
		}
		if err := m.cfg.client.List(ctx, list, client.MatchingFields{m.keysIndex(): value}); err != nil {
			return claim.Holder{}, "", false, fmt.Errorf("listing the objects that name claim key %q: %w", claim.Redact(key), err)
		}
		// Every object naming key is read again, whatever its cached
		// condition says: an object that became Claimed moments ago may
		// still show Parked in a lagging cache. The ones the cache shows
		// acting come first.
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			if obj, ok := o.(client.Object); ok && obj.GetUID() != self.UID && (recorded.UID == "" || obj.GetUID() != recorded.UID) {
				candidates = append(candidates, obj)
			}
			return nil
		})
	}
	for _, last := range m.lastHolders.of(key) {
		if last.uid == self.UID || last.uid == recorded.UID || slices.ContainsFunc(candidates, func(o client.Object) bool { return o.GetUID() == last.uid }) {
			continue
		}
		hinted := newObject(m.cfg.prototype)
		hinted.SetNamespace(last.name.Namespace)
		hinted.SetName(last.name.Name)
		hinted.SetUID(last.uid)
		candidates = append([]client.Object{hinted}, candidates...)
	}
	if !confirming(ctx) {
		// Asked before the record is written, the question only spares a
		// write that the check after it would undo: the candidates this
		// process's cache shows acting and the holders
		// it remembers are read, not every object naming the key. A waiter
		// among a thousand on one key reads a few objects, not a thousand.
		candidates = slices.DeleteFunc(candidates, func(o client.Object) bool {
			hinted := o.GetResourceVersion() == ""
			return !hinted && !mayAct(m.conditionOf(o))
		})
	} else {
		// Asked after the object's own write that says it may act, once the
		// cache showed that write: whatever a candidate of the same
		// namespace wrote before it (a Claimed an earlier holder wrote
		// before its record was deleted from outside) the cache shows too.
		// One that the cache shows acting for nothing there is not read;
		// one it shows acting is, as its condition may have changed since.
		candidates = slices.DeleteFunc(candidates, func(o client.Object) bool {
			hinted := o.GetResourceVersion() == ""
			return !hinted && freshIn(ctx, m, o.GetNamespace()) && !m.mayActFor(ctx, o, key)
		})
	}
	slices.SortStableFunc(candidates, func(a, b client.Object) int {
		switch actA, actB := mayAct(m.conditionOf(a)), mayAct(m.conditionOf(b)); {
		case actA && !actB:
			return -1
		case actB && !actA:
			return 1
		}
		return 0
	})
	// The ones the cache shows acting are read one by one, as the first of
	// them usually answers; the rest together.
	shown := slices.IndexFunc(candidates, func(o client.Object) bool { return !mayAct(m.conditionOf(o)) })
	if shown < 0 {
		shown = len(candidates)
	}
	var fresh []readResult
	for i, cached := range candidates {
		if i >= shown && fresh == nil {
			fresh = m.readAll(ctx, candidates[shown:])
		}
		var r readResult
		if i < shown {
			r = m.readAll(ctx, candidates[i:i+1])[0]
		} else {
			r = fresh[i-shown]
		}
		obj, err := r.obj, r.err
		if err != nil {
			if apierrors.IsNotFound(err) {
				m.lastHolders.forget(cached.GetUID())
				continue
			}
			return claim.Holder{}, "", false, fmt.Errorf("reading %s, which may still act for claim key %q: %w", client.ObjectKeyFromObject(cached), claim.Redact(key), err)
		}
		if obj.GetUID() != cached.GetUID() {
			// The name now stands for another object: the one remembered is gone.
			m.lastHolders.forget(cached.GetUID())
			continue
		}
		if !m.mayActFor(ctx, obj, key) {
			continue
		}
		h, err := m.claimer.HolderOf(obj)
		if err != nil {
			return claim.Holder{}, "", false, err
		}
		return h, predecessorDetail, true, nil
	}
	return claim.Holder{}, "", false, nil
}

// mayActFor reports whether obj, as given, may act for key by what it says
// of itself. An object being deleted counts like any other: a deletion pass
// given records says Stopping before it acts for them, unless its condition
// already says it may act. An object Claimed for its current spec that no
// longer names key stopped acting for it: that condition is written only
// after a pass for the current spec succeeded. A condition that says which
// keys the object acts for (Claimed for keys it shows whole, for an older
// spec too; Stopping that carries the keys it acted for; one told to
// release records: exactKeysOf) counts for those only. Any other Stopping,
// or Claimed while its key set changes, may still act for whatever it named
// before.
func (m *Middleware) mayActFor(ctx context.Context, obj client.Object, key string) bool {
	c := m.conditionOf(obj)
	if !mayAct(c) {
		return false
	}
	keys, err := m.keysOf(ctx, obj)
	names := func(k namedKey) bool { return k.norm == key }
	mutant.Do(mutant.RawKeyCompared, func() { names = namesRaw(key) })
	if held, ok := m.releasingFor(c, keys); ok && (err == nil || c.Reason == string(conditions.ReasonStopping)) {
		// It says exactly which keys it acts for: those it is told to
		// release, and, Claimed, the keys it names.
		return slices.Contains(held, key) || c.Reason == string(conditions.ReasonClaimed) && slices.ContainsFunc(keys, names)
	}
	if err == nil && m.claimedFor(c, keys) {
		return slices.ContainsFunc(keys, names)
	}
	if exact, ok := exactKeysOf(c); ok {
		// It says exactly which keys it acts for, whatever it names now.
		return slices.Contains(exact, key)
	}
	// It may act for whatever it named before. Only a condition that names
	// key counts against a holder that may have acted for it already
	// (confirmedGrants).
	return !rechecking(ctx)
}

// recheckKey marks the context of the predecessor check a deletion pass
// asks about the records of an object whose condition says Claimed for
// exactly the keys it names, which no pass of this process confirmed: it
// may have acted for them already, or said so before its pass found an
// earlier holder still acting (confirmedGrants). The check then counts
// only an object whose condition names the key (Claimed for exactly the
// keys it names, or saying which keys it acts for), not one that may act
// for whatever it named before (Stopping, or Claimed for an older spec): a
// holder that acted is not denied the cleanup of its keys for an object
// that never held them.
type recheckKey struct{}

func recheckContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, recheckKey{}, true)
}

func rechecking(ctx context.Context) bool { return ctx.Value(recheckKey{}) != nil }

// lastHolders remembers, per normalized key, the holders its record named
// as this process granted it or saw the record change, until each says
// itself (in a pass of its own here) that it stopped acting for the key, or
// is found gone. It is a hint for finding a predecessor, never a fact the
// middleware decides on: each candidate it names is read uncached like any
// other. A holder is not dropped because a read found it not acting: it is
// added before it writes the condition that says it acts, and a read
// between the two would otherwise lose it for good.
type lastHolders struct {
	mu sync.Mutex
	m  map[string]map[types.UID]types.NamespacedName
}

type lastHolder struct {
	name types.NamespacedName
	uid  types.UID
}

func (l *lastHolders) add(key string, name types.NamespacedName, uid types.UID) {
	if uid == "" {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]map[types.UID]types.NamespacedName{}
	}
	if l.m[key] == nil {
		l.m[key] = map[types.UID]types.NamespacedName{}
	}
	l.m[key][uid] = name
}

// of returns the holders remembered for key.
func (l *lastHolders) of(key string) []lastHolder {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]lastHolder, 0, len(l.m[key]))
	for uid, name := range l.m[key] {
		out = append(out, lastHolder{name: name, uid: uid})
	}
	slices.SortFunc(out, func(a, b lastHolder) int { return strings.Compare(string(a.uid), string(b.uid)) })
	return out
}

// forget drops uid for keys, or for every key when none is given.
func (l *lastHolders) forget(uid types.UID, keys ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	drop := func(key string) {
		delete(l.m[key], uid)
		if len(l.m[key]) == 0 {
			delete(l.m, key)
		}
	}
	if len(keys) == 0 {
		for key := range l.m {
			drop(key)
		}
		return
	}
	for _, key := range keys {
		drop(key)
	}
}

// uidsOf returns the UIDs of the holders remembered under name.
func (l *lastHolders) uidsOf(name types.NamespacedName) []types.UID {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []types.UID
	for _, holders := range l.m {
		for uid, n := range holders {
			if n == name && !slices.Contains(out, uid) {
				out = append(out, uid)
			}
		}
	}
	return out
}

// forgetName drops every holder named name, whatever its UID: the object
// is gone.
func (l *lastHolders) forgetName(name types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for key, holders := range l.m {
		for uid, n := range holders {
			if n == name {
				delete(holders, uid)
			}
		}
		if len(holders) == 0 {
			delete(l.m, key)
		}
	}
}

// predecessorReads bounds the uncached reads of the predecessor check in
// flight at once: a key many objects wait for costs one read per waiter
// each time it is free, which one at a time keeps the successor waiting
// for as many round trips.
const predecessorReads = 16

// readResult is one object read again uncached, or the error of that read.
type readResult struct {
	obj client.Object
	err error
}

// listedReads is how many objects of one namespace the predecessor check
// must read before one uncached List of the namespace replaces their Gets,
// provided they are at least 1/listedShare of the objects the cache holds
// there: a List costs about as much as a few dozen Gets plus a little per
// object listed (measured on envtest: 1,000 Gets 1.7 s, a List of the same
// 1,000 objects 60–80 ms), so it pays for many waiters on one key but not
// for a few among many bystanders.
const (
	listedReads = 64
	listedShare = 16
)

// readAll reads each of objs again uncached, and returns the results in the
// order of objs. Each answer is at least as fresh as the call: per
// namespace, one consistent List replaces the Gets when many objects of
// that namespace are read (listedReads), otherwise predecessorReads Gets are
// in flight at once.
func (m *Middleware) readAll(ctx context.Context, objs []client.Object) []readResult {
	out := make([]readResult, len(objs))
	byNamespace := map[string][]int{}
	for i, o := range objs {
		byNamespace[o.GetNamespace()] = append(byNamespace[o.GetNamespace()], i)
	}
	var gets []int
	for ns, idx := range byNamespace {
		if len(idx) < listedReads || !m.listPays(ctx, ns, len(idx)) {
			gets = append(gets, idx...)
			continue
		}
		listed, err := m.listUncached(ctx, ns)
		for _, i := range idx {
			name := objs[i].GetName()
			switch obj, ok := listed[name]; {
			case err != nil:
				out[i] = readResult{err: err}
			case ok:
				out[i] = readResult{obj: obj}
			default:
				out[i] = readResult{err: apierrors.NewNotFound(schema.GroupResource{Group: m.cfg.gvk.Group, Resource: m.cfg.gvk.Kind}, name)}
			}
		}
	}
	sem := make(chan struct{}, predecessorReads)
	var wg sync.WaitGroup
	for _, i := range gets {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			obj := newObject(m.cfg.prototype)
			out[i] = readResult{obj: obj, err: m.cfg.apiReader.Get(ctx, client.ObjectKeyFromObject(objs[i]), obj)}
		}()
	}
	wg.Wait()
	return out
}

// listPays reports whether reading n objects of namespace ns costs more
// than listing the namespace: n is at least 1/listedShare of the objects
// the cache holds there.
func (m *Middleware) listPays(ctx context.Context, ns string, n int) bool {
	list, err := m.newList()
	if err != nil {
		return false
	}
	if err := m.cfg.client.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return false
	}
	return n*listedShare >= meta.LenList(list)
}

// listUncached lists the objects of m's kind in namespace ns uncached, by
// name.
func (m *Middleware) listUncached(ctx context.Context, ns string) (map[string]client.Object, error) {
	list, err := m.newList()
	if err != nil {
		return nil, err
	}
	if err := m.cfg.apiReader.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing the objects of namespace %q: %w", ns, err)
	}
	byName := map[string]client.Object{}
	err = meta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(client.Object); ok {
			byName[obj.GetName()] = obj
		}
		return nil
	})
	return byName, err
}
