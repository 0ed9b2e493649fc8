// Package watchloop reads the events of one API watch for the backends that
// stream records (pkg/backends/lease and pkg/generation), so that both end a
// watch by the same rules: nil when the caller's context ends, an error when
// the server closes the watch, which the caller's retry loop re-establishes.
package watchloop

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/watch"
)

// ErrClosed is what Each returns when the API server closed the watch.
var ErrClosed = errors.New("watch closed by the server")

// Each calls handle with every event of wi, in the order the server sent
// them, until ctx ends (nil), the server closes the watch (ErrClosed), or
// handle returns done or an error (that error). It stops wi before it
// returns.
func Each(ctx context.Context, wi watch.Interface, handle func(watch.Event) (done bool, err error)) error {
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return ErrClosed
			}
			if done, err := handle(ev); done || err != nil {
				return err
			}
		}
	}
}
