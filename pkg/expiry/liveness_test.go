package expiry_test

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/expiry"
)

// TestALivenessSharedByTwoClaimersStillExpiresDeadHolders: expiry.New is a
// claim.Liveness "judging a holder dead once this process has not seen its
// renew marker (holder UID, acquire time, renew time) change for duration",
// per record, not per key string. Given one expiry.Liveness given to two
// Claimers of one process whose records live in different places (two claim
// namespaces here; two prefixes or two backends do the same), and key "k"
// granted in each to a different holder, neither of which ever renews, When a
// contender asks for "k" through both Claimers every 10 s for three lease
// durations, Then both dead holders are taken over: one record's marker is
// never taken for a change of the other's.
func TestALivenessSharedByTwoClaimersStillExpiresDeadHolders(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const duration = 30 * time.Second
	exp, err := expiry.New(duration, clk)
	if err != nil {
		t.Fatal(err)
	}
	store := memory.New()
	newClaimer := func(ns string) *claim.Claimer {
		c, err := memory.NewClaimer(store, claim.Config{Namespace: ns}, claim.WithLiveness(exp), claim.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	teamA, teamB := newClaimer("team-a"), newClaimer("team-b")
	holderA := claim.Holder{Kind: "Job", Namespace: "team-a", Name: "a", UID: "uid-a"}
	holderB := claim.Holder{Kind: "Job", Namespace: "team-b", Name: "b", UID: "uid-b"}
	contender := claim.Holder{Kind: "Job", Namespace: "team-c", Name: "c", UID: "uid-c"}
	for _, g := range []struct {
		c *claim.Claimer
		h claim.Holder
	}{{teamA, holderA}, {teamB, holderB}} {
		if _, o, err := g.c.Acquire(ctx, "k", g.h); err != nil || o.Reason != claim.ReasonAcquired {
			t.Fatalf("Acquire(k, %s) = %s, %v", g.h, o.Reason, err)
		}
	}

	// When the contender asks through both Claimers every 10 s for 90 s;
	// neither holder renews
	takenOver := map[string]bool{}
	for step := 0; step <= 9; step++ {
		for name, c := range map[string]*claim.Claimer{"team-a": teamA, "team-b": teamB} {
			if takenOver[name] {
				continue
			}
			_, o, err := c.Acquire(ctx, "k", contender)
			if err != nil {
				t.Fatalf("Acquire(k) in %s: %v", name, err)
			}
			if o.Reason == claim.ReasonTakenOver {
				takenOver[name] = true
			}
		}
		clk.Step(10 * time.Second)
	}

	// Then both dead holders were taken over
	for _, name := range []string{"team-a", "team-b"} {
		if !takenOver[name] {
			t.Errorf("the holder of k in %s never renewed, yet after %v (3 lease durations) it is still judged alive", name, 90*time.Second)
		}
	}
}
