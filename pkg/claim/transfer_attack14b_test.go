package claim_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
)

// TestAttack14bCommitWithNothingPreparedIsNotATakeover: promise: Commit
// fails with ErrNotPrepared when no successor (or another holder) is
// recorded; only a Commit retried after its own write landed reports the
// grant again. Given a key that successor acquired on its own (no handover
// was ever prepared; self never held the key), When self commits a handover
// of the key to successor, Then it must fail (ErrNotPrepared or
// ErrNotHolder). It succeeds instead, reporting ReasonTakenOver "from" self,
// with successor's unrelated grant token: any holder is told a handover it
// never prepared went through. The same happens to a holder whose key was
// taken over (judged dead) by the object it had meant to hand over to.
func TestAttack14bCommitWithNothingPreparedIsNotATakeover(t *testing.T) {
	ctx := context.Background()
	c, err := memory.NewClaimer(memory.New(), claim.Config{Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	self := claim.Holder{Kind: "CamundaCluster", Namespace: "team-a", Name: "alpha", UID: "uid-alpha"}
	successor := claim.Holder{Kind: "CamundaCluster", Namespace: "team-a", Name: "bravo", UID: "uid-bravo"}
	const key = "elasticsearch|https://es.data.svc:9200"
	if _, o, err := c.Acquire(ctx, key, successor); err != nil || o.Reason != claim.ReasonAcquired {
		t.Fatalf("Acquire(successor) = %s, %v; want Acquired", o.Reason, err)
	}

	o, err := c.Commit(ctx, key, self, successor)

	if !errors.Is(err, claim.ErrNotPrepared) && !errors.Is(err, claim.ErrNotHolder) {
		t.Fatalf("Commit(self, successor) with nothing prepared and self never holding = %s (previous %s), %v; want ErrNotPrepared or ErrNotHolder", o.Reason, o.Previous, err)
	}
}
