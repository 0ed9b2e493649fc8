package claim_test

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/expiry"
)

// TestAnExpiryBehindByKindStillExpires: Given a Liveness that dispatches
// holders of kind Worker to an Expiry through ByKind, When a Worker holder
// is not renewed for the whole duration, Then a contender takes its key
// over: no wrapper hides what the Expiry needs to judge.
func TestAnExpiryBehindByKindStillExpires(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	exp, err := expiry.New(30*time.Second, clk)
	if err != nil {
		t.Fatal(err)
	}
	liveness := claim.ByKind(map[string]claim.Liveness{"Worker": exp}, nil)
	c := memClaimer(t, claim.WithLiveness(liveness), claim.WithClock(clk))
	worker := claim.Holder{Kind: "Worker", Namespace: "ns", Name: "w", UID: "uid-w"}
	contender := claim.Holder{Kind: "Worker", Namespace: "ns", Name: "v", UID: "uid-v"}
	const key = "queue/orders"
	wantAcquire(t, c, key, worker, claim.ReasonAcquired, "Acquire(worker)")
	wantAcquire(t, c, key, contender, claim.ReasonHeldElsewhere, "first Acquire(contender)")

	clk.Step(31 * time.Second)
	_, o, err := c.Acquire(ctx, key, contender)

	if err != nil || o.Reason != claim.ReasonTakenOver {
		t.Fatalf("Acquire(contender) after the duration = %s, %v; want TakenOver", o.Reason, err)
	}
}
