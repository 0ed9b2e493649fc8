package claimmw

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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
	return nil
}

// kindKey is one kind reconciled in one manager.
type kindKey struct {
	mgr manager.Manager
	gvk schema.GroupVersionKind
}

// setUp lists the middlewares set up per kind and manager: configuration,
// known once the operator has built its controllers. A pass asks it only
// whether another middleware of its kind names a key for the same object.
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
	keys, err := m.keysOf(context.Background(), obj)
	if err != nil {
		return nil
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.norm
	}
	return out
}

// unknownKeys is the key index's value for an object whose keys cannot be
// computed now (InvalidKey): it may still act for keys it named before, so
// the predecessor check must find it. No key equals it: keys have no
// control characters.
const unknownKeys = "\x00unknown"

// indexKeyValues is the key index: the keys obj names, or unknownKeys.
func (m *Middleware) indexKeyValues(obj client.Object) []string {
	if _, err := m.keysOf(context.Background(), obj); err != nil {
		return []string{unknownKeys}
	}
	return m.indexKeys(obj)
}

// indexRecords returns the record names of the keys obj names.
func (m *Middleware) indexRecords(obj client.Object) []string {
	keys := m.indexKeys(obj)
	cfg := m.claimer.Config()
	for i, k := range keys {
		keys[i] = cfg.NameFunc(k)
	}
	return keys
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
// options (lease.CacheOptions). Wake-ups for a handover gate are opt-in:
// add a watch with [Middleware.HandoverEvents] to b.
func (m *Middleware) SetupWithManager(mgr manager.Manager, b *builder.Builder) error {
	if b == nil {
		return errors.New("setting up claim middleware: builder is nil; pass ctrl.NewControllerManagedBy(mgr).For(...)")
	}
	if err := m.index(context.Background(), mgr); err != nil {
		return fmt.Errorf("setting up claim middleware: %w", err)
	}
	b = b.Named(m.cfg.name)
	if t := m.claimer.RecordType(); t != nil {
		b = b.Watches(t, m.ClaimEvents())
	}
	b = b.Watches(newObject(m.cfg.prototype), m.holderEvents())
	if err := b.Complete(m); err != nil {
		return fmt.Errorf("setting up claim middleware: %w", err)
	}
	return nil
}

// ClaimEvents returns the event handler for claim records: every create,
// change or deletion of a record reconciles every object that names the
// record's key (found through the middleware's key index) and the holder the
// record names. [Middleware.SetupWithManager] watches the backend's records
// with it; watch them yourself only when the records are objects the
// backend cannot name (a custom backend), and still register the middleware
// with SetupWithManager: the handler finds the objects naming a key through
// the index SetupWithManager registers. Without it only the record's holder
// is woken, and the rest wait for their requeue.
func (m *Middleware) ClaimEvents() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(m.recordChanged)
}

// recordChanged maps a record object to the objects its change concerns.
func (m *Middleware) recordChanged(ctx context.Context, rec client.Object) []reconcile.Request {
	a := m.claimer.Config().Annotations
	ann := rec.GetAnnotations()
	reqs := m.naming(ctx, m.recordsIndex(), rec.GetName())
	if key, ok := ann[a.Key]; ok {
		reqs = append(reqs, m.naming(ctx, m.keysIndex(), key)...)
	}
	if name := ann[a.HolderName]; name != "" && (ann[a.HolderKind] == "" || ann[a.HolderKind] == m.cfg.kind) {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ann[a.HolderNamespace], Name: name}})
	}
	mutant.Do(mutant.NotWokenByRecordEvents, func() { reqs = withoutHolder(reqs, ann[a.HolderName]) })
	return reqs
}

// naming returns a request for every object whose index value under index
// is value, read from the cache.
func (m *Middleware) naming(ctx context.Context, index, value string) []reconcile.Request {
	list, err := m.newList()
	if err != nil {
		log.FromContext(ctx).Error(err, "listing the objects that name a claim key")
		return nil
	}
	if err := m.cfg.client.List(ctx, list, client.MatchingFields{index: value}); err != nil {
		log.FromContext(ctx).Error(err, "listing the objects that name a claim key", "index", index, "value", value)
		return nil
	}
	return requestsOf(list)
}

// holderEvents wakes the objects that name the keys of an object that
// started being deleted or is gone: a Liveness may judge such a holder dead
// before any record changes.
func (m *Middleware) holderEvents() handler.EventHandler {
	wake := func(ctx context.Context, obj client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		self := client.ObjectKeyFromObject(obj)
		for _, key := range m.indexKeys(obj) {
			for _, r := range m.naming(ctx, m.keysIndex(), key) {
				if r.NamespacedName != self {
					q.Add(r)
				}
			}
		}
	}
	return handler.Funcs{
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			was, is := m.conditionOf(e.ObjectOld), m.conditionOf(e.ObjectNew)
			switch {
			case e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil,
				// It waits for a handover now: its predecessor may commit.
				was.Reason != string(conditions.ReasonWaitingForHandover) && is.Reason == string(conditions.ReasonWaitingForHandover):
				wake(ctx, e.ObjectNew, q)
			case mayAct(was) && !mayAct(is):
				// It stopped acting for its keys: an object waiting for a
				// key it may have acted for asks again. Its keys may be
				// unknown now, or another middleware's: every object
				// waiting for a handover in this manager asks.
				wake(ctx, e.ObjectNew, q)
				for _, other := range setUp.onManager(m.kind.mgr) {
					for _, r := range other.waiting(ctx) {
						q.Add(r)
					}
				}
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			wake(ctx, e.Object, q)
		},
	}
}

// waiting returns a request for every object of the middleware's kind whose
// claim condition is WaitingForHandover, read from the cache.
func (m *Middleware) waiting(ctx context.Context) []reconcile.Request {
	return m.naming(ctx, m.waitingIndex(), "true")
}

// HandoverEvents returns the event handler that wakes objects waiting for a
// handover: watch what the HandoverGate looks at (the previous holder's pods,
// for [PodsGone]) with it, and every object whose claim condition is
// WaitingForHandover asks the gate again on any event of those objects,
// found through an index of the cache. Objects in other states are not
// woken.
func (m *Middleware) HandoverEvents() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		list, err := m.newList()
		if err != nil {
			log.FromContext(ctx).Error(err, "listing the objects waiting for a handover")
			return nil
		}
		if err := m.cfg.client.List(ctx, list, client.MatchingFields{m.waitingIndex(): "true"}); err != nil {
			log.FromContext(ctx).Error(err, "listing the objects waiting for a handover")
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
