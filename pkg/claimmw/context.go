package claimmw

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/claim"
)

// Grant is one key the object holds for this pass, with the fencing token of
// the grant. A protected resource that accepts only the newest token refuses
// a holder that lost its key since.
type Grant struct {
	Key   string
	Token claim.Token
}

// State is what the middleware decided for this pass, handed to the inner
// reconciler in its context.
type State struct {
	// Granted is true when the object holds every key it names.
	Granted bool
	// Grants are the keys held, in sorted order; empty unless Granted.
	Grants []Grant
	// Handovers are the held keys this pass hands to a successor (see
	// [WithHandover]): move the workloads off them and return success with
	// a zero Result, and the middleware commits the handovers after the
	// pass. Empty unless Granted.
	Handovers []Handover
	// Condition is the claim condition as the middleware set it. An inner
	// reconciler that runs while parked renders a suspended form from it,
	// and folds it into its Ready with conditions.FoldReady.
	Condition metav1.Condition
}

type stateKey struct{}

func withState(ctx context.Context, s State) context.Context {
	return context.WithValue(ctx, stateKey{}, s)
}

// StateFrom returns the middleware's State for this pass. ok is false when
// ctx did not come from the middleware, and on the deletion path, where no
// claim is acquired.
func StateFrom(ctx context.Context) (State, bool) {
	s, ok := ctx.Value(stateKey{}).(State)
	return s, ok
}

// GrantsFrom returns the keys the object holds for this pass with their
// tokens, or nil when it holds none or is parked.
func GrantsFrom(ctx context.Context) []Grant {
	s, _ := StateFrom(ctx)
	if !s.Granted {
		return nil
	}
	return s.Grants
}
