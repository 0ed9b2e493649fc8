package claimmw

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// HandoverFunc names the object that obj hands key to, for a planned
// handover (see [WithHandover]). ok is false when obj hands nothing over. The
// successor is an object of the type given to [For]; an empty Namespace means
// obj's namespace. An error fails the pass and is retried with backoff; the
// inner reconciler does not run, so it never acts on a handover that could not
// be judged.
type HandoverFunc func(ctx context.Context, obj client.Object, key string) (successor client.ObjectKey, ok bool, err error)

// Handover is one key the object hands over in this pass: the key is still
// held (it is among the grants), and the successor waits for it.
type Handover struct {
	Key       string
	Successor claim.Holder
	// raw is the key as the keys function gave it: the Claimer normalizes it.
	raw string
}

// planHandovers asks the HandoverFunc about every key obj holds and brings
// each record in line with the answer: Prepare for a named successor, Abort
// when none is named any more. It returns the keys handed over in this pass.
// A steady pass (the record already names the successor, or none was named
// and none is pending) writes nothing.
func (m *Middleware) planHandovers(ctx context.Context, obj client.Object, self claim.Holder, held []heldKey) ([]Handover, error) {
	if m.cfg.handover == nil {
		return nil, nil
	}
	var out []Handover
	for _, h := range held {
		o := h.o
		succ, ok, err := m.successorOf(ctx, obj, self, o.Key)
		if err != nil {
			return nil, err
		}
		pending := o.Record.Successor
		if !ok {
			if pending != nil {
				if err := m.claimer.Abort(ctx, h.raw, self); err != nil {
					return nil, fmt.Errorf("aborting handover of claim %q: %w", o.Key, err)
				}
				m.event(obj, corev1.EventTypeNormal, EventHandoverAborted, ActionHandover, fmt.Sprintf("Aborted the handover of %q to %s: it is no longer named.", o.Key, m.shownTo(obj, *pending)))
			}
			continue
		}
		if pending == nil || !pending.Is(succ) {
			if _, err := m.claimer.Prepare(ctx, h.raw, self, succ); err != nil {
				return nil, fmt.Errorf("preparing handover of claim %q to %s: %w", o.Key, succ, err)
			}
			m.event(obj, corev1.EventTypeNormal, EventHandoverPrepared, ActionHandover, fmt.Sprintf("Prepared the handover of %q to %s.", o.Key, m.shownTo(obj, succ)))
		}
		out = append(out, Handover{Key: o.Key, Successor: succ, raw: h.raw})
	}
	return out, nil
}

// successorOf resolves the successor the HandoverFunc names for key to a
// Holder with its UID, read uncached: a cached read could name a successor
// deleted and recreated since. A successor that does not exist, or obj
// itself, is no successor: nothing is prepared until it exists.
func (m *Middleware) successorOf(ctx context.Context, obj client.Object, self claim.Holder, key string) (claim.Holder, bool, error) {
	name, ok, err := m.cfg.handover(ctx, obj, key)
	if err != nil {
		return claim.Holder{}, false, fmt.Errorf("naming the successor of claim %q: %w", key, err)
	}
	if !ok {
		return claim.Holder{}, false, nil
	}
	if name.Namespace == "" {
		name.Namespace = obj.GetNamespace()
	}
	succ := newObject(m.cfg.prototype)
	if err := m.cfg.apiReader.Get(ctx, name, succ); err != nil {
		if apierrors.IsNotFound(err) {
			log.FromContext(ctx).Info("the named successor does not exist; not handing over", "claimKey", key, "successor", name.String())
			return claim.Holder{}, false, nil
		}
		return claim.Holder{}, false, fmt.Errorf("reading successor %s of claim %q: %w", name, key, err)
	}
	h, err := m.claimer.HolderOf(succ)
	if err != nil {
		return claim.Holder{}, false, fmt.Errorf("naming the successor of claim %q: %w", key, err)
	}
	if h.Is(self) {
		log.FromContext(ctx).Info("the object names itself as successor; not handing over", "claimKey", key)
		return claim.Holder{}, false, nil
	}
	if succ.GetDeletionTimestamp() != nil {
		log.FromContext(ctx).Info("the named successor is being deleted; not handing over", "claimKey", key, "successor", name.String())
		return claim.Holder{}, false, nil
	}
	return h, true, nil
}

// successorReady reads succ uncached and reports whether it exists with its
// UID and is not being deleted (there), and whether it waits for key now
// (ready): its claim condition, for its current spec, is WaitingForHandover,
// it names key, and it is granted every key it names before key (it holds
// the record, and no earlier holder may still act for the key), so that key
// is the one it waits for. why says, when it does not wait, why not; lacks
// is the earlier key whose record it does not hold, when that is why.
func (m *Middleware) successorReady(ctx context.Context, key string, succ claim.Holder) (there, ready bool, why, lacks string, err error) {
	obj := newObject(m.cfg.prototype)
	if err := m.cfg.apiReader.Get(ctx, succ.NamespacedName(), obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, false, "", "", nil
		}
		return false, false, "", "", fmt.Errorf("reading successor %s before the commit: %w", succ, err)
	}
	if obj.GetUID() != succ.UID || obj.GetDeletionTimestamp() != nil {
		return false, false, "", "", nil
	}
	c := m.conditionOf(obj)
	if c.Reason != string(conditions.ReasonWaitingForHandover) || c.ObservedGeneration != obj.GetGeneration() {
		return true, false, "it is not waiting for a handover", "", nil
	}
	keys, err := m.keysOf(ctx, obj)
	if err != nil {
		return true, false, "its keys cannot be computed", "", nil //nolint:nilerr // its spec, not this pass, is at fault
	}
	for _, k := range keys {
		if k.norm == key {
			return true, true, "", "", nil
		}
		held, err := m.claimer.Holds(ctx, k.raw, succ)
		if err != nil {
			return true, false, "", "", fmt.Errorf("reading claim %q of successor %s before the commit: %w", claim.Redact(k.norm), succ, err)
		}
		if !held {
			return true, false, fmt.Sprintf("it waits for key %q first", claim.Redact(k.norm)), k.norm, nil
		}
		// Holding the record is not being granted the key: it may wait,
		// without acting for it, for an earlier holder of that key to stop.
		if _, _, waits, err := m.predecessor(confirmingContext(ctx), k.norm, succ, claim.Holder{}); err != nil {
			return true, false, "", "", fmt.Errorf("asking whether successor %s waits for claim %q before the commit: %w", succ, claim.Redact(k.norm), err)
		} else if waits {
			return true, false, fmt.Sprintf("it waits for key %q first", claim.Redact(k.norm)), "", nil
		}
	}
	return true, false, "it does not name the key", "", nil
}

// handOverKept plans and commits the handovers of the keys a parked object
// keeps while it waits for another key. It runs only after a parked pass
// that leaves the object acting for nothing, so the window of each key is
// closed before its successor gets it. waiting reports, as commitHandovers
// does, that a successor does not wait for its key yet.
func (m *Middleware) handOverKept(ctx context.Context, p *pass) (waiting bool, err error) {
	if m.cfg.handover == nil || len(p.granted) == 0 {
		return false, nil
	}
	handovers, err := m.planHandovers(ctx, p.obj, p.self, p.granted)
	if err != nil || len(handovers) == 0 {
		return false, err
	}
	return m.commitHandovers(ctx, p.obj, p.self, handovers)
}

// commitHandovers makes each successor the holder of its key. It runs only
// after an inner pass that saw the handovers and returned success without a
// requeue: that pass moved the workloads off the keys. A successor that does
// not wait for the key now (it waits for another key first, does not name it
// yet, or has not yet seen the prepared handover) is not committed to: it
// would give the key up at once, and the handover would start again. The
// key is kept, both objects are told why, and waiting reports that the pass
// should ask again.
func (m *Middleware) commitHandovers(ctx context.Context, obj client.Object, self claim.Holder, handovers []Handover) (waiting bool, err error) {
	var errs []error
	for _, h := range handovers {
		// The successor was read when the pass began; it may be gone since,
		// and a record handed to a holder that is gone would outlive it.
		there, ready, why, lacks, err := m.successorReady(ctx, h.Key, h.Successor)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !there {
			if err := m.claimer.Abort(ctx, h.raw, self); err != nil {
				errs = append(errs, fmt.Errorf("aborting handover of claim %q to %s, which is gone: %w", h.Key, h.Successor, err))
				continue
			}
			m.event(obj, corev1.EventTypeNormal, EventHandoverAborted, ActionHandover, fmt.Sprintf("Aborted the handover of %q to %s: it is gone or being deleted.", h.Key, m.shownTo(obj, h.Successor)))
			continue
		}
		if !ready {
			waiting = true
			// The successor's answer changes with its condition, with the
			// record of an earlier key it lacks, or when an earlier holder
			// of such a key stops: each wakes this holder. A change to
			// waiting alone may never come: it may say it waits for this
			// key all along while it lacks an earlier one, created again
			// by its next pass.
			m.pending.add(h.Successor.UID, lacks, client.ObjectKeyFromObject(obj))
			note := fmt.Sprintf("Keeps %q until %s waits for it: %s.", h.Key, m.shownTo(obj, h.Successor), why)
			log.FromContext(ctx).Info("not committing a handover to a successor that does not wait for the key", "claimKey", claim.Redact(h.Key), "successor", h.Successor.String(), "why", why)
			m.event(obj, corev1.EventTypeNormal, EventHandoverPending, ActionHandover, note)
			if succ := newObject(m.cfg.prototype); m.cfg.apiReader.Get(ctx, h.Successor.NamespacedName(), succ) == nil {
				m.event(succ, corev1.EventTypeNormal, EventHandoverPending, ActionHandover, fmt.Sprintf("%s keeps %q for it until it waits for the key: %s.", m.shownTo(succ, self), h.Key, why))
			}
			continue
		}
		o, err := m.claimer.Commit(ctx, h.raw, self, h.Successor)
		if err != nil {
			errs = append(errs, fmt.Errorf("committing handover of claim %q to %s: %w", h.Key, h.Successor, err))
			continue
		}
		m.renew.stop(client.ObjectKeyFromObject(obj), h.Key)
		log.FromContext(ctx).Info("handed claim over", "claimKey", h.Key, "successor", h.Successor.String(), "token", o.Token.String())
		m.event(obj, corev1.EventTypeNormal, EventHandedOver, ActionHandover, fmt.Sprintf("Handed %q over to %s.", h.Key, m.shownTo(obj, h.Successor)))
	}
	return waiting, errors.Join(errs...)
}

// shownTo is other as the events of viewer may name it under the
// middleware's disclosure: by name under DiscloseAll, or under
// DiscloseSameNamespace when it is in viewer's namespace; otherwise only as
// "an object outside this namespace", or, under DiscloseNone, "another
// object", as the conditions say (a handover to another tenant's object
// must not tell the holder that tenant's namespace and name).
func (m *Middleware) shownTo(viewer client.Object, other claim.Holder) string {
	switch {
	case m.cfg.disclosure == DiscloseNone:
		return "another object"
	case m.cfg.disclosure == DiscloseAll || other.Namespace == viewer.GetNamespace():
		return other.String()
	}
	return "an object outside this namespace"
}

// pendingCommits remembers the holders whose commit of a handover this
// process refused because the successor did not wait for the key: it did
// not say yet that it waits, did not name the key, or waited for another key
// first (one whose record it did not hold, or whose earlier holder may still
// act for it). Each is woken, and forgotten, by the next change of the
// successor's condition or spec, by the next change of the record of the
// earlier key it lacked, and whenever an object of the manager stops acting
// (an earlier holder of the successor's other key): its pass judges again,
// from the API server, and is remembered again if it still may not commit.
// Memory that only adds wake-ups and never decides; a restarted process
// judges every holder in its first passes.
type pendingCommits struct {
	mu          sync.Mutex
	bySuccessor map[types.UID]map[types.NamespacedName]struct{}
	// byKey: the holders whose successor lacked the record of that key
	// (normalized).
	byKey map[string]map[types.NamespacedName]struct{}
}

// add remembers holder as waiting on successor and, unless empty, on the
// record of the key it lacks.
func (p *pendingCommits) add(successor types.UID, lacks string, holder types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bySuccessor == nil {
		p.bySuccessor = map[types.UID]map[types.NamespacedName]struct{}{}
		p.byKey = map[string]map[types.NamespacedName]struct{}{}
	}
	put := func(set map[types.NamespacedName]struct{}) map[types.NamespacedName]struct{} {
		if set == nil {
			set = map[types.NamespacedName]struct{}{}
		}
		set[holder] = struct{}{}
		return set
	}
	if successor != "" {
		p.bySuccessor[successor] = put(p.bySuccessor[successor])
	}
	if lacks != "" {
		p.byKey[lacks] = put(p.byKey[lacks])
	}
}

// takeSuccessor returns and forgets the holders waiting on successor.
func (p *pendingCommits) takeSuccessor(successor types.UID) []types.NamespacedName {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := names(p.bySuccessor[successor])
	delete(p.bySuccessor, successor)
	return out
}

// takeKey returns and forgets the holders waiting on the record of key.
func (p *pendingCommits) takeKey(key string) []types.NamespacedName {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := names(p.byKey[key])
	delete(p.byKey, key)
	return out
}

// takeAll returns and forgets every holder remembered.
func (p *pendingCommits) takeAll() []types.NamespacedName {
	p.mu.Lock()
	defer p.mu.Unlock()
	all := map[types.NamespacedName]struct{}{}
	for _, set := range p.bySuccessor {
		for h := range set {
			all[h] = struct{}{}
		}
	}
	for _, set := range p.byKey {
		for h := range set {
			all[h] = struct{}{}
		}
	}
	p.bySuccessor, p.byKey = nil, nil
	return names(all)
}

// forget drops holder, an object that is gone.
func (p *pendingCommits) forget(holder types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for succ, set := range p.bySuccessor {
		if delete(set, holder); len(set) == 0 {
			delete(p.bySuccessor, succ)
		}
	}
	for key, set := range p.byKey {
		if delete(set, holder); len(set) == 0 {
			delete(p.byKey, key)
		}
	}
}

func names(set map[types.NamespacedName]struct{}) []types.NamespacedName {
	out := make([]types.NamespacedName, 0, len(set))
	for h := range set {
		out = append(out, h)
	}
	return out
}
