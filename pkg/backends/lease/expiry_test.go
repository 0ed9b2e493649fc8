package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/expiry"
)

var epoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// eventually polls cond until it holds or a real-time limit passes. Time in
// the protocol moves only through fake clocks; this waits for goroutines.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	envtest.EventuallyEvery(t, 10*time.Second, 10*time.Millisecond, func() (bool, string) { return cond(), "timed out waiting for " + what })
}

// holdEndsWith waits for held to end, and fails t unless it ended with
// want.
func holdEndsWith(held context.Context, t *testing.T, what string, want error) {
	t.Helper()
	eventually(t, what, func() bool { return held.Err() != nil })
	if !errors.Is(context.Cause(held), want) {
		t.Fatalf("cause = %v, want %v", context.Cause(held), want)
	}
}

func expiryClaimer(t *testing.T, ns string, clk *clocktesting.FakeClock, d time.Duration) *claim.Claimer {
	t.Helper()
	e, err := expiry.New(d, clk)
	if err != nil {
		t.Fatal(err)
	}
	return newClaimer(t, ns, nil, nil, claim.WithLiveness(e), claim.WithClock(clk))
}

// expiryContest is a key held by a and contended by b, whose claimer judges
// a by Expiry of 30 s on clk.
type expiryContest struct {
	ns     string
	a, b   claim.Holder
	ca, cb *claim.Claimer
	clk    *clocktesting.FakeClock
}

// contest sets up an expiryContest: a acquires the key through a claimer on
// aClock (nil: on b's clock) and, when renew is set, renews once; then b's
// claimer, on a clock at epoch, first sees a's record, held elsewhere.
func contest(t *testing.T, aClock *clocktesting.FakeClock, renew bool) expiryContest {
	t.Helper()
	x := expiryContest{ns: env.Namespace(t), clk: clocktesting.NewFakeClock(epoch)}
	if aClock == nil {
		aClock = x.clk
	}
	x.a, x.b = holder(t, x.ns, "a"), holder(t, x.ns, "b")
	x.ca = newClaimer(t, x.ns, nil, nil, claim.WithClock(aClock))
	acquire(t, x.ca, key, x.a)
	if renew {
		if _, err := expiry.Renew(context.Background(), x.ca, key, x.a); err != nil {
			t.Fatal(err)
		}
	}
	x.cb = expiryClaimer(t, x.ns, x.clk, 30*time.Second)
	wantReason(t, acquire(t, x.cb, key, x.b), claim.ReasonHeldElsewhere)
	return x
}

func TestTimeBasedLivenessTakesOverOnlyAfterTheDuration(t *testing.T) {
	ctx := context.Background()
	// Given b first sees a's record now
	x := contest(t, nil, false)
	ca, cb, a, b, clk := x.ca, x.cb, x.a, x.b, x.clk
	// When 29 s pass without a renewal
	clk.Step(29 * time.Second)
	// Then a is still alive
	wantReason(t, acquire(t, cb, key, b), claim.ReasonHeldElsewhere)
	// When a renews, the duration starts again from b's sight of it
	if _, err := expiry.Renew(ctx, ca, key, a); err != nil {
		t.Fatal(err)
	}
	clk.Step(2 * time.Second)
	wantReason(t, acquire(t, cb, key, b), claim.ReasonHeldElsewhere)
	clk.Step(29 * time.Second)
	wantReason(t, acquire(t, cb, key, b), claim.ReasonHeldElsewhere)
	// When a full duration passes without a change
	clk.Step(time.Second)
	// Then b takes over
	wantReason(t, acquire(t, cb, key, b), claim.ReasonTakenOver)
}

func TestTimeBasedLivenessIgnoresTheRemoteRenewTime(t *testing.T) {
	// Given a holder whose clock is an hour behind, so its renewTime looks an
	// hour old to everyone else (equally: b's wall clock jumped an hour ahead)
	behind := clocktesting.NewFakeClock(epoch.Add(-time.Hour))
	// When b judges a within the duration of first seeing the record
	x := contest(t, behind, true)
	cb, b, clk := x.cb, x.b, x.clk
	clk.Step(20 * time.Second)
	// Then a is alive: only b's own observation counts
	wantReason(t, acquire(t, cb, key, b), claim.ReasonHeldElsewhere)
}

func TestAKeeperStopsTheHolderAtItsRenewDeadline(t *testing.T) {
	ns := env.Namespace(t)
	a := holder(t, ns, "a")
	clk := clocktesting.NewFakeClock(epoch)
	// Given renewals that can be made to fail or to hang
	var mode atomicMode
	var failed atomic.Int32
	release := make(chan struct{})
	writer := env.TestClient(t)
	flaky := interceptor.NewClient(writer, interceptor.Funcs{
		Update: func(ctx context.Context, w client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			switch mode.get() {
			case "fail":
				failed.Add(1)
				return errors.New("apiserver unavailable")
			case "hang":
				<-release
				return errors.New("request hung")
			}
			return w.Update(ctx, obj, opts...)
		},
	})
	c := newClaimer(t, ns, nil, flaky, claim.WithClock(clk))
	acquire(t, c, key, a)
	// renewed renews a's claim and returns the Outcome a new hold starts
	// from, as the middleware does before holding a key it already held.
	renewed := func(t *testing.T) claim.Outcome {
		t.Helper()
		o, err := expiry.Renew(context.Background(), c, key, a)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	// stepToARenewal moves the clock to the next renewal and waits until it
	// wrote the Lease. The renew time tells it from a renewal of an earlier
	// hold that was still in flight when that hold stopped.
	stepToARenewal := func(t *testing.T) {
		t.Helper()
		clk.Step(5 * time.Second)
		eventually(t, "a renewal", func() bool {
			rt := leaseOf(t, c, key).Spec.RenewTime
			return rt != nil && !rt.Time.Before(clk.Now())
		})
	}
	k, err := expiry.NewKeeper(c, expiry.KeeperConfig{Duration: 30 * time.Second, RenewEvery: 5 * time.Second, RenewDeadline: 20 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("given renewals succeed then the holder keeps acting", func(t *testing.T) {
		held, stop := k.Hold(context.Background(), key, renewed(t))
		defer stop()
		stepToARenewal(t)
		clk.Step(5 * time.Second)
		if held.Err() != nil {
			t.Fatalf("hold ended while renewing: %v", context.Cause(held))
		}
	})
	t.Run("given renewals fail then the holder stops at the deadline", func(t *testing.T) {
		mode.set("")
		held, stop := k.Hold(context.Background(), key, renewed(t))
		defer stop()
		stepToARenewal(t)
		mode.set("fail")
		// The Keeper sends one renewal at a time: a failed one was sent
		// after it had taken the good one's answer, and so its deadline.
		clk.Step(5 * time.Second)
		eventually(t, "a failed renewal", func() bool { return failed.Load() > 0 })
		for range 2 {
			clk.Step(5 * time.Second)
		}
		time.Sleep(50 * time.Millisecond)
		if held.Err() != nil {
			t.Fatalf("hold ended %v before the deadline: %v", 15*time.Second, context.Cause(held))
		}
		clk.Step(5 * time.Second)
		holdEndsWith(held, t, "the hold to end", expiry.ErrRenewDeadline)
	})
	t.Run("given a renewal hangs then the holder still stops at the deadline", func(t *testing.T) {
		mode.set("")
		start := renewed(t)
		mode.set("hang")
		defer close(release)
		held, stop := k.Hold(context.Background(), key, start)
		defer stop()
		clk.Step(5 * time.Second)
		for range 3 {
			clk.Step(5 * time.Second)
		}
		holdEndsWith(held, t, "the hold to end while a renewal hangs", expiry.ErrRenewDeadline)
	})
	t.Run("given the claim was lost then the holder stops at once", func(t *testing.T) {
		mode.set("")
		held, stop := k.Hold(context.Background(), key, renewed(t))
		defer stop()
		if err := c.Release(context.Background(), a); err != nil {
			t.Fatal(err)
		}
		clk.Step(5 * time.Second)
		holdEndsWith(held, t, "the hold to end", claim.ErrNotHolder)
	})
}

func TestWatchStreamsTheRecord(t *testing.T) {
	ns := env.Namespace(t)
	a := holder(t, ns, "a")
	c := newClaimer(t, ns, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := c.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	next := func() claim.Record {
		t.Helper()
		select {
		case r := <-ch:
			return r
		case <-time.After(10 * time.Second):
			t.Fatal("no record from the watch")
		}
		return claim.Record{}
	}
	// Given a free key, the watch sends its absence first
	if r := next(); r.Exists {
		t.Fatalf("first record %+v, want absent", r)
	}
	// When a acquires, the watch sends a's record
	acquire(t, c, key, a)
	if r := next(); !r.Ours() || !r.Holder.Is(a) {
		t.Fatalf("record after acquire: %+v", r)
	}
	// When a releases, the watch sends the deletion
	if err := c.Release(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if r := next(); r.Exists {
		t.Fatalf("record after release: %+v", r)
	}
	// And the channel closes when ctx ends
	cancel()
	for range ch {
	}
}

type atomicMode struct{ v atomicString }

func (m *atomicMode) get() string  { return m.v.Load() }
func (m *atomicMode) set(s string) { m.v.Store(s) }

type atomicString struct{ p atomic.Pointer[string] }

func (a *atomicString) Load() string {
	if s := a.p.Load(); s != nil {
		return *s
	}
	return ""
}
func (a *atomicString) Store(s string) { a.p.Store(&s) }

// TestTimeBasedLivenessIgnoresWritesThatAreNotRenewals: Given a holder
// judged by Expiry, When someone edits the Lease's labels (a new
// resourceVersion, but no renewal) within the duration, Then the holder
// still expires a duration after the contender first saw it; And a real
// renewal still counts.
func TestTimeBasedLivenessIgnoresWritesThatAreNotRenewals(t *testing.T) {
	ctx := context.Background()
	x := contest(t, nil, false)
	ns, ca, cb, b, clk := x.ns, x.ca, x.cb, x.b, x.clk

	// When a person labels the Lease 20 s later
	clk.Step(20 * time.Second)
	l := leaseOf(t, ca, key)
	before := l.ResourceVersion
	l.Labels["team"] = "storage"
	if err := env.Client.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	if l.ResourceVersion == before {
		t.Fatal("the label edit did not change the Lease's resourceVersion")
	}
	wantReason(t, acquire(t, cb, key, b), claim.ReasonHeldElsewhere)
	// Then a is dead a duration after b first saw it, not after the edit
	clk.Step(10 * time.Second)
	wantReason(t, acquire(t, cb, key, b), claim.ReasonTakenOver)

	// And a renewal of the new holder b restarts the count of a contender
	c := holder(t, ns, "c")
	cc := expiryClaimer(t, ns, clk, 30*time.Second)
	wantReason(t, acquire(t, cc, key, c), claim.ReasonHeldElsewhere)
	clk.Step(20 * time.Second)
	if _, err := expiry.Renew(ctx, cb, key, b); err != nil {
		t.Fatal(err)
	}
	wantReason(t, acquire(t, cc, key, c), claim.ReasonHeldElsewhere)
	clk.Step(20 * time.Second)
	wantReason(t, acquire(t, cc, key, c), claim.ReasonHeldElsewhere)
	clk.Step(10 * time.Second)
	wantReason(t, acquire(t, cc, key, c), claim.ReasonTakenOver)
}

// TestRenewalsOnAFrozenClockStillCount: Given a holder whose clock does not
// move between two renewals (a coarse or fake clock), When it renews, Then
// each renewal is still a renewal to a contender.
func TestRenewalsOnAFrozenClockStillCount(t *testing.T) {
	ctx := context.Background()
	x := contest(t, clocktesting.NewFakeClock(epoch), true)
	ca, cb, a, b, clk := x.ca, x.cb, x.a, x.b, x.clk
	clk.Step(20 * time.Second)
	// When a renews again at the same reading of its clock
	if _, err := expiry.Renew(ctx, ca, key, a); err != nil {
		t.Fatal(err)
	}
	// Then b counts from that renewal
	clk.Step(20 * time.Second)
	wantReason(t, acquire(t, cb, key, b), claim.ReasonHeldElsewhere)
}

// TestRenewAfterALabelEditKeepsTheTokenBelowTheNextGrant: Given a key granted
// on the Lease backend with token T, When someone edits a label of the Lease
// (an unrelated write) and the holder renews, Then the token the renewal
// reports and stores is at least T, and every later grant of the key (a
// takeover once the holder is gone) gets a greater one. It is not T itself: a
// grant is one Create and the token is the version of that write, so the
// Lease carries no token annotation until the protocol writes the record
// again, and a write by someone else in between raises the version the token
// is read from. claim.Token documents exactly this (within one grant the
// reported token may rise, never to the next grant's), and fencing needs no
// more; keeping T would cost a second write per grant.
func TestRenewAfterALabelEditKeepsTheTokenBelowTheNextGrant(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	c, err := claim.New(env.APIReader, env.Client, claim.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	_, granted, err := c.Acquire(ctx, "orders", a)
	if err != nil || granted.Reason != claim.ReasonAcquired {
		t.Fatalf("Acquire = %s, %v", granted.Reason, err)
	}
	// an unrelated write: someone labels the Lease
	l := leaseOf(t, c, "orders")
	l.Labels["team"] = "ops"
	if err := env.Client.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	renewed, err := expiry.Renew(ctx, c, "orders", a)
	if err != nil {
		t.Fatal(err)
	}
	if cmp, err := renewed.Token.Compare(granted.Token); err != nil || cmp < 0 {
		t.Errorf("Renew after a label edit reports token %s, older than the grant's %s (%v)", renewed.Token, granted.Token, err)
	}
	stored := backends.Token(leaseOf(t, c, "orders").Annotations[backends.DefaultTokenAnnotation])
	if stored != renewed.Token {
		t.Errorf("the Lease stores token %q, the renewal reported %s", stored, renewed.Token)
	}
	// And the next grant's token is newer than anything the first grant reported
	deleteHolder(t, a)
	_, next, err := c.Acquire(ctx, "orders", b)
	if err != nil || next.Reason != claim.ReasonTakenOver {
		t.Fatalf("Acquire by b = %s, %v", next.Reason, err)
	}
	if cmp, err := next.Token.Compare(renewed.Token); err != nil || cmp <= 0 {
		t.Errorf("the next grant's token %s is not newer than the first grant's reported %s (%v)", next.Token, renewed.Token, err)
	}
}
