package claimmw

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/ocf-claim/claim/internal/mutant"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// Field index names the middleware registers on the manager's cache for its
// object type; the middleware's name ([WithName]) follows the prefix, so that
// two middlewares for one type keep separate indexes (and a second one with
// the same name fails at setup instead of mixing them).
const (
	// IndexKeysPrefix indexes objects by the normalized claim keys they
	// name.
	IndexKeysPrefix = backends.Domain + "/keys."
	// IndexRecordsPrefix indexes objects by the record names of the keys
	// they name, so that a record without a readable key (a foreign record
	// where a key's record belongs) still finds the objects it blocks.
	IndexRecordsPrefix = backends.Domain + "/records."
	// IndexFinalizerPrefix and IndexConditionPrefix name empty indexes
	// that reserve a finalizer and a condition type for one middleware of
	// a kind.
	IndexFinalizerPrefix = backends.Domain + "/finalizer."
	IndexConditionPrefix = backends.Domain + "/condition."
	// IndexWaitingPrefix indexes objects whose claim condition is
	// WaitingForHandover, under the value "true".
	IndexWaitingPrefix = backends.Domain + "/waiting-for-handover."
)

func (m *Middleware) keysIndex() string    { return IndexKeysPrefix + m.cfg.name }
func (m *Middleware) recordsIndex() string { return IndexRecordsPrefix + m.cfg.name }
func (m *Middleware) waitingIndex() string { return IndexWaitingPrefix + m.cfg.name }

// index registers the middleware's field indexes on mgr's cache, once.
func (m *Middleware) index(ctx context.Context, mgr manager.Manager) error {
	if m.indexed {
		return nil
	}
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(ctx, newObject(m.cfg.prototype), m.keysIndex(), m.indexKeyValues); err != nil {
		return fmt.Errorf("indexing objects by claim key under %q (two claim middlewares for one kind need different names; see claimmw.WithName): %w", m.keysIndex(), err)
	}
	if err := indexer.IndexField(ctx, newObject(m.cfg.prototype), m.recordsIndex(), m.indexRecords); err != nil {
		return fmt.Errorf("indexing objects by claim record under %q: %w", m.recordsIndex(), err)
	}
	if err := indexer.IndexField(ctx, newObject(m.cfg.prototype), m.waitingIndex(), m.indexWaiting); err != nil {
		return fmt.Errorf("indexing objects waiting for a handover under %q: %w", m.waitingIndex(), err)
	}
	// Two middlewares for one kind must not share a finalizer (the first to
	// finish its deletion path would remove it while the other still cleans
	// up) nor a condition type (each would overwrite the other's). Index
	// names are unique per informer, so registering one per finalizer and per
	// condition type refuses the second middleware at setup.
	for _, taken := range []struct{ what, name string }{
		{"finalizer", IndexFinalizerPrefix + string(m.cfg.finalizer)},
		{"condition type", IndexConditionPrefix + string(m.cfg.condType)},
	} {
		if err := indexer.IndexField(ctx, newObject(m.cfg.prototype), taken.name, func(client.Object) []string { return nil }); err != nil {
			return fmt.Errorf("claiming the %s %q for middleware %q (two claim middlewares for one kind need different finalizers and condition types; see claimmw.WithFinalizer and claimmw.WithConditionType): %w", taken.what, strings.TrimPrefix(strings.TrimPrefix(taken.name, IndexFinalizerPrefix), IndexConditionPrefix), m.cfg.name, err)
		}
	}
	m.indexed = true
	m.kind = kindKey{mgr: mgr, gvk: m.cfg.gvk}
	setUp.add(m.kind, m)
	// The registry speaks of running managers only: a stopped one (a test's,
	// an operator's restarted in process) is forgotten with its middlewares.
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		setUp.remove(m.kind, m)
		return nil
	})); err != nil {
		return fmt.Errorf("registering middleware %q with its manager: %w", m.cfg.name, err)
	}
	return nil
}

// kindKey is one kind reconciled in one manager.
type kindKey struct {
	mgr manager.Manager
	gvk schema.GroupVersionKind
}

// setUp lists the middlewares set up per kind and manager: what
// SetupWithManager registered on each manager, from setup until that manager
// stops. A pass asks it only about its own manager: whether another
// middleware of its kind names a key for the same object, and which
// middlewares share a record with it (the predecessor check, the wake-up of
// objects waiting for a handover). Middlewares of other managers in the same
// process are never consulted.
var setUp = &kindRegistry{m: map[kindKey][]*Middleware{}}

type kindRegistry struct {
	mu sync.Mutex
	m  map[kindKey][]*Middleware
}

func (c *kindRegistry) add(k kindKey, m *Middleware) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[k] = append(c.m[k], m)
}

// onManager returns every middleware set up on mgr, of any kind.
func (c *kindRegistry) onManager(mgr manager.Manager) []*Middleware {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Middleware
	for k, ms := range c.m {
		if k.mgr == mgr {
			out = append(out, ms...)
		}
	}
	return out
}

func (c *kindRegistry) remove(k kindKey, m *Middleware) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[k] = slices.DeleteFunc(c.m[k], func(o *Middleware) bool { return o == m })
	if len(c.m[k]) == 0 {
		delete(c.m, k)
	}
}

func (c *kindRegistry) others(k kindKey, self *Middleware) []*Middleware {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Middleware
	for _, m := range c.m[k] {
		if m != self {
			out = append(out, m)
		}
	}
	return out
}

// namedByAnother reports whether another middleware of the same kind in the
// same manager names key (normalized) for obj, or cannot tell: a record
// without a claim set may then be that middleware's.
func (m *Middleware) namedByAnother(ctx context.Context, obj client.Object, key string) bool {
	if !m.indexed {
		return false
	}
	for _, other := range setUp.others(m.kind, m) {
		keys, err := other.keysOf(ctx, obj)
		if err != nil {
			return true
		}
		if slices.ContainsFunc(keys, func(k namedKey) bool { return k.norm == key }) {
			return true
		}
	}
	return false
}

// indexKeys returns the normalized keys obj names; an object whose keys
// cannot be computed names none.
func (m *Middleware) indexKeys(obj client.Object) []string {
	keys, err := m.keysOf(logr.NewContext(context.Background(), m.indexLog), obj)
	if err != nil {
		return nil
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.norm
	}
	return out
}

// unknownKeys is the key index's value for an object that may still act
// for keys its spec does not name now: its keys cannot be computed
// (InvalidKey), or its condition says it may act for what an older spec
// named (Claimed for an older generation, or Stopping). The predecessor
// check must find it whatever key it asks about. No key equals it: keys
// have no control characters.
const unknownKeys = "\x00unknown"

// indexKeyValues is the key index: the keys obj names, and unknownKeys when
// it may act for others.
func (m *Middleware) indexKeyValues(obj client.Object) []string {
	named, err := m.keysOf(logr.NewContext(context.Background(), m.indexLog), obj)
	if err != nil {
		return []string{unknownKeys}
	}
	keys := m.indexKeys(obj)
	if c := m.conditionOf(obj); mayAct(c) && !m.claimedFor(c, named) {
		keys = append(keys, unknownKeys)
	}
	return keys
}

// indexRecords returns the record names of the keys obj names: the names
// of the objects the backend stores their records in (claim.Claimer.RecordRef:
// a Lease's name, or the object the annotation backend's Target names), or,
// for a backend that does not say, the record name of the claim
// configuration.
func (m *Middleware) indexRecords(obj client.Object) []string {
	keys := m.indexKeys(obj)
	for i, k := range keys {
		// A backend that does not say where it stores a record keeps it
		// under the configuration's record name, as far as this index goes.
		ref, _ := m.recordRef(k)
		keys[i] = ref.Name
	}
	return keys
}

// recordRef names the object that stores the record of key (normalized):
// where the backend says (Claimer.RecordRef), else the claim
// configuration's record name in the claim namespace, which is where a
// Lease backend wrapped by another keeps it. ok is false for a backend that
// does not say and does not store records in Leases.
func (m *Middleware) recordRef(key string) (ref types.NamespacedName, ok bool) {
	if ref, ok := m.claimer.RecordRef(key); ok {
		return ref, true
	}
	cfg := m.claimer.Config()
	return types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.NameFunc(key)}, m.recordsAreLeases()
}

func (m *Middleware) indexWaiting(obj client.Object) []string {
	conds, err := conditionsOf(obj)
	if err != nil {
		return nil
	}
	for _, c := range *conds {
		if c.Type == string(m.cfg.condType) && c.Reason == string(conditions.ReasonWaitingForHandover) {
			return []string{"true"}
		}
	}
	return nil
}

// SetupWithManager completes b, a builder for the middleware's object type
// with whatever the inner reconciler watches, with the watches the claims
// need, and registers the middleware as its reconciler:
//
//   - the claim records (when the backend stores them in objects, such as
//     Leases), so that every create, change or deletion of a record
//     reconciles every object that names its key, holder and waiters alike,
//     and the record's holder;
//   - the deletion of an object of the type, so that the objects naming its
//     keys judge its claims again even when no record changes (an object
//     deleted without its finalizer).
//
// The controller is named after the middleware ([WithName]; by default the
// lower-case kind, controller-runtime's own default), which its metrics carry
// as their "controller" label. It registers the key index on mgr's cache. Restrict the
// manager's cache of records to the claim namespace with the backend's cache
// options (lease.CacheByObject): record events outside it are ignored, but
// a cluster-wide Lease cache still holds and delivers every Lease of the
// cluster. SetupWithManager logs [RecordCacheNotRestricted] through mgr's
// logger when mgr's cache answers for Leases in a namespace other than the
// claim namespace. Wake-ups for a handover gate are opt-in: add a watch with
// [Middleware.HandoverEvents] to b.
func (m *Middleware) SetupWithManager(mgr manager.Manager, b *builder.Builder) error {
	if b == nil {
		return errors.New("setting up claim middleware: builder is nil; pass ctrl.NewControllerManagedBy(mgr).For(...)")
	}
	if err := m.index(context.Background(), mgr); err != nil {
		return fmt.Errorf("setting up claim middleware: %w", err)
	}
	m.checkRecordCache(mgr)
	b = b.Named(m.cfg.name)
	if t := m.claimer.RecordType(); t != nil {
		b = b.Watches(t, m.ClaimEvents())
	}
	b = b.Watches(newObject(m.cfg.prototype), m.holderEvents())
	if m.renew != nil {
		b = b.WatchesRawSource(source.Channel(m.renew.ended, &handler.EnqueueRequestForObject{}))
	}
	b = b.WatchesRawSource(source.Channel(m.waiters, &handler.EnqueueRequestForObject{}))
	if w := m.cfg.yieldWake; m.cfg.fairness && w != nil {
		b = b.WatchesRawSource(source.Channel(w.events, &handler.EnqueueRequestForObject{}))
	}
	if err := b.Complete(m); err != nil {
		return fmt.Errorf("setting up claim middleware: %w", err)
	}
	return nil
}

// RecordCacheNotRestricted is the message SetupWithManager logs when the
// manager's cache of Lease records is not restricted to the claim
// namespace.
const RecordCacheNotRestricted = "claim records are cached outside the claim namespace: restrict the manager's Lease cache to it (lease.CacheByObject)"

// cacheProbeTimeout bounds SetupWithManager's probe of the record cache,
// which may wait for an informer to sync when the manager already runs.
const cacheProbeTimeout = 2 * time.Second

// checkRecordCache logs RecordCacheNotRestricted when mgr's cache would
// serve Leases of a namespace other than the claim namespace. A cache
// restricted to some namespaces refuses such a read at once; an unrestricted
// one answers that it has not started (or, started, answers at all).
func (m *Middleware) checkRecordCache(mgr manager.Manager) {
	if !m.recordsAreLeases() {
		return
	}
	ns := m.claimer.Config().Namespace
	probe := metav1.NamespaceSystem
	if ns == probe {
		probe = metav1.NamespaceDefault
	}
	ctx, cancel := context.WithTimeout(context.Background(), cacheProbeTimeout)
	defer cancel()
	err := mgr.GetCache().Get(ctx, types.NamespacedName{Namespace: probe, Name: "ocf-claim-cache-probe"}, &coordinationv1.Lease{})
	var notStarted *cache.ErrCacheNotStarted
	if err == nil || errors.As(err, &notStarted) || apierrors.IsNotFound(err) || errors.Is(err, context.DeadlineExceeded) {
		mgr.GetLogger().Info(RecordCacheNotRestricted, "middleware", m.cfg.name, "claimNamespace", ns)
	}
}

// ClaimEvents returns the event handler for claim records: every create,
// change or deletion of a record reconciles every object that names the
// record's key (found through the middleware's key index) and the holder the
// record names. When a record is deleted (its key is free), the first of
// the objects naming its key in fairness order (creation time, then
// namespace/name) that is neither its holder nor being deleted is woken at
// once and the others once that object's pass ended, or a second later at
// the latest: a thousand waiters woken together would race their Creates
// and hold up the one that wins. [Middleware.SetupWithManager] watches the
// backend's records with it; watch them yourself only when the records are
// objects the backend cannot name (a custom backend), and still register the
// middleware with SetupWithManager: the handler finds the objects naming a
// key through the index SetupWithManager registers. Without it only the
// record's holder is woken, and the rest wait for their requeue.
func (m *Middleware) ClaimEvents() handler.EventHandler {
	return recordEvents{m: m}
}

// recordWake is what a change of a record concerns: the objects it names
// (its holder, holders whose commit to its key waited), and the objects
// that name its key (the key index) or whose key's record it is (the
// records index), as the manager's cache shows them.
type recordWake struct {
	// key is the record's key, "" when it is none of this Claimer's.
	key string
	// holder is the object the record names as holder, if any.
	holder types.NamespacedName
	direct []reconcile.Request
	namers []client.Object
}

// recordChanged maps a record object to the objects its change concerns.
// Only records where this Claimer keeps them count: a Lease outside the
// claim namespace is ignored (a tenant's own Leases, which leader election
// needs it to write, would otherwise wake any object their annotations
// name), and a record of another claim set (its Set annotation names
// another set) wakes only the objects whose key's record it sits at (the
// objects it blocks), never the key or holder its annotations name.
func (m *Middleware) recordChanged(ctx context.Context, rec client.Object) recordWake {
	ctx = m.outsidePass(ctx)
	cfg := m.claimer.Config()
	var w recordWake
	if m.recordsAreLeases() && rec.GetNamespace() != cfg.Namespace {
		return w
	}
	a := cfg.Annotations
	ann := rec.GetAnnotations()
	w.namers = objectsOf(m.namingList(ctx, m.recordsIndex(), rec.GetName()))
	if set := ann[a.Set]; set != "" && set != cfg.Set {
		return w
	}
	if key, ok := ann[a.Key]; ok {
		w.key = key
		w.namers = append(w.namers, objectsOf(m.namingList(ctx, m.keysIndex(), key))...)
		// The record of a key a successor lacked changed (created again):
		// the holders whose commit to it waited judge again.
		for _, h := range m.pending.takeKey(key) {
			w.direct = append(w.direct, reconcile.Request{NamespacedName: h})
		}
	}
	if name := ann[a.HolderName]; name != "" && (ann[a.HolderKind] == "" || ann[a.HolderKind] == m.cfg.kind) {
		w.holder = types.NamespacedName{Namespace: ann[a.HolderNamespace], Name: name}
		w.direct = append(w.direct, reconcile.Request{NamespacedName: w.holder})
		if key, ok := ann[a.Key]; ok {
			m.lastHolders.add(key, w.holder, types.UID(ann[a.HolderUID]))
		}
	}
	mutant.Do(mutant.NotWokenByRecordEvents, func() {
		w.direct = withoutHolder(w.direct, ann[a.HolderName])
		w.namers = slices.DeleteFunc(w.namers, func(o client.Object) bool { return o.GetName() == ann[a.HolderName] })
	})
	return w
}

// recordsAreLeases reports whether the backend stores records in Leases of
// the claim namespace (the Lease backend), the records a namespace check
// applies to; the annotation backend's records are the claimed objects,
// wherever they live.
func (m *Middleware) recordsAreLeases() bool {
	_, ok := m.claimer.RecordType().(*coordinationv1.Lease)
	return ok
}

// naming returns a request for every object whose index value under index
// is value, read from the cache.
func (m *Middleware) naming(ctx context.Context, index, value string) []reconcile.Request {
	list := m.namingList(ctx, index, value)
	if list == nil {
		return nil
	}
	return requestsOf(list)
}

// namingList lists the objects whose index value under index is value, read
// from the cache; nil when they cannot be listed (logged).
func (m *Middleware) namingList(ctx context.Context, index, value string) client.ObjectList {
	list, err := m.newList()
	if err != nil {
		logError(ctx, err, "listing the objects that name a claim key")
		return nil
	}
	if err := m.cfg.client.List(ctx, list, client.MatchingFields{index: value}); err != nil {
		logError(ctx, err, "listing the objects that name a claim key", "index", index, "value", value)
		return nil
	}
	return list
}

// holderEvents wakes the objects that name the keys of an object that
// started being deleted or is gone, for the keys whose record names it (as
// holder or planned successor): a Liveness may judge such a holder dead
// before any record changes. The default liveness judges a holder alive
// until it is gone, so with it the start of a deletion wakes none of them:
// the release of its deletion path does. An object no record names holds nothing and
// hands nothing over, so its deletion wakes nobody, whatever keys it named:
// a tenant that creates and deletes objects naming other tenants' keys
// costs them no passes. With [WithFairness], the objects that may yield a
// free key to it are woken too (mayYieldTo: it goes before them in the
// fairness order, created earlier, ties broken by namespace/name, and their
// cached condition does not say they wait for a holder or cannot claim), in
// any namespace, since siblings are ordered across namespaces; so are they
// when it stops naming their key, or its condition starts saying it cannot
// claim. An object deleted soon after it was created is younger than every
// object that named its keys before it, so it wakes none of them.
func (m *Middleware) holderEvents() handler.EventHandler {
	// woken wakes the objects naming obj's keys; started says its deletion
	// only started.
	woken := func(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], started bool) {
		for _, key := range m.indexKeys(obj) {
			// A holder whose deletion only started stays alive for a
			// liveness that judges it so until it is gone: its key frees
			// when its deletion path releases the record, and that change
			// wakes every waiter. Waking them now too would run a pass of
			// each before the holder's own (a thousand waiters: seconds).
			named := !(started && m.claimer.JudgesDeletingHoldersAlive()) && m.recordNames(ctx, key, obj)
			if !named && !m.cfg.fairness {
				continue
			}
			m.wakeOthersNaming(ctx, key, obj, q, func(other client.Object) bool {
				return named || m.cfg.fairness && m.mayYieldTo(obj, other)
			})
		}
	}
	wake := func(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		woken(ctx, obj, q, false)
	}
	return handler.Funcs{
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			ctx = m.outsidePass(ctx)
			was, is := m.conditionOf(e.ObjectOld), m.conditionOf(e.ObjectNew)
			if !sameJudgement(was, is) || e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
				// A successor's condition or spec changed: the holders whose
				// commit to it waited judge again, whatever the manager's
				// cache of records shows (recordNames may lag).
				for _, h := range m.pending.takeSuccessor(e.ObjectNew.GetUID()) {
					q.Add(reconcile.Request{NamespacedName: h})
				}
			}
			switch {
			case e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil:
				woken(ctx, e.ObjectNew, q, true)
			case mayAct(was) && !sameJudgement(was, is),
				// Claimed for its new spec now: it stopped acting for keys
				// its older spec named.
				mayAct(is) && was.ObservedGeneration != is.ObservedGeneration,
				// Its first pass for a changed key set succeeded.
				strings.HasSuffix(was.Message, changingKeys) && !strings.HasSuffix(is.Message, changingKeys),
				// Its deletion pass succeeded, whatever it said before.
				!saysReleased(was) && saysReleased(is):
				// It stopped acting for its keys, or for some of them (any
				// change of a condition that says it may act: Stopping to
				// Claimed for its other keys is its told pass succeeding):
				// an object waiting for a key it may have acted for asks
				// again. Its keys may be
				// unknown now, or another middleware's: every object
				// waiting for a handover in this manager asks.
				// Also when it waits for a handover itself now: that wake
				// is among these. An object being deleted stays alive for
				// a liveness that judges it so until it is gone, as when
				// its deletion started: the release of its records (or
				// its going) wakes the objects naming their keys, the
				// first of them alone.
				woken(ctx, e.ObjectNew, q, e.ObjectNew.GetDeletionTimestamp() != nil)
				m.wakeWaiting(ctx, q)
			case is.Reason == string(conditions.ReasonWaitingForHandover) && !sameJudgement(was, is):
				// It waits for a handover now, or for another one, or for its
				// new spec: its predecessor may commit.
				wake(ctx, e.ObjectNew, q)
			}
			if m.cfg.fairness {
				// It stops counting as a sibling for the keys it no longer
				// names, whatever its condition says, and for every key once
				// its condition says it cannot claim.
				keys := droppedKeys(m.indexKeys(e.ObjectOld), m.indexKeys(e.ObjectNew))
				if stoppedCounting(e.ObjectOld, e.ObjectNew, was, is) {
					keys = append(keys, m.indexKeys(e.ObjectNew)...)
				}
				m.wakeYielders(ctx, e.ObjectNew, keys, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			ctx = m.outsidePass(ctx)
			wake(ctx, e.Object, q)
			// Records it still holds for keys its last spec did not name
			// (its keys changed, or could not be computed, and it was
			// deleted without its deletion path): their waiters judge it
			// gone now.
			m.wakeHoldersWaiters(ctx, e.Object, q)
			// It may have been the predecessor of objects waiting for keys it
			// no longer named: they ask again.
			m.wakeWaiting(ctx, q)
		},
	}
}

// wakeWaiting wakes, in every middleware of the manager, every object
// waiting for a handover, and every holder of this middleware whose commit
// of a handover waited: its successor may have waited for an earlier holder
// of another key to stop, which it need not say by a change of its own
// condition. (Its own holders only: q is this middleware's queue, and a
// holder taken from another's memory would be woken here, not there.) The
// objects waiting through another middleware go to that middleware's
// controller (its waiters channel), not to q: a request on q would run this
// middleware's pass of them, not theirs.
func (m *Middleware) wakeWaiting(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	for _, other := range setUp.onManager(m.kind.mgr) {
		if other == m {
			for _, r := range other.waiting(ctx) {
				q.Add(r)
			}
			continue
		}
		other.wakeWaiters(ctx)
	}
	for _, h := range m.pending.takeAll() {
		q.Add(reconcile.Request{NamespacedName: h})
	}
}

// waitersBuffer bounds the wake-ups of objects waiting for a handover that
// other middlewares sent and the controller has not taken yet; one sent
// when it is full is dropped (the object's waiting requeue still comes).
const waitersBuffer = 1024

// wakeWaiters sends every object of m's kind whose claim condition is
// WaitingForHandover, read from the cache, to m's controller.
func (m *Middleware) wakeWaiters(ctx context.Context) {
	list := m.namingList(ctx, m.waitingIndex(), "true")
	if list == nil {
		return
	}
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(client.Object); ok {
			select {
			case m.waiters <- event.GenericEvent{Object: obj}:
			default:
			}
		}
		return nil
	})
}

// wakeHoldersWaiters wakes the objects that name the key of a record obj
// holds, as the manager's cache shows them.
func (m *Middleware) wakeHoldersWaiters(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	self, err := m.claimer.HolderOf(obj)
	if err != nil {
		return
	}
	recs, err := m.claimer.CachedHoldings(ctx, self)
	if err != nil {
		return
	}
	for _, rec := range recs {
		for _, r := range m.naming(ctx, m.keysIndex(), rec.Key) {
			if r.NamespacedName != client.ObjectKeyFromObject(obj) {
				q.Add(r)
			}
		}
	}
}

// waiting returns a request for every object of the middleware's kind whose
// claim condition is WaitingForHandover, read from the cache.
func (m *Middleware) waiting(ctx context.Context) []reconcile.Request {
	return m.naming(ctx, m.waitingIndex(), "true")
}

// recordNames reports whether the record of key, read from the manager's
// cache, names obj as its holder or planned successor. A record whose place
// is not known without reading it (recordRef), or that the cache cannot
// answer for, is taken to name it (the safe side: a wake-up too many).
func (m *Middleware) recordNames(ctx context.Context, key string, obj client.Object) bool {
	ref, ok := m.recordRef(key)
	proto := m.claimer.RecordType()
	if !ok || proto == nil {
		return true
	}
	rec, ok := proto.DeepCopyObject().(client.Object)
	if !ok {
		return true
	}
	err := m.cfg.client.Get(ctx, ref, rec)
	switch {
	case apierrors.IsNotFound(err):
		return false
	case err != nil:
		return true
	}
	uid := string(obj.GetUID())
	a := m.claimer.Config().Annotations
	ann := rec.GetAnnotations()
	return uid != "" && (ann[a.HolderUID] == uid || strings.Contains(ann[a.Successor], uid))
}

// stoppedCounting reports whether an object stopped counting as a sibling
// that could take a free key ([WithFairness]): its condition for its current
// spec now says it waits elsewhere or cannot claim, and before this change it
// did not.
func stoppedCounting(old, cur client.Object, was, is metav1.Condition) bool {
	blockedNow := is.ObservedGeneration == cur.GetGeneration() && is.Status != metav1.ConditionTrue && blockedReasons[is.Reason]
	blockedBefore := was.ObservedGeneration == old.GetGeneration() && was.Status != metav1.ConditionTrue && blockedReasons[was.Reason]
	return blockedNow && !blockedBefore
}

// wakeYielders wakes the objects that may yield one of keys, while it is
// free, to obj (mayYieldTo).
func (m *Middleware) wakeYielders(ctx context.Context, obj client.Object, keys []string, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	for _, key := range keys {
		m.wakeOthersNaming(ctx, key, obj, q, func(other client.Object) bool { return m.mayYieldTo(obj, other) })
	}
}

// mayYieldTo reports whether other may be yielding a free key to obj: obj
// goes before it in the fairness order and other's cached condition does
// not say it waits for a holder or cannot claim. Not only an other the cache
// shows NotFirst: its own NotFirst write may not have reached the cache when
// obj's change (or deletion) does, and then nothing else wakes it before its
// grace ends.
func (m *Middleware) mayYieldTo(obj, other client.Object) bool {
	if !goesBefore(obj, other) {
		return false
	}
	c := m.claimCondition(other)
	return c == nil || c.Reason == string(conditions.ReasonNotFirst) || !blockedReasons[c.Reason]
}

// droppedKeys returns the keys of was that is does not name.
func droppedKeys(was, is []string) []string {
	var out []string
	for _, k := range was {
		if !slices.Contains(is, k) {
			out = append(out, k)
		}
	}
	return out
}

// wakeOthersNaming wakes the objects other than obj that name key, as the
// manager's cache shows them, that pick selects.
func (m *Middleware) wakeOthersNaming(ctx context.Context, key string, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request], pick func(client.Object) bool) {
	list := m.namingList(ctx, m.keysIndex(), key)
	if list == nil {
		return
	}
	self := client.ObjectKeyFromObject(obj)
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		other, ok := o.(client.Object)
		if ok && client.ObjectKeyFromObject(other) != self && pick(other) {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(other)})
		}
		return nil
	})
}

// goesBefore reports whether a goes before b in the fairness order of
// claim.WithSiblings (creation time, then namespace/name), so that b may
// yield a free key to a. An object without a creation time goes before
// nobody, as it is no sibling there.
func goesBefore(a, b client.Object) bool {
	ta, tb := a.GetCreationTimestamp().Time, b.GetCreationTimestamp().Time
	switch {
	case ta.IsZero():
		return false
	case tb.IsZero() || !ta.Equal(tb):
		return tb.IsZero() || ta.Before(tb)
	}
	return client.ObjectKeyFromObject(a).String() < client.ObjectKeyFromObject(b).String()
}

// HandoverEvents returns the event handler that wakes objects waiting for a
// handover: watch what the HandoverGate looks at (the previous holder's pods,
// for [PodsGone]) with it, and every object whose claim condition is
// WaitingForHandover asks the gate again on any event of those objects,
// found through an index of the cache. Objects in other states are not
// woken.
func (m *Middleware) HandoverEvents() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		ctx = m.outsidePass(ctx)
		list, err := m.newList()
		if err != nil {
			logError(ctx, err, "listing the objects waiting for a handover")
			return nil
		}
		if err := m.cfg.client.List(ctx, list, client.MatchingFields{m.waitingIndex(): "true"}); err != nil {
			logError(ctx, err, "listing the objects waiting for a handover")
			return nil
		}
		return requestsOf(list)
	})
}

// newList returns an empty list of the middleware's object type.
func (m *Middleware) newList() (client.ObjectList, error) {
	gvk := m.cfg.gvk
	gvk.Kind += "List"
	obj, err := m.cfg.client.Scheme().New(gvk)
	if err != nil {
		return nil, fmt.Errorf("making a list of %s: %w", m.cfg.gvk.Kind, err)
	}
	list, ok := obj.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("making a list of %s: %T is not a list", m.cfg.gvk.Kind, obj)
	}
	return list, nil
}

// objectsOf returns the objects of list; none for a nil list.
func objectsOf(list client.ObjectList) []client.Object {
	if list == nil {
		return nil
	}
	var out []client.Object
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(client.Object); ok {
			out = append(out, obj)
		}
		return nil
	})
	return out
}

// requestsFor returns a request for each of objs.
func requestsFor(objs []client.Object) []reconcile.Request {
	reqs := make([]reconcile.Request, len(objs))
	for i, o := range objs {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)}
	}
	return reqs
}

func requestsOf(list client.ObjectList) []reconcile.Request {
	var reqs []reconcile.Request
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		if obj, ok := o.(client.Object); ok {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
		}
		return nil
	})
	return reqs
}
