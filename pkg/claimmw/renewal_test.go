package claimmw_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
	"github.com/ocf-claim/claim/pkg/expiry"
)

func TestAHolderThatCannotRenewStopsActingAndAnExpiryContenderWaitsTheWholeDuration(t *testing.T) {
	t.Parallel()
	const (
		duration = 30 * time.Second
		every    = 5 * time.Second
		deadline = 20 * time.Second
	)
	clk := testingclock.NewFakeClock(time.Now())
	exp, err := expiry.New(duration, clk)
	if err != nil {
		t.Fatal(err)
	}
	f := start(t, setup{
		opts: []claimmw.Option{
			claimmw.WithRenewal(expiry.KeeperConfig{Duration: duration, RenewEvery: every, RenewDeadline: deadline, Clock: clk}),
			claimmw.WhileParked(claimmw.RunInnerWhileParked), // each parked pass of b is visible
		},
		claimOpts: []claim.Option{claim.WithLiveness(exp), claim.WithClock(clk)},
		workers:   2, // a's pass blocks one worker
	})
	// Given a holds k on time-based liveness, and its inner pass acts until
	// its context ends
	passes := make(chan context.Context, 1)
	f.inner.mu.Lock()
	f.inner.hook = func(ctx context.Context, name string, c call) (reconcile.Result, error) {
		if name != "a" || !c.state.Granted {
			return reconcile.Result{}, nil
		}
		select {
		case passes <- ctx:
		default:
		}
		select {
		case <-ctx.Done():
			return reconcile.Result{}, context.Cause(ctx)
		case <-time.After(20 * time.Second):
			return reconcile.Result{}, errors.New("a's pass was never cancelled")
		}
	}
	f.inner.mu.Unlock()
	f.createWidget(t, "a", "k")
	var pass context.Context
	select {
	case pass = <-passes:
	case <-time.After(10 * time.Second):
		t.Fatal("a's inner pass never ran")
	}
	a, _ := f.widget(t, "a")
	// And b names k and is parked, judging a by its record's changes
	f.createWidget(t, "b", "k")
	f.waitForReason(t, "b", conditions.ReasonParked, 10*time.Second)
	bPasses := func() int { return len(f.inner.callsOf("b")) }

	// When a's renewals start failing and renew ticks pass short of the deadline
	f.writes.failRenewalsOf.Store(a.UID)
	clk.Step(every)
	eventually(t, wakeWithin, func() (bool, string) {
		return f.writes.failedRenewals.Load() >= 1, "no renewal of a was attempted"
	})
	clk.Step(deadline - every - time.Second)
	// Then a still acts, and b, asked again, is still parked
	seen := bPasses()
	f.touch(t, "b")
	eventually(t, wakeWithin, func() (bool, string) { return bPasses() > seen, "b was not reconciled" })
	if err := pass.Err(); err != nil {
		t.Fatalf("a's pass ended before its renew deadline: %v", context.Cause(pass))
	}
	if got := f.claimed(t, "b").Reason; got != string(conditions.ReasonParked) {
		t.Fatalf("b before the deadline: %s, want Parked", got)
	}

	// When the renew deadline passes
	clk.Step(2 * time.Second)
	// Then a's pass is cancelled, with the renew deadline as its cause
	select {
	case <-pass.Done():
	case <-time.After(wakeWithin):
		t.Fatal("a's pass was not cancelled after its renew deadline")
	}
	if cause := context.Cause(pass); !errors.Is(cause, expiry.ErrRenewDeadline) {
		t.Errorf("a's pass ended with %v, want expiry.ErrRenewDeadline", cause)
	}
	// And b, asked again before the lease duration, is still parked
	seen = bPasses()
	f.touch(t, "b")
	eventually(t, wakeWithin, func() (bool, string) { return bPasses() > seen, "b was not reconciled" })
	if got := f.claimed(t, "b").Reason; got != string(conditions.ReasonParked) {
		t.Fatalf("b %s after a's deadline, before the duration: %s, want Parked", deadline, got)
	}

	// When the lease duration has passed since b saw the record change
	clk.Step(duration - deadline)
	f.touch(t, "b")
	// Then b takes k over
	f.waitForReason(t, "b", conditions.ReasonClaimed, wakeWithin)
	rec := f.record(t, "k")
	b, _ := f.widget(t, "b")
	if rec.Holder.UID != b.UID {
		t.Errorf("record of k held by %s, want b", rec.Holder)
	}
	// And a ends parked on b
	cond := f.waitForReason(t, "a", conditions.ReasonParked, wakeWithin)
	mustContain(t, "a's message", cond.Message, fmt.Sprintf("Widget %s/b", f.ns))
}
