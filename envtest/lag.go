package envtest

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LaggingCache is a real informer cache that can be frozen: once Freeze is
// called its informers stop, and it keeps serving what it had seen, the way
// a cache lags the API server under load or across a partition. Tests use it
// to prove that a decision never trusts a cache.
type LaggingCache struct {
	client.Reader
	stop context.CancelFunc
}

// NewLaggingCache starts a cache and waits until it has synced the types in
// warm (every read type must be warmed before Freeze, or reads of it fail).
func (e *Env) NewLaggingCache(ctx context.Context, warm ...client.ObjectList) (*LaggingCache, error) {
	ctx, stop := context.WithCancel(ctx)
	ca, err := cache.New(rest.CopyConfig(e.Config), cache.Options{Scheme: e.Scheme})
	if err != nil {
		stop()
		return nil, fmt.Errorf("creating lagging cache: %w", err)
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		stop()
		return nil, fmt.Errorf("starting lagging cache: %w", ctx.Err())
	}
	for _, list := range warm {
		if err := ca.List(ctx, list); err != nil {
			stop()
			return nil, fmt.Errorf("warming lagging cache with %T: %w", list, err)
		}
	}
	return &LaggingCache{Reader: ca, stop: stop}, nil
}

// Freeze stops the cache's informers: from now on it serves the objects as
// they were when Freeze was called.
func (l *LaggingCache) Freeze() { l.stop() }
