package claimmw

import (
	"context"
	"errors"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/fence"
)

// ErrNoGrants marks a FencedClient asked for outside a granted pass: there
// is no token to fence with.
var ErrNoGrants = errors.New("no claim granted in this pass")

// fencing is what the middleware hands the inner reconciler to build a
// fenced client from: the client it writes through and the uncached reader
// the fence checks with.
type fencing struct {
	client client.Client
	reader client.Reader
}

type fencingKey struct{}

func withFencing(ctx context.Context, f fencing) context.Context {
	return context.WithValue(ctx, fencingKey{}, f)
}

// FencedClient returns a client for the inner reconciler whose writes are
// fenced by the grants of this pass (see pkg/fence): each write stamps the
// tokens of the keys held on the object, and a write to an object that
// already carries a newer token of one of those keys, written by a later
// holder, is refused with an error wrapping fence.ErrFenced. Stop acting for
// the keys when that happens: the object lost them.
//
// It fails with [ErrNoGrants] when the pass may act for no key (parked, no
// keys named, or a deletion path of an object that holds none) and when ctx
// did not come from the middleware. On the deletion path it fences with the
// keys the object still holds ([State].Grants). The
// client writes through the middleware's client and checks through its API
// reader, so the middleware needs one ([FromManager] or [WithAPIReader]).
// Reads pass through unfenced. Build it per pass: a client kept beyond its
// pass keeps the tokens of that pass, and is refused once a newer holder has
// written.
func FencedClient(ctx context.Context) (*fence.Client, error) {
	grants := GrantsFrom(ctx)
	f, ok := ctx.Value(fencingKey{}).(fencing)
	if len(grants) == 0 || !ok {
		return nil, fmt.Errorf("building a fenced client: %w", ErrNoGrants)
	}
	if f.reader == nil {
		return nil, errors.New("building a fenced client: the claim middleware has no API reader; pass claimmw.FromManager(mgr) or claimmw.WithAPIReader")
	}
	fg := make([]fence.Grant, len(grants))
	for i, g := range grants {
		fg[i] = fence.Grant(g)
	}
	c, err := fence.New(f.client, f.reader, fg...)
	if err != nil {
		return nil, fmt.Errorf("building a fenced client: %w", err)
	}
	return c, nil
}
