package memory_test

import (
	"context"
	"sync"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/ocf-claim/claim/pkg/generation"
	"github.com/ocf-claim/claim/pkg/generation/memory"
)

// closingClock is a clock that, once armed, runs Close of its backend to
// completion the first time the backend reads the time: it places a Close
// at exactly the point where WatchClaim reads the clock, as a Close from
// another goroutine may land.
type closingClock struct {
	generation.Clock
	mu    sync.Mutex
	armed func()
}

func (c *closingClock) Now() time.Time {
	c.mu.Lock()
	f := c.armed
	c.armed = nil
	c.mu.Unlock()
	if f != nil {
		done := make(chan struct{})
		go func() { defer close(done); f() }()
		<-done
	}
	return c.Clock.Now()
}

// TestWatchOpenedWhileTheBackendClosesIsClosed: a WatchClaim that runs
// while Close runs either fails or returns a channel that Close closes; the
// contract says the channel is closed when Close is called, and a watch
// nobody can close leaks its goroutine for the life of the process.
func TestWatchOpenedWhileTheBackendClosesIsClosed(t *testing.T) {
	ctx := context.Background()
	clk := &closingClock{Clock: generation.FromClock(testingclock.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))}
	store := memory.NewStore()
	other := memory.New(memory.WithStore(store), memory.WithClock(clk.Clock))
	if err := other.RegisterGeneration(ctx, generation.Generation{ID: "a", Service: "s"}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.AcquireClaim(ctx, generation.AcquireRequest{ClaimName: "c", GenerationID: "a", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}

	b := memory.New(memory.WithStore(store), memory.WithClock(clk))
	clk.mu.Lock()
	clk.armed = func() { _ = b.Close() }
	clk.mu.Unlock()
	ch, err := b.WatchClaim(ctx, "c")
	if err != nil {
		// Refusing a watch of a closed backend honours the contract.
		return
	}
	timeout := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("WatchClaim ran while Close ran and returned a channel that is still open 5s after Close returned")
		}
	}
}
