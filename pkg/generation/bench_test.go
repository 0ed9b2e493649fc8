package generation_test

import (
	"context"
	"testing"
	"time"

	"github.com/ocf-claim/claim/pkg/generation"
)

// benchBackend is a backend in a fresh namespace whose API requests are
// counted, with generations a and b registered.
func benchBackend(b *testing.B) (*generation.KubeBackend, *requestLog, string) {
	ctx := context.Background()
	ns := env.Namespace(b)
	c := env.TestClient(b)
	log := &requestLog{}
	kb, err := generation.New(counted(c, log), ns)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = kb.Close() })
	for _, id := range []string{"a", "b"} {
		if err := kb.RegisterGeneration(ctx, generation.Generation{ID: id, Service: "s"}); err != nil {
			b.Fatal(err)
		}
	}
	log.take()
	return kb, log, ns
}

// heldBackend is benchBackend with claim c acquired by generation a for
// ttl; the requests of the acquisition are not counted.
func heldBackend(b *testing.B, ttl time.Duration) (*generation.KubeBackend, *requestLog, *generation.ClaimRecord) {
	kb, log, _ := benchBackend(b)
	rec, err := kb.AcquireClaim(context.Background(), generation.AcquireRequest{ClaimName: "c", GenerationID: "a", TTL: ttl})
	if err != nil {
		b.Fatal(err)
	}
	log.take()
	return kb, log, rec
}

// BenchmarkClaimMutations reports the latency and API requests of each
// mutation on a real API server, without contention.
func BenchmarkClaimMutations(b *testing.B) {
	ctx := context.Background()
	const ttl = time.Minute
	b.Run("acquire-release", func(b *testing.B) {
		kb, log, _ := benchBackend(b)
		for i := 0; b.Loop(); i++ {
			rec, err := kb.AcquireClaim(ctx, generation.AcquireRequest{ClaimName: "c", GenerationID: "a", TTL: ttl})
			if err != nil {
				b.Fatal(err)
			}
			if err := kb.ReleaseClaim(ctx, generation.ReleaseRequest{ClaimName: "c", GenerationID: "a", Token: rec.FencingToken}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(log.take()))/float64(b.N), "requests/op")
	})
	b.Run("renew", func(b *testing.B) {
		kb, log, rec := heldBackend(b, ttl)
		for b.Loop() {
			if _, err := kb.RenewClaim(ctx, generation.RenewRequest{ClaimName: "c", GenerationID: "a", Token: rec.FencingToken, TTL: ttl}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(len(log.take()))/float64(b.N), "requests/op")
	})
	b.Run("prepare-commit", func(b *testing.B) {
		kb, log, rec := heldBackend(b, ttl)
		var err error
		from, to := "a", "b"
		for b.Loop() {
			if _, err := kb.PrepareTransfer(ctx, generation.TransferRequest{ClaimName: "c", FromGeneration: from, ToGeneration: to, Token: rec.FencingToken, TTL: ttl}); err != nil {
				b.Fatal(err)
			}
			if rec, err = kb.CommitTransfer(ctx, generation.CommitRequest{ClaimName: "c", FromGeneration: from, ToGeneration: to, ExpectedToken: rec.FencingToken, TTL: ttl}); err != nil {
				b.Fatal(err)
			}
			from, to = to, from
		}
		b.ReportMetric(float64(len(log.take()))/float64(b.N), "requests/op")
	})
}

// BenchmarkWatchDelivery reports how long after a renewal is sent another
// process's WatchClaim delivers it.
func BenchmarkWatchDelivery(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kb, _, ns := benchBackend(b)
	rec, err := kb.AcquireClaim(ctx, generation.AcquireRequest{ClaimName: "c", GenerationID: "a", TTL: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	c := env.TestClient(b)
	watcher, err := generation.New(c, ns)
	if err != nil {
		b.Fatal(err)
	}
	defer watcher.Close()
	events, err := watcher.WatchClaim(ctx, "c")
	if err != nil {
		b.Fatal(err)
	}
	<-events // the current record
	var total time.Duration
	for b.Loop() {
		sent := time.Now()
		renewed, err := kb.RenewClaim(ctx, generation.RenewRequest{ClaimName: "c", GenerationID: "a", Token: rec.FencingToken, TTL: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		for ev := range events {
			if ev.Claim.Version >= renewed.Version {
				break
			}
		}
		total += time.Since(sent)
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N)/1000, "ms-to-event/op")
}
