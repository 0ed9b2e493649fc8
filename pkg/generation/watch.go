package generation

import (
	"context"
	"fmt"
	"net/http"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ocf-claim/claim/internal/watchloop"
)

// watchRetry spaces re-established watches after a failure. It is a
// transport back-off measured on the real clock, never a time the backend
// decides by: a test's fake clock that nobody advances must not stall a
// watch.
const watchRetry = 500 * time.Millisecond

// WatchClaim implements Backend with an API watch on the claim's Lease: the
// current record as of the call first, when the claim has one, then every
// change after it in the order the API server applied them, each with the
// reason the write recorded (ReasonDeleted when the Lease was deleted).
// WatchClaim reads the record before it returns and watches from that
// read's version, so a change made once it has returned is never folded
// into the first event; a failed read is its error. When the watch
// breaks it resumes from the last version delivered; only when the API
// server no longer has that version (410 Gone, after a long outage) does
// it start again from the current record, and changes in between are not
// delivered. Events wait for the reader: a reader that stops reading holds
// the watch, not memory.
func (b *KubeBackend) WatchClaim(ctx context.Context, name string) (<-chan ClaimEvent, error) {
	if err := firstErr(b.check(ctx), checkName("claim name", name)); err != nil {
		return nil, fmt.Errorf("watching claim %q: %w", name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		cancel()
		return nil, fmt.Errorf("watching claim %q: %w: backend closed", name, ErrBackend)
	}
	b.lastWatch++
	key := b.lastWatch
	b.watches[key] = cancel
	b.mu.Unlock()
	stop := func() {
		cancel()
		b.mu.Lock()
		delete(b.watches, key)
		b.mu.Unlock()
	}

	out := make(chan ClaimEvent)
	w := claimWatch{b: b, name: name, out: out}
	first, version, err := w.list(ctx)
	if err != nil {
		stop()
		return nil, fmt.Errorf("watching claim %q: %w", name, err)
	}
	go func() {
		defer close(out)
		defer stop()
		for i := range first {
			if !w.deliver(ctx, watch.Added, &first[i]) {
				return
			}
		}
		w.version = version
		for ctx.Err() == nil {
			if err := w.run(ctx); err != nil && ctx.Err() == nil {
				log.FromContext(ctx).V(1).Info("generation claim watch ended; re-establishing", "claim", name, "error", err.Error())
				t := time.NewTimer(watchRetry)
				select {
				case <-ctx.Done():
				case <-t.C:
				}
				t.Stop()
			}
		}
	}()
	return out, nil
}

// claimWatch is the state of one WatchClaim across re-established watches.
type claimWatch struct {
	b    *KubeBackend
	name string
	out  chan<- ClaimEvent
	// version is the resourceVersion to resume from; empty to list first.
	version string
}

// list reads the claim's Lease (none or one) and the version to watch from
// once it is delivered.
func (w *claimWatch) list(ctx context.Context) ([]coordinationv1.Lease, string, error) {
	ref := w.b.claimRef(w.name)
	var list coordinationv1.LeaseList
	if err := w.b.c.List(ctx, &list, client.InNamespace(ref.Namespace), client.MatchingFields{"metadata.name": ref.Name}); err != nil {
		return nil, "", readError("Lease "+ref.String(), err)
	}
	return list.Items, list.ResourceVersion, nil
}

// run lists when it has no version to resume from, then watches until the
// watch ends.
func (w *claimWatch) run(ctx context.Context) error {
	ref := w.b.claimRef(w.name)
	byName := client.MatchingFields{"metadata.name": ref.Name}
	if w.version == "" {
		items, version, err := w.list(ctx)
		if err != nil {
			return err
		}
		for i := range items {
			if !w.deliver(ctx, watch.Added, &items[i]) {
				return nil
			}
		}
		w.version = version
	}
	var list coordinationv1.LeaseList
	wi, err := w.b.c.Watch(ctx, &list, client.InNamespace(ref.Namespace), byName,
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: w.version}})
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			w.version = ""
		}
		return fmt.Errorf("watching Lease %s: %w", ref, err)
	}
	return watchloop.Each(ctx, wi, func(ev watch.Event) (bool, error) {
		if ev.Type == watch.Error {
			if status := apierrors.FromObject(ev.Object); apierrors.IsResourceExpired(status) || apierrors.IsGone(status) {
				w.version = ""
			} else if s, ok := ev.Object.(*metav1.Status); ok && s.Code == http.StatusGone {
				w.version = ""
			}
			return true, fmt.Errorf("watching Lease %s: %v", ref, ev.Object)
		}
		l, ok := ev.Object.(*coordinationv1.Lease)
		if !ok {
			return false, nil
		}
		return !w.deliver(ctx, ev.Type, l), nil
	})
}

// deliver sends the event of one version of the Lease and remembers its
// version; false when ctx ended first.
func (w *claimWatch) deliver(ctx context.Context, typ watch.EventType, l *coordinationv1.Lease) bool {
	w.version = l.ResourceVersion
	var ev ClaimEvent
	switch typ {
	case watch.Deleted:
		w.b.obs.Forget(w.name)
		ev = ClaimEvent{Claim: ClaimRecord{Name: w.name}, Reason: ReasonDeleted}
	case watch.Added, watch.Modified:
		s, err := DecodeClaim(w.name, l)
		if err != nil {
			log.FromContext(ctx).Info("skipping a Lease that holds no record of the watched claim", "claim", w.name, "error", err.Error())
			return true
		}
		ev = ClaimEvent{Claim: s.Record, Reason: s.Record.Reason}
	default:
		return true
	}
	ev.Time = w.b.clock.Now()
	select {
	case w.out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}
