package claimmw

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/claim"
)

// maxTouched bounds how many claim records the tracker remembers a last
// event for. When it is full the memory is dropped and every object that is
// being reconciled at that moment counts as possibly missed: it is requeued
// soon, which is the safe side.
const maxTouched = 4096

// tracker is the middleware's memory: which objects wait on which claim
// record (for wake-ups), which keys each object kept at its last sweep (so a
// steady pass lists nothing), and how many keys each holds (for the gauge).
// It is bounded by the number of objects the controller reconciles and is
// cleaned when an object is granted, deleted, or found gone.
type tracker struct {
	mu sync.Mutex
	// seq counts claim events; touched remembers the seq of the last event
	// of each record, and floor the seq at which touched was last dropped.
	seq     uint64
	floor   uint64
	touched map[types.NamespacedName]uint64
	// handoverSeq is the seq of the last event handed to HandoverEvents.
	handoverSeq uint64

	waitingOn map[types.NamespacedName]types.NamespacedName // object -> record
	waiters   map[types.NamespacedName]map[types.NamespacedName]struct{}
	handover  map[types.NamespacedName]struct{} // objects WaitingForHandover

	sweptKeys map[types.NamespacedName]sweptEntry
	held      map[types.NamespacedName]int
	heldTotal int
}

func newTracker() *tracker {
	return &tracker{
		touched:   map[types.NamespacedName]uint64{},
		waitingOn: map[types.NamespacedName]types.NamespacedName{},
		waiters:   map[types.NamespacedName]map[types.NamespacedName]struct{}{},
		handover:  map[types.NamespacedName]struct{}{},
		sweptKeys: map[types.NamespacedName]sweptEntry{},
		held:      map[types.NamespacedName]int{},
	}
}

// snapshot returns the event count at the start of a pass.
func (t *tracker) snapshot() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seq
}

// wait registers obj as waiting on record (nil: on nothing but its
// requeue), replacing what it waited on before. It reports whether an event
// that would have woken obj arrived since snap, before obj was registered.
func (t *tracker) wait(obj types.NamespacedName, record *claim.Record, handover bool, snap uint64) (missed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unwaitLocked(obj)
	if handover {
		t.handover[obj] = struct{}{}
		missed = t.handoverSeq > snap
	}
	if record == nil {
		return missed
	}
	ref := record.Ref
	t.waitingOn[obj] = ref
	set := t.waiters[ref]
	if set == nil {
		set = map[types.NamespacedName]struct{}{}
		t.waiters[ref] = set
	}
	set[obj] = struct{}{}
	last, ok := t.touched[ref]
	if !ok {
		last = t.floor
	}
	return missed || last > snap
}

func (t *tracker) stopWaiting(obj types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unwaitLocked(obj)
}

func (t *tracker) unwaitLocked(obj types.NamespacedName) {
	delete(t.handover, obj)
	ref, ok := t.waitingOn[obj]
	if !ok {
		return
	}
	delete(t.waitingOn, obj)
	if set := t.waiters[ref]; set != nil {
		delete(set, obj)
		if len(set) == 0 {
			delete(t.waiters, ref)
		}
	}
}

// recordChanged notes an event of record and returns the objects waiting
// on it. They stay registered until their next pass decides again.
func (t *tracker) recordChanged(ref types.NamespacedName) []reconcile.Request {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	if len(t.touched) >= maxTouched {
		t.touched = map[types.NamespacedName]uint64{}
		t.floor = t.seq
	}
	t.touched[ref] = t.seq
	reqs := make([]reconcile.Request, 0, len(t.waiters[ref]))
	for obj := range t.waiters[ref] {
		reqs = append(reqs, reconcile.Request{NamespacedName: obj})
	}
	return reqs
}

// handoverChanged notes an event that may open a handover gate and returns
// every object waiting for a handover.
func (t *tracker) handoverChanged() []reconcile.Request {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	t.handoverSeq = t.seq
	reqs := make([]reconcile.Request, 0, len(t.handover))
	for obj := range t.handover {
		reqs = append(reqs, reconcile.Request{NamespacedName: obj})
	}
	return reqs
}

// sweptEntry is the key set the last successful sweep of an object kept.
// The UID tells a recreated object of the same name from the old one.
type sweptEntry struct {
	uid  types.UID
	keys []string
}

func (t *tracker) swept(obj types.NamespacedName, uid types.UID) ([]string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.sweptKeys[obj]
	if !ok || e.uid != uid {
		return nil, false
	}
	return e.keys, true
}

func (t *tracker) setSwept(obj types.NamespacedName, uid types.UID, keys []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sweptKeys[obj] = sweptEntry{uid: uid, keys: keys}
}

// forget drops everything remembered about obj.
func (t *tracker) forget(obj types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.unwaitLocked(obj)
	delete(t.sweptKeys, obj)
}

// setHeld records how many keys obj holds and updates the gauge.
func (t *tracker) setHeld(obj types.NamespacedName, n int, r *recorder) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.heldTotal += n - t.held[obj]
	if n == 0 {
		delete(t.held, obj)
	} else {
		t.held[obj] = n
	}
	r.setHeld(t.heldTotal)
}

// ClaimEvents returns the event handler that wakes parked objects: watch the
// claim records with it, and an object parked on a record is reconciled as
// soon as that record is created, changed or deleted, instead of only after
// its requeue interval. For the Lease backend:
//
//	ctrl.NewControllerManagedBy(mgr).
//		For(&v1.CamundaCluster{}).
//		Watches(&coordinationv1.Lease{}, mw.ClaimEvents()).
//		Complete(mw)
//
// The handler maps a record by its namespace and name, as the backend
// reports it in claim.Record.Ref, so it works for any backend whose records
// are objects the manager can watch.
func (m *Middleware) ClaimEvents() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		return m.track.recordChanged(client.ObjectKeyFromObject(obj))
	})
}

// HandoverEvents returns the event handler that wakes objects waiting for a
// handover: watch what the HandoverGate looks at (the previous holder's pods,
// for [PodsGone]) with it, and every object in WaitingForHandover asks the
// gate again on any event of those objects. Objects in other states are not
// woken, so the handler costs nothing while nobody waits.
func (m *Middleware) HandoverEvents() handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return m.track.handoverChanged()
	})
}
