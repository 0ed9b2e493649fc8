package claimmw

import (
	"cmp"
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// herdWait is the longest the objects naming a freed key are held back
// while the first of them runs alone (herds).
const herdWait = time.Second

// herds holds back the wake-ups a freed key would cause all at once. Every
// object naming a key whose record was deleted may take it; woken together,
// a thousand waiters race their Creates (all but one refused) and share the
// CPU and the API server with the one that wins, which is then granted
// late. Instead the first of them in fairness order is woken at once, and
// the others when that object's pass ended, whatever it decided (it took
// the key, or could not and they may), or after herdWait at the latest;
// record events of the key meanwhile wake them then too. The record's
// holder and objects a record event names are never held back.
//
// It only delays wake-ups, by at most herdWait, and never drops one: every
// pass still decides from what the API server says, and a process that
// restarts wakes every object from its informers' initial lists.
type herds struct {
	mu sync.Mutex
	by map[string]*herd
}

// herd is one freed key's held-back wake-ups.
type herd struct {
	first types.NamespacedName
	rest  map[reconcile.Request]struct{}
	q     workqueue.TypedRateLimitingInterface[reconcile.Request]
	timer *time.Timer
}

// start holds back the wake-ups of others for key's herd, and returns
// first to wake now. A herd of key already under way (its first has not
// finished its pass) keeps the others for when it ends; its first is woken
// again now, with this release's first: its pass under way may have read
// the key held before this release (taken and freed again meanwhile), and
// would park on a record that is gone.
func (h *herds) start(key string, first reconcile.Request, others []reconcile.Request, q workqueue.TypedRateLimitingInterface[reconcile.Request], wait time.Duration) []reconcile.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	if hd, ok := h.by[key]; ok {
		hd.q = q
		hd.hold(others)
		delete(hd.rest, first)
		if first.NamespacedName == hd.first {
			return []reconcile.Request{first}
		}
		return []reconcile.Request{first, {NamespacedName: hd.first}}
	}
	if h.by == nil {
		h.by = map[string]*herd{}
	}
	hd := &herd{first: first.NamespacedName, rest: map[reconcile.Request]struct{}{}, q: q}
	hd.hold(others)
	hd.timer = time.AfterFunc(wait, func() { h.end(key, hd) })
	h.by[key] = hd
	return []reconcile.Request{first}
}

// hold returns the requests of reqs to wake now: all of them unless key's
// herd is under way, which keeps all but its first for later.
func (h *herds) hold(key string, reqs []reconcile.Request, q workqueue.TypedRateLimitingInterface[reconcile.Request]) []reconcile.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd, ok := h.by[key]
	if !ok {
		return reqs
	}
	hd.q = q
	var now []reconcile.Request
	for _, r := range reqs {
		if r.NamespacedName == hd.first {
			now = append(now, r)
			continue
		}
		hd.rest[r] = struct{}{}
	}
	return now
}

func (hd *herd) hold(reqs []reconcile.Request) {
	for _, r := range reqs {
		if r.NamespacedName != hd.first {
			hd.rest[r] = struct{}{}
		}
	}
}

// passEnded wakes the objects held back behind name.
func (h *herds) passEnded(name types.NamespacedName) {
	h.mu.Lock()
	var done []*herd
	for key, hd := range h.by {
		if hd.first == name {
			hd.timer.Stop()
			delete(h.by, key)
			done = append(done, hd)
		}
	}
	h.mu.Unlock()
	for _, hd := range done {
		hd.wake()
	}
}

// end wakes hd's objects once herdWait passed, unless its first's pass
// ended before.
func (h *herds) end(key string, hd *herd) {
	h.mu.Lock()
	if h.by[key] != hd {
		h.mu.Unlock()
		return
	}
	delete(h.by, key)
	h.mu.Unlock()
	hd.wake()
}

func (hd *herd) wake() {
	for r := range hd.rest {
		hd.q.Add(r)
	}
}

// recordEvents is the handler of [Middleware.ClaimEvents].
type recordEvents struct{ m *Middleware }

func (e recordEvents) Create(ctx context.Context, ev event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	// Records listed when the informer starts: every object is woken by its
	// own informer's initial list anyway; no herd.
	e.m.wakeFor(e.m.recordChanged(ctx, ev.Object), false, q, ev.IsInInitialList)
}

func (e recordEvents) Update(ctx context.Context, ev event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if ev.ObjectOld == nil || ev.ObjectNew == nil {
		for _, o := range []client.Object{ev.ObjectOld, ev.ObjectNew} {
			if o != nil {
				e.m.wakeFor(e.m.recordChanged(ctx, o), false, q, false)
			}
		}
		return
	}
	was, is := e.m.recordChanged(ctx, ev.ObjectOld), e.m.recordChanged(ctx, ev.ObjectNew)
	if was.key != "" && is.key != "" && was.key != is.key {
		e.m.wakeFor(was, false, q, false)
		e.m.wakeFor(is, false, q, false)
		return
	}
	// One key's record: the annotation backend writes and deletes a record
	// by adding and removing annotations, so one side of the update names
	// no key, and the object's namers are that key's. Removing the holder
	// frees the key.
	freed := namesHolder(e.m, ev.ObjectOld) && !namesHolder(e.m, ev.ObjectNew)
	// A resync (the same resourceVersion) changed nothing: as an initial
	// list, at low priority and without a herd, as controller-runtime's own
	// handlers do.
	resync := ev.ObjectOld.GetResourceVersion() == ev.ObjectNew.GetResourceVersion()
	e.m.wakeFor(recordWake{
		key:    cmp.Or(is.key, was.key),
		holder: cmp.Or(was.holder, is.holder),
		direct: append(was.direct, is.direct...),
		namers: append(was.namers, is.namers...),
	}, freed && !resync, q, resync)
}

func (e recordEvents) Delete(ctx context.Context, ev event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	e.m.wakeFor(e.m.recordChanged(ctx, ev.Object), true, q, false)
}

func (e recordEvents) Generic(ctx context.Context, ev event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	e.m.wakeFor(e.m.recordChanged(ctx, ev.Object), false, q, false)
}

// namesHolder reports whether rec, a record object, names a holder.
func namesHolder(m *Middleware, rec client.Object) bool {
	return rec.GetAnnotations()[m.claimer.Config().Annotations.HolderName] != ""
}

// wakeFor enqueues the objects a record's change concerns (recordChanged),
// holding back all but the first of its key's namers while its key's herd
// is under way, or, when freed says the change deleted the record, starting
// one.
// initial is an informer's initial list or a resync: nothing changed since
// the objects' own initial lists woke them.
func (m *Middleware) wakeFor(w recordWake, freed bool, q workqueue.TypedRateLimitingInterface[reconcile.Request], initial bool) {
	now := w.direct
	if initial || w.key == "" {
		now = append(now, requestsFor(w.namers)...)
	} else if first, others, ok := m.firstToWake(w); freed && ok {
		now = append(now, m.herds.start(w.key, first, others, q, cmp.Or(m.cfg.herdWait, herdWait))...)
	} else {
		now = append(now, m.herds.hold(w.key, requestsFor(w.namers), q)...)
	}
	enqueue(q, now, initial)
}

// firstToWake splits w's namers into the first in fairness order (by
// creation time, as [claim.WithSiblings] orders siblings) that may take the
// key, being neither the record's holder nor deleted, and the others; ok
// is false when none may.
func (m *Middleware) firstToWake(w recordWake) (first reconcile.Request, others []reconcile.Request, ok bool) {
	var best client.Object
	for _, obj := range w.namers {
		if obj.GetDeletionTimestamp() != nil || client.ObjectKeyFromObject(obj) == w.holder {
			continue
		}
		if best == nil || goesBefore(obj, best) {
			best = obj
		}
	}
	if best == nil {
		return first, nil, false
	}
	first = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(best)}
	for _, r := range requestsFor(w.namers) {
		if r != first {
			others = append(others, r)
		}
	}
	return first, others, true
}

// enqueue adds reqs to q once each, at low priority for an informer's
// initial list or a resync, as controller-runtime's own handlers do.
func enqueue(q workqueue.TypedRateLimitingInterface[reconcile.Request], reqs []reconcile.Request, initial bool) {
	seen := map[reconcile.Request]bool{}
	for _, r := range reqs {
		if seen[r] {
			continue
		}
		seen[r] = true
		if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok && initial {
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, r)
			continue
		}
		q.Add(r)
	}
}

var _ handler.EventHandler = recordEvents{}
