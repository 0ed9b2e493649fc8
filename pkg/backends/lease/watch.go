package lease

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ocf-claim/claim/internal/watchloop"
	"github.com/ocf-claim/claim/pkg/backends"
)

// watchRetry spaces re-established watches after a failure.
const watchRetry = time.Second

// Watch streams key's record; it needs a writer that can watch
// (client.WithWatch, as client.NewWithWatch returns).
func (s *store) Watch(ctx context.Context, key string) (<-chan backends.Record, error) {
	w, ok := s.writer.(client.WithWatch)
	if !ok {
		return nil, fmt.Errorf("%w: the writer (%T) cannot watch; build it with client.NewWithWatch", backends.ErrWatchUnsupported, s.writer)
	}
	out := make(chan backends.Record)
	go func() {
		defer close(out)
		for ctx.Err() == nil {
			if err := s.watchOnce(ctx, w, key, out); err != nil && ctx.Err() == nil {
				log.FromContext(ctx).V(1).Info("claim watch ended; re-establishing", "claimKey", key, "error", err.Error())
				select {
				case <-ctx.Done():
				case <-time.After(watchRetry):
				}
			}
		}
	}()
	return out, nil
}

// watchOnce sends the current record, then every change until the watch
// ends.
func (s *store) watchOnce(ctx context.Context, w client.WithWatch, key string, out chan<- backends.Record) error {
	rec, err := s.Get(ctx, key)
	if err != nil {
		return err
	}
	if !send(ctx, out, rec) {
		return nil
	}
	ref := s.ref(key)
	var list coordinationv1.LeaseList
	opts := []client.ListOption{client.InNamespace(ref.Namespace), client.MatchingFields{"metadata.name": ref.Name}}
	if rec.Version != "" {
		opts = append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rec.Version}})
	}
	wi, err := w.Watch(ctx, &list, opts...)
	if err != nil {
		return fmt.Errorf("watching Lease %s: %w", ref, err)
	}
	return watchloop.Each(ctx, wi, func(ev watch.Event) (bool, error) {
		l, isLease := ev.Object.(*coordinationv1.Lease)
		switch {
		case ev.Type == watch.Error || !isLease:
			return true, fmt.Errorf("watching Lease %s: %v", ref, ev.Object)
		case ev.Type == watch.Deleted:
			rec = backends.Record{Key: key, Ref: ref}
		case ev.Type == watch.Added || ev.Type == watch.Modified:
			rec = Decode(s.cfg, key, l)
		default:
			return false, nil
		}
		return !send(ctx, out, rec), nil
	})
}

func send(ctx context.Context, out chan<- backends.Record, rec backends.Record) bool {
	select {
	case out <- rec:
		return true
	case <-ctx.Done():
		return false
	}
}
