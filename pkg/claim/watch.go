package claim

import (
	"context"
	"errors"
	"fmt"
)

// Watcher is implemented by backends that can stream a key's record as it
// changes.
type Watcher interface {
	// Watch sends key's record now and after every change until ctx ends,
	// then closes the channel. A record that is deleted is sent with Exists
	// false. Transient watch failures are retried inside; consecutive sends
	// may be equal.
	Watch(ctx context.Context, key string) (<-chan Record, error)
}

// ErrWatchUnsupported marks a Watch on a backend that cannot stream records.
var ErrWatchUnsupported = errors.New("claim backend cannot watch records")

// Watch streams key's record for code outside a reconciler that must react
// to a claim changing hands: the current record first, then one per change,
// until ctx ends. Reconcilers should use the middleware's event handler
// instead, which maps record changes to requests.
func (c *Claimer) Watch(ctx context.Context, key string) (<-chan Record, error) {
	key, err := c.NormalizeKey(key)
	if err != nil {
		return nil, fmt.Errorf("watching claim: %w", err)
	}
	w, ok := c.backend.(Watcher)
	if !ok {
		return nil, fmt.Errorf("watching claim %q: %w (%T)", key, ErrWatchUnsupported, c.backend)
	}
	ch, err := w.Watch(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("watching claim %q: %w", key, err)
	}
	return ch, nil
}
