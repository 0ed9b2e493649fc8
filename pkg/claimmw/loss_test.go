package claimmw_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// Promise 2: a holder whose record is taken over learns it in its next
// pass: Claimed leaves True, its inner reconciler runs parked once, a Lost
// event is recorded. This holds when the first pass after the takeover
// cannot judge the claim (a transient liveness error: the API server
// throttled the read of the new holder), so the ClaimError condition
// overwrites Claimed=True and the next pass cannot learn from the condition
// that the object held the key.
func TestALossFirstSeenThroughATransientClaimErrorIsStillReportedAsLost(t *testing.T) {
	var failing atomic.Bool
	live := claim.HolderExists(env.APIReader)
	liveness := claim.LivenessFunc(func(ctx context.Context, rec claim.Record) (bool, error) {
		if failing.Load() {
			return false, errors.New("injected: the API server throttled the liveness read")
		}
		return live.Alive(ctx, rec)
	})
	f := start(t, setup{claimOpts: []claim.Option{claim.WithLiveness(liveness)}})
	ctx := context.Background()
	// Given a holds k and its inner reconciler acts for it
	f.createAndWait(t, "a", conditions.ReasonClaimed, "k")
	eventually(t, 5*time.Second, func() (bool, string) {
		cs := f.inner.callsOf("a")
		return len(cs) > 0 && cs[len(cs)-1].state.Granted, fmt.Sprintf("calls of a: %+v", cs)
	})
	// When judging liveness fails for a moment, and meanwhile another
	// replica takes k over with a fenced Update naming a live holder
	failing.Store(true)
	intruder, h := f.intruderHolder(t)
	if _, o, err := intruder.Acquire(ctx, "k", h); err != nil || o.Reason != claim.ReasonTakenOver {
		t.Fatalf("takeover of k: %+v, %v", o, err)
	}
	takenOver := len(f.inner.callsOf("a"))
	f.waitForReason(t, "a", conditions.ReasonClaimError, 5*time.Second)
	// and then liveness can be read again
	failing.Store(false)
	// Then a parks on the live intruder
	f.waitForReason(t, "a", conditions.ReasonParked, 10*time.Second)
	// And its inner reconciler was told, by a parked pass, that it must stop
	// acting for k
	softEventually(t, 3*time.Second, func() (bool, string) {
		cs := f.inner.callsOf("a")[takenOver:]
		for _, c := range cs {
			if c.hasState && !c.state.Granted && !c.state.Deleting {
				return true, ""
			}
		}
		return false, fmt.Sprintf("no parked pass of a's inner reconciler after k was taken over; calls since: %+v", cs)
	})
	// And a Lost event was recorded
	softEventually(t, 3*time.Second, func() (bool, string) {
		return f.hasEvent(t, "a", string(claimmw.EventLost)), "no Lost event on a"
	})
}

// Promise 2: a holder whose record is deleted from outside learns it in its
// next pass, even when nobody else waits, so nothing but the holder itself
// can create the record again.
func TestAHolderWhoseRecordIsDeletedWithNoWaiterLearnsIt(t *testing.T) {
	f := start(t, setup{})
	ctx := context.Background()
	// Given a holds k and acted for it
	f.createAndWait(t, "a", conditions.ReasonClaimed, "k")
	before := f.record(t, "k")
	n := len(f.inner.callsOf("a"))
	// When a person deletes k's Lease
	if err := direct(t).Delete(ctx, f.leaseOf(t, "k")); err != nil {
		t.Fatal(err)
	}
	// Then within 2 s a's inner reconciler learned it: it ran parked, or
	// (the key being free, and a still naming it) granted under a new,
	// greater token, which a fenced resource tells from the old one; and a
	// Lost event was recorded
	softEventually(t, 2*time.Second, func() (bool, string) {
		cs := f.inner.callsOf("a")[n:]
		for _, c := range cs {
			if c.hasState && !c.state.Granted {
				return true, ""
			}
			if c.hasState && len(c.state.Grants) == 1 {
				if cmp, err := c.state.Grants[0].Token.Compare(before.Token); err == nil && cmp > 0 {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("calls since deletion: %+v; a: %+v; record now %+v (was token %s)", cs, f.claimed(t, "a"), f.record(t, "k"), before.Token)
	})
	softEventually(t, 2*time.Second, func() (bool, string) {
		return f.hasEvent(t, "a", string(claimmw.EventLost)), "no Lost event on a"
	})
}

func TestAHolderWhoseRecordIsDeletedFromOutsideStopsClaimingWithinTwoSeconds(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WhileParked(claimmw.RunInnerWhileParked)}})
	// Given alpha holds k and bravo is parked on it
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	// When a person deletes k's Lease (kubectl claims release, a GitOps prune)
	deleted := time.Now()
	f.deleteLease(t, "k")
	// Then within two seconds exactly one of them holds k, and the other's
	// condition says it does not: never two Claimed=True for one key
	var holder, other string
	eventually(t, lossWithin, func() (bool, string) {
		rec, err := f.mw.Claimer().Current(context.Background(), "k")
		if err != nil || !rec.Exists {
			return false, fmt.Sprintf("record of k: exists %t, %v", rec.Exists, err)
		}
		holder, other = rec.Holder.Name, "alpha"
		if holder == "alpha" {
			other = "bravo"
		}
		hc, oc := f.claimed(t, holder), f.claimed(t, other)
		return hc.Status == "True" && oc.Status == "False",
			fmt.Sprintf("record names %s; %s: %s/%s, %s: %s/%s", holder, holder, hc.Status, hc.Reason, other, oc.Status, oc.Reason)
	})
	t.Logf("%s holds k, %s parked, %s after the deletion", holder, other, time.Since(deleted).Round(time.Millisecond))
	// And the inner reconciler of the loser last ran parked
	calls := f.inner.callsOf(other)
	if len(calls) == 0 || calls[len(calls)-1].state.Granted {
		t.Errorf("last inner call of %s: %+v, want a parked pass", other, calls[len(calls)-1:])
	}
}

func TestAHolderThatLosesItsKeyIsToldByAnEventAndItsInnerPassRunsParked(t *testing.T) {
	f := start(t, setup{})
	// Given alpha holds k (skip mode: its inner runs only when it must)
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k")
	before := len(f.inner.callsOf("alpha"))
	// When another replica judging alpha expired takes k over for the
	// parked object other (a takeover
	// fenced on the Lease's version, as expiry.Liveness would allow)
	f.createAndWait(t, "other", conditions.ReasonParked, "k")
	f.takeOverFor(t, "k", "other")
	// Then alpha is Parked within two seconds, naming other, which is Claimed
	cond := f.waitForReason(t, "alpha", conditions.ReasonParked, lossWithin)
	mustContain(t, "alpha's message", cond.Message, "other")
	f.waitForReason(t, "other", conditions.ReasonClaimed, lossWithin)
	// And its inner reconciler ran once more, parked, to stop acting
	eventually(t, lossWithin, func() (bool, string) {
		calls := f.inner.callsOf("alpha")
		if len(calls) <= before {
			return false, "no inner pass of alpha after the loss"
		}
		last := calls[len(calls)-1]
		return !last.state.Granted && len(last.state.Grants) == 0, fmt.Sprintf("last inner pass of alpha: %+v", last.state)
	})
}
