package claimmw

import (
	"context"
	"fmt"

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
