package claimmw

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// WithFairness turns on the fairness pre-filter (claim.WithSiblings) with the
// middleware's own idea of a sibling: while a key is free, an object yields
// it to an older object that names the same key and could take it now. An
// object that is being deleted, or whose claim condition (for its current
// spec) says it waits elsewhere or cannot claim (Parked, NotFirst,
// WaitingForHandover, Foreign, InvalidKey, ClaimError), is no sibling, so a
// free key never waits for an object that will not come for it. Siblings are
// read from the manager's cache through the key index, so it needs
// [Middleware.SetupWithManager]. Needs [WithClaim]: the Claimer is built with
// it.
func WithFairness() Option { return func(c *config) { c.fairness = true } }

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

// siblings lists the objects naming key that could take it now.
func (m *Middleware) siblings(ctx context.Context, key string, self claim.Holder) ([]claim.Holder, error) {
	list, err := m.newList()
	if err != nil {
		return nil, err
	}
	if err := m.cfg.client.List(ctx, list, client.MatchingFields{m.keysIndex(): key}); err != nil {
		return nil, fmt.Errorf("listing the objects that name claim key %q: %w", key, err)
	}
	var out []claim.Holder
	err = meta.EachListItem(list, func(o runtime.Object) error {
		obj, ok := o.(client.Object)
		if !ok || obj.GetUID() == self.UID || !m.couldTake(obj) {
			return nil
		}
		h, err := m.claimer.HolderOf(obj)
		if err != nil {
			return err
		}
		out = append(out, h)
		return nil
	})
	return out, err
}

// couldTake reports whether obj could take a free key now, as far as what
// it says of itself tells.
func (m *Middleware) couldTake(obj client.Object) bool {
	if obj.GetDeletionTimestamp() != nil {
		return false
	}
	conds, err := conditionsOf(obj)
	if err != nil {
		return true
	}
	c := meta.FindStatusCondition(*conds, string(m.cfg.condType))
	return c == nil || c.Status == metav1.ConditionTrue || c.ObservedGeneration != obj.GetGeneration() || !blockedReasons[c.Reason]
}

// predecessor names an object that may still be acting for key although key
// has no record: an object whose claim condition says it may act for its
// keys (Claimed, or Stopping: lost, and not yet stopped), read uncached,
// that names key, or whose keys cannot be computed now. Such a key was freed
// by someone other than its holder (a person or tool deleting the record,
// another writer erasing an annotation record) while the holder still acts;
// it goes to another object only once the holder's told pass succeeded, or
// the holder is gone. The holder itself, woken by the same deletion,
// acquires the key again first, as nobody else may. An object being deleted
// counts until its deletion pass succeeded (the deletion path then says
// Released). Every middleware set up on the same manager whose records of
// key are the same object is asked, so a holder reconciled by another
// middleware (another kind, another condition type) is seen too.
// Candidates come from the managers' cache through the key index; only
// those whose cached condition says they may act are read again, so a free
// key costs no read while nobody acts for it.
func (m *Middleware) predecessor(ctx context.Context, key string, self claim.Holder) (claim.Holder, string, bool, error) {
	if !m.indexed {
		return claim.Holder{}, "", false, nil
	}
	record := m.claimer.Config().NameFunc(key)
	ns := m.claimer.Config().Namespace
	for _, mw := range append([]*Middleware{m}, others(m)...) {
		if mw != m && (mw.claimer.Config().Namespace != ns || mw.claimer.Config().NameFunc(key) != record) {
			continue
		}
		h, detail, ok, err := mw.actingFor(ctx, key, self)
		if err != nil || ok {
			return h, detail, ok, err
		}
	}
	return claim.Holder{}, "", false, nil
}

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
func (m *Middleware) actingFor(ctx context.Context, key string, self claim.Holder) (claim.Holder, string, bool, error) {
	var candidates []client.Object
	for _, value := range []string{key, unknownKeys} {
		list, err := m.newList()
		if err != nil {
			return claim.Holder{}, "", false, err
		}
		if err := m.cfg.client.List(ctx, list, client.MatchingFields{m.keysIndex(): value}); err != nil {
			return claim.Holder{}, "", false, fmt.Errorf("listing the objects that name claim key %q: %w", claim.Redact(key), err)
		}
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			if obj, ok := o.(client.Object); ok && obj.GetUID() != self.UID && mayAct(m.conditionOf(obj)) {
				candidates = append(candidates, obj)
			}
			return nil
		})
	}
	for _, cached := range candidates {
		obj := newObject(m.cfg.prototype)
		if err := m.cfg.apiReader.Get(ctx, client.ObjectKeyFromObject(cached), obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return claim.Holder{}, "", false, fmt.Errorf("reading %s, which may still act for claim key %q: %w", client.ObjectKeyFromObject(cached), claim.Redact(key), err)
		}
		if obj.GetUID() != cached.GetUID() || !mayAct(m.conditionOf(obj)) {
			continue
		}
		// The cache may still show a spec that named key: an object that
		// moved off it released it after its told pass.
		keys, err := m.keysOf(ctx, obj)
		if err == nil && !slices.ContainsFunc(keys, func(k namedKey) bool { return k.norm == key }) {
			continue
		}
		h, err := m.claimer.HolderOf(obj)
		if err != nil {
			return claim.Holder{}, "", false, err
		}
		return h, "its record is gone, but it may still be acting for the key until its reconciler, told to stop, succeeds", true, nil
	}
	return claim.Holder{}, "", false, nil
}
