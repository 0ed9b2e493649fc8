package generation_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ocf-claim/claim/pkg/generation"
)

// requestLog counts the API requests a backend sends, by verb.
type requestLog struct {
	mu    sync.Mutex
	verbs []string
}

func (r *requestLog) add(verb string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.verbs = append(r.verbs, verb)
}

func (r *requestLog) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.verbs
	r.verbs = nil
	return out
}

func counted(c client.WithWatch, log *requestLog) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			log.add("get")
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			log.add("create")
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			log.add("update")
			return c.Update(ctx, obj, opts...)
		},
	})
}

// TestEveryMutationIsOneConditionalWrite pins the API requests of each
// mutation without contention: the reads it decides on (the Lease, and the
// ConfigMap of a generation it must find registered) and one write; a
// replay reads and writes nothing.
func TestEveryMutationIsOneConditionalWrite(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	c := env.TestClient(t)
	var log requestLog
	b, err := generation.New(counted(c, &log), ns)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, id := range []string{"a", "b"} {
		if err := b.RegisterGeneration(ctx, generation.Generation{ID: id, Service: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"get", "create", "get", "create"}, log.take()); diff != "" {
		t.Errorf("registering two generations (-want +got):\n%s", diff)
	}
	const ttl = 10 * time.Second
	rec, err := b.AcquireClaim(ctx, generation.AcquireRequest{ClaimName: "c", GenerationID: "a", TTL: ttl, OperationID: "op-1"})
	if err != nil {
		t.Fatal(err)
	}
	tok := rec.FencingToken
	steps := []struct {
		name string
		call func() error
		want []string
	}{
		{"a replayed acquire", func() error {
			_, err := b.AcquireClaim(ctx, generation.AcquireRequest{ClaimName: "c", GenerationID: "a", TTL: ttl, OperationID: "op-1"})
			return err
		}, []string{"get", "get"}},
		{"renew", func() error {
			_, err := b.RenewClaim(ctx, generation.RenewRequest{ClaimName: "c", GenerationID: "a", Token: tok, TTL: ttl})
			return err
		}, []string{"get", "update"}},
		{"prepare", func() error {
			_, err := b.PrepareTransfer(ctx, generation.TransferRequest{ClaimName: "c", FromGeneration: "a", ToGeneration: "b", Token: tok, TTL: ttl})
			return err
		}, []string{"get", "get", "update"}},
		{"commit", func() error {
			rec, err := b.CommitTransfer(ctx, generation.CommitRequest{ClaimName: "c", FromGeneration: "a", ToGeneration: "b", ExpectedToken: tok, TTL: ttl})
			if err == nil {
				tok = rec.FencingToken
			}
			return err
		}, []string{"get", "get", "update"}},
		{"release", func() error {
			return b.ReleaseClaim(ctx, generation.ReleaseRequest{ClaimName: "c", GenerationID: "b", Token: tok})
		}, []string{"get", "update"}},
		{"acquire of a released claim", func() error {
			_, err := b.AcquireClaim(ctx, generation.AcquireRequest{ClaimName: "c", GenerationID: "a", TTL: ttl})
			return err
		}, []string{"get", "get", "update"}},
	}
	log.take()
	for _, s := range steps {
		if err := s.call(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if diff := cmp.Diff(s.want, log.take()); diff != "" {
			t.Errorf("%s: API requests (-want +got):\n%s", s.name, diff)
		}
	}
}
