package expiry_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/backends"

	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/expiry"
)

// waitFor polls cond until it holds or a real-time limit passes. Time in the
// protocol moves only through the fake clock; this waits for goroutines.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// worker is the holder the Keeper tests hold keys for.
var worker = claim.Holder{Kind: "Worker", Namespace: "ns", Name: "w", UID: "uid-w"}

// newKeeper returns a Claimer of cfg over a fresh memory store, reading time
// from clk, and a Keeper of kcfg over it.
func newKeeper(t *testing.T, clk *clocktesting.FakeClock, cfg claim.Config, kcfg expiry.KeeperConfig) (*claim.Claimer, *expiry.Keeper) {
	t.Helper()
	c, err := memory.NewClaimer(memory.New(), cfg, claim.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	k, err := expiry.NewKeeper(c, kcfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

// TestAKeeperCountsTheRenewDeadlineFromTheGrantNotFromHold: Given a key
// granted at t0 and held only 10 s later (a slow pass between Acquire and
// Hold), When 20 s (the renew deadline) have passed since the grant was
// sent and no renewal has been made yet, Then the hold has ended with
// ErrRenewDeadline: a contender that saw the grant at t0 counts its duration
// from there, so counting from Hold would let the holder act past the moment
// the contender may judge it dead.
func TestAKeeperCountsTheRenewDeadlineFromTheGrantNotFromHold(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c, k := newKeeper(t, clk, claim.Config{Namespace: "ns"}, expiry.KeeperConfig{Duration: 30 * time.Second, RenewEvery: 15 * time.Second, RenewDeadline: 20 * time.Second, Clock: clk})
	_, granted, err := c.Acquire(ctx, "queue/orders", worker)
	if err != nil || !granted.Granted() {
		t.Fatalf("Acquire() = %s, %v; want granted", granted.Reason, err)
	}
	if !granted.Sent.Equal(clk.Now()) {
		t.Fatalf("granted.Sent = %v, want the clock's reading %v", granted.Sent, clk.Now())
	}

	// Given the hold starts 10 s after the grant was sent
	clk.Step(10 * time.Second)
	held, stop := k.Hold(ctx, "queue/orders", granted)
	defer stop()
	waitFor(t, "the hold's timers", func() bool { return clk.HasWaiters() })
	// When 9 s more pass (19 s since the grant) the holder still acts
	clk.Step(9 * time.Second)
	if held.Err() != nil {
		t.Fatalf("hold ended 19 s after the grant: %v", context.Cause(held))
	}
	// When 20 s have passed since the grant, before the first renewal (due
	// 15 s after Hold, at 25 s)
	clk.Step(time.Second)
	// Then the hold has ended at the deadline
	waitFor(t, "the hold to end at the deadline", func() bool { return held.Err() != nil })
	if !errors.Is(context.Cause(held), expiry.ErrRenewDeadline) {
		t.Fatalf("cause = %v, want ErrRenewDeadline", context.Cause(held))
	}
}

// TestAKeeperRefusesAnOutcomeThatWroteNothing: Given a re-entry (Held, no
// write), When it is held, Then the hold ends at once with ErrRenewDeadline:
// nothing says when its deadline started.
func TestAKeeperRefusesAnOutcomeThatWroteNothing(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c, k := newKeeper(t, clk, claim.Config{Namespace: "ns"}, expiry.KeeperConfig{Duration: 30 * time.Second, RenewEvery: 5 * time.Second, RenewDeadline: 20 * time.Second})
	if _, o, err := c.Acquire(ctx, "queue/orders", worker); err != nil || !o.Granted() {
		t.Fatalf("Acquire() = %s, %v; want granted", o.Reason, err)
	}
	_, again, err := c.Acquire(ctx, "queue/orders", worker)
	if err != nil || again.Reason != claim.ReasonHeld {
		t.Fatalf("re-entry = %s, %v; want Held", again.Reason, err)
	}

	held, stop := k.Hold(ctx, "queue/orders", again)
	defer stop()

	if !errors.Is(context.Cause(held), expiry.ErrRenewDeadline) {
		t.Fatalf("cause = %v, want ErrRenewDeadline at once", context.Cause(held))
	}
}

// TestAKeepersCauseNeverEchoesTheRawKeysPassword: errors never echo URL user
// info. Keeper.Hold takes the key as the caller has it, before
// Config.Normalize strips the credentials (claimmw's renewals pass exactly
// that raw key, and log the cause when a hold ends); the held context's cause
// quotes it redacted, so the database password is neither in the error nor in
// the middleware's log line.
func TestAKeepersCauseNeverEchoesTheRawKeysPassword(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	stripUserinfo := func(key string) (string, error) {
		u, err := url.Parse(key)
		if err != nil {
			return "", err
		}
		u.User = nil
		return u.String(), nil
	}
	c, k := newKeeper(t, clk, claim.Config{Namespace: "ns", Normalize: stripUserinfo}, expiry.KeeperConfig{Duration: 30 * time.Second, RenewEvery: 5 * time.Second, RenewDeadline: 20 * time.Second, Clock: clk})
	const raw = "postgres://admin:hunter2@db.data.svc:5432/app"
	_, granted, err := c.Acquire(ctx, raw, worker)
	if err != nil || !granted.Granted() {
		t.Fatalf("Acquire() = %s, %v; want granted", granted.Reason, err)
	}
	if strings.Contains(granted.Key, "hunter2") {
		t.Fatalf("normalizer kept the password: %q", granted.Key)
	}

	t.Run("deadline passed before Hold", func(t *testing.T) {
		clk.Step(25 * time.Second) // the grant is older than RenewDeadline
		held, stop := k.Hold(ctx, raw, granted)
		defer stop()
		cause := context.Cause(held)
		if !errors.Is(cause, expiry.ErrRenewDeadline) {
			t.Fatalf("cause = %v, want ErrRenewDeadline", cause)
		}
		if strings.Contains(cause.Error(), "hunter2") {
			t.Errorf("hold's cause echoes the password: %v", cause)
		}
	})
	t.Run("outcome not granted", func(t *testing.T) {
		held, stop := k.Hold(ctx, raw, claim.Outcome{Reason: claim.ReasonHeldElsewhere})
		defer stop()
		if cause := context.Cause(held); cause == nil || strings.Contains(cause.Error(), "hunter2") {
			t.Errorf("hold's cause echoes the password: %v", cause)
		}
	})
}

// slowFirstUpdate is a backend whose first Update waits for release, and
// which counts its Updates: a renewal the API server is slow to answer.
type slowFirstUpdate struct {
	backends.Backend
	release chan struct{}
	updates atomic.Int32
}

func (b *slowFirstUpdate) Update(ctx context.Context, prev, next backends.Record) (backends.Record, error) {
	if b.updates.Add(1) == 1 {
		<-b.release
	}
	return b.Backend.Update(ctx, prev, next)
}

// TestARenewalDueWhileAnotherIsInFlightIsSentWhenThatOneReturns: Given a
// renewal the API server answers only after the next one is due, When it
// returns, Then the renewal it delayed is sent at once, not a whole
// RenewEvery later: a slow answer must not halve the renewal rate and bring
// the holder that much closer to its deadline.
func TestARenewalDueWhileAnotherIsInFlightIsSentWhenThatOneReturns(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	store := memory.New()
	slow := &slowFirstUpdate{release: make(chan struct{})}
	factory := func(r client.Reader, w client.Client, cfg backends.Config) (backends.Backend, error) {
		b, err := store.Backend(r, w, cfg)
		slow.Backend = b
		return slow, err
	}
	c, err := memory.NewClaimer(store, claim.Config{Namespace: "ns"}, claim.WithClock(clk), claim.WithBackend(factory))
	if err != nil {
		t.Fatal(err)
	}
	k, err := expiry.NewKeeper(c, expiry.KeeperConfig{Duration: 30 * time.Second, RenewEvery: 5 * time.Second, RenewDeadline: 20 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	_, granted, err := c.Acquire(ctx, "queue/orders", worker)
	if err != nil || !granted.Granted() {
		t.Fatalf("Acquire() = %s, %v; want granted", granted.Reason, err)
	}
	held, stop := k.Hold(ctx, "queue/orders", granted)
	defer stop()
	waitFor(t, "the hold's timers", func() bool { return clk.HasWaiters() })

	// Given the first renewal is in flight when the second is due
	clk.Step(5 * time.Second)
	waitFor(t, "the first renewal", func() bool { return slow.updates.Load() == 1 })
	clk.Step(5 * time.Second)
	// The Keeper takes the tick in real time; no clock step can say when.
	time.Sleep(50 * time.Millisecond)
	// When the first renewal returns
	close(slow.release)
	// Then the second is sent without the clock moving on
	waitFor(t, "the delayed renewal", func() bool { return slow.updates.Load() == 2 })
	if held.Err() != nil {
		t.Fatalf("hold ended: %v", context.Cause(held))
	}
}
