package generation_test

import (
	"context"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ocf-claim/claim/pkg/generation"
	"github.com/ocf-claim/claim/pkg/generation/memory"
)

// slowLists delays every List by d, as a loaded API server or a slow link
// does.
func slowLists(c client.WithWatch, d time.Duration) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return ctx.Err()
			}
			return c.List(ctx, list, opts...)
		},
	})
}

// TestWatchDeliversEveryChangeMadeAfterItReturned: once WatchClaim has
// returned, every change of the claim is delivered, in order, with its
// reason; none is folded into a later one because the watch was not yet
// established when the change was made. The memory backend registers its
// watcher before returning; the Kubernetes one must not lose what the
// caller does next either, however long its first List takes.
func TestWatchDeliversEveryChangeMadeAfterItReturned(t *testing.T) {
	ctx := context.Background()
	type world struct{ watcher, writer generation.Backend }
	worlds := map[string]func(t *testing.T) world{
		"memory": func(*testing.T) world {
			s := memory.NewStore()
			return world{memory.New(memory.WithStore(s)), memory.New(memory.WithStore(s))}
		},
		"kubernetes": func(t *testing.T) world {
			ns := env.Namespace(t)
			c := env.TestClient(t)
			w, err := generation.New(slowLists(c, 2*time.Second), ns)
			if err != nil {
				t.Fatal(err)
			}
			return world{w, process(ns)}
		},
	}
	for name, newWorld := range worlds {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			defer w.watcher.Close()
			defer w.writer.Close()
			for _, id := range []string{"a", "b"} {
				if err := w.writer.RegisterGeneration(ctx, generation.Generation{ID: id, Service: "s"}); err != nil {
					t.Fatal(err)
				}
			}
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			ch, err := w.watcher.WatchClaim(wctx, "c")
			if err != nil {
				t.Fatal(err)
			}
			held, err := w.writer.AcquireClaim(ctx, generation.AcquireRequest{ClaimName: "c", GenerationID: "a", TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.writer.RenewClaim(ctx, generation.RenewRequest{ClaimName: "c", GenerationID: "a", Token: held.FencingToken, TTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			if _, err := w.writer.PrepareTransfer(ctx, generation.TransferRequest{ClaimName: "c", FromGeneration: "a", ToGeneration: "b", Token: held.FencingToken, TTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
			want := []generation.TransitionReason{generation.ReasonAcquired, generation.ReasonRenewed, generation.ReasonTransferPrepared}
			var got []generation.TransitionReason
			timeout := time.After(10 * time.Second)
			for len(got) < len(want) {
				select {
				case ev, ok := <-ch:
					if !ok {
						t.Fatalf("the watch closed after %v", got)
					}
					got = append(got, ev.Reason)
					if ev.Reason != want[len(got)-1] {
						t.Fatalf("events %v, want %v", got, want)
					}
				case <-timeout:
					t.Fatalf("events %v within 10s, want %v", got, want)
				}
			}
		})
	}
}

// TestCloseClosesEveryWatch: Close closes the channel of every watch the
// backend has open, not only one of them; a watch Close leaves open keeps
// its goroutine and its API watch for the life of the process.
func TestCloseClosesEveryWatch(t *testing.T) {
	ctx := context.Background()
	onEveryBackend(t, func(t *testing.T, b generation.Backend) {
		var chs []<-chan generation.ClaimEvent
		for _, claim := range []string{"a", "b", "c"} {
			ch, err := b.WatchClaim(ctx, claim)
			if err != nil {
				t.Fatal(err)
			}
			chs = append(chs, ch)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		timeout := time.After(5 * time.Second)
		for i, ch := range chs {
		drain:
			for {
				select {
				case _, ok := <-ch:
					if !ok {
						break drain
					}
				case <-timeout:
					t.Fatalf("watch %d of %d is still open 5s after Close", i+1, len(chs))
				}
			}
		}
	})
}
