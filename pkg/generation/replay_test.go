package generation_test

import (
	"context"
	"errors"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/ocf-claim/claim/pkg/generation"
	"github.com/ocf-claim/claim/pkg/generation/memory"
)

// TestAnyAcceptedOperationIDReplaysTheFirstOutcome: an OperationID the
// requests accept is remembered as sent, whatever its bytes (a caller
// using random bytes or a binary UUID sends IDs that are not UTF-8). A
// retry returns the first outcome and writes nothing, on every backend. (A
// backend may instead refuse such an OperationID with ErrInvalidRequest, as
// both do: OperationIDs are at most 253 bytes of UTF-8.)
func TestAnyAcceptedOperationIDReplaysTheFirstOutcome(t *testing.T) {
	ctx := context.Background()
	clk := testingclock.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	backends := map[string]func(t *testing.T) generation.Backend{
		"memory": func(*testing.T) generation.Backend { return memory.New(memory.WithClock(generation.FromClock(clk))) },
		"kubernetes": func(t *testing.T) generation.Backend {
			c := env.TestClient(t)
			b, err := generation.New(c, env.Namespace(t), generation.WithClock(generation.FromClock(clk)))
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	}
	// 16 random bytes, as a binary UUID: not valid UTF-8.
	op := generation.OperationID([]byte{0x9f, 0x3c, 0xe1, 0xff, 0x02, 0x80, 0x41, 0xc3, 0x28, 0xa0, 0xa1, 0xe2, 0x28, 0xa1, 0xf0, 0x28})
	for name, newBackend := range backends {
		t.Run(name, func(t *testing.T) {
			b := newBackend(t)
			defer b.Close()
			if err := b.RegisterGeneration(ctx, generation.Generation{ID: "a", Service: "s"}); err != nil {
				t.Fatal(err)
			}
			req := generation.AcquireRequest{ClaimName: "c", GenerationID: "a", TTL: time.Minute, OperationID: op}
			first, err := b.AcquireClaim(ctx, req)
			if errors.Is(err, generation.ErrInvalidRequest) {
				// Refusing such an OperationID up front also keeps the
				// promise: nothing was done that a retry could repeat.
				return
			}
			if err != nil {
				t.Fatalf("acquiring: %v", err)
			}
			stored, err := b.GetClaim(ctx, "c")
			if err != nil {
				t.Fatal(err)
			}
			// The answer was lost; the caller retries a little later.
			clk.Step(time.Second)
			again, err := b.AcquireClaim(ctx, req)
			if err != nil {
				t.Fatalf("retrying the acquire with its OperationID: %v", err)
			}
			if again.Reason != first.Reason || !again.LastHeartbeat.Equal(first.LastHeartbeat) || !again.ExpiresAt.Equal(first.ExpiresAt) {
				t.Errorf("the retry returned reason %s heartbeat %v expires %v; the first outcome was %s %v %v",
					again.Reason, again.LastHeartbeat, again.ExpiresAt, first.Reason, first.LastHeartbeat, first.ExpiresAt)
			}
			after, err := b.GetClaim(ctx, "c")
			if err != nil {
				t.Fatal(err)
			}
			if after.Version != stored.Version || after.Reason != stored.Reason {
				t.Errorf("the retry had a second effect: version %d reason %s, was %d %s", after.Version, after.Reason, stored.Version, stored.Reason)
			}
		})
	}
}
