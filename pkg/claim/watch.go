package claim

import (
	"context"
	"fmt"

	"github.com/ocf-claim/claim/pkg/backends"
)

// Watch streams key's record for code outside a reconciler that must react
// to a claim changing hands: the current record first, then one per change,
// until ctx ends. A backend that cannot stream records (it does not
// implement backends.Watcher) yields an error wrapping
// backends.ErrWatchUnsupported. Reconcilers should use the middleware's event handler
// instead, which maps record changes to requests.
func (c *Claimer) Watch(ctx context.Context, key string) (<-chan Record, error) {
	key, err := c.NormalizeKey(key)
	if err != nil {
		return nil, fmt.Errorf("watching claim: %w", err)
	}
	w, ok := c.backend.(backends.Watcher)
	if !ok {
		return nil, fmt.Errorf("watching claim %q: %w (%T)", key, backends.ErrWatchUnsupported, c.backend)
	}
	ch, err := w.Watch(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("watching claim %q: %w", key, err)
	}
	return ch, nil
}
