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
// reconciler in its context. Check Deleting first, then Granted: an object
// being deleted is never Granted, yet it may still hold keys whose resources
// it must clean up.
//
// A pass told to stop using keys (Granted false while the object may still
// act for them, Releasing, Handovers, a deletion pass, and a granted pass
// whose Grants leave out keys the object acted for before its key set
// changed or it was told to stop, even when their records are gone and
// Releasing is empty) has stopped only when it returns no error and a zero
// Result. Return a Requeue or RequeueAfter while its workloads are still
// going away: the middleware keeps the keys (renewed), keeps saying that the
// object may act for them, and tells it again when it asked to be. A
// reconciler that asks to run again in every such pass therefore never
// frees them.
type State struct {
	// Deleting is true on the deletion path: the object is being deleted,
	// acquires nothing, and its claims are released after a pass given
	// them (in Grants) that returns neither an error nor a requeue (a zero
	// Result): return a requeue, or an error, while its workloads are still
	// going away. A pass given no grants holds nothing, and only an error
	// keeps the object's finalizer.
	Deleting bool
	// Granted is true when the object holds every key it names and may act
	// for all of them. Never true while Deleting.
	Granted bool
	// Grants are the keys the object holds and may act for, in sorted order,
	// with their fencing tokens: every key it names when Granted; on the
	// deletion path, the keys it still holds (read uncached), so that only a
	// holder cleans up a key's resources; empty otherwise.
	Grants []Grant
	// Releasing are keys the object still holds but must stop using in this
	// pass: keys it no longer names, and, while it waits for a key, the keys
	// after that one. The middleware releases them once this pass returns
	// no error and a zero Result; until then it keeps them.
	Releasing []Grant
	// Handovers are the held keys this pass hands to a successor (see
	// [WithHandover]): move the workloads off them and return success with
	// a zero Result, and the middleware commits the handovers after the
	// pass. Empty unless Granted.
	Handovers []Handover
	// Condition is the claim condition as the middleware set it in this
	// pass (on the deletion path: as the object carries it, zero when it has
	// none), its message bounded as written. An inner reconciler that runs
	// while parked renders a suspended form from it, and folds it into its
	// Ready with conditions.FoldReady. Its ObservedGeneration is the
	// generation whose keys the pass judged: a reconciler that reads the
	// object again and finds a newer generation must not act on the new
	// spec with these grants.
	Condition metav1.Condition
}

type stateKey struct{}

func withState(ctx context.Context, s State) context.Context {
	return context.WithValue(ctx, stateKey{}, s)
}

// StateFrom returns the middleware's State for this pass. ok is false only
// when ctx did not come from the middleware.
func StateFrom(ctx context.Context) (State, bool) {
	s, ok := ctx.Value(stateKey{}).(State)
	return s, ok
}

// GrantsFrom returns the keys the object may act for in this pass with their
// tokens (State.Grants): nil while it is parked or holds none.
func GrantsFrom(ctx context.Context) []Grant {
	s, _ := StateFrom(ctx)
	return s.Grants
}
