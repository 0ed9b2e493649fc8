package claim_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
)

// TestCommitToSelfIsNotPrepared: Given a holder that prepared nothing, When
// it commits a handover of its key to itself, Then the Commit fails with
// ErrNotPrepared and nothing is written: committing to oneself can never
// have been prepared, and must not be reported as a takeover.
func TestCommitToSelfIsNotPrepared(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	c, err := memory.NewClaimer(store, claim.Config{Namespace: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	self := claim.Holder{Kind: "CamundaCluster", Namespace: "team-a", Name: "alpha", UID: "uid-alpha"}
	const key = "elasticsearch|https://es.data.svc:9200"
	_, granted, err := c.Acquire(ctx, key, self)
	if err != nil || !granted.Granted() {
		t.Fatalf("Acquire() = %+v, %v; want granted", granted, err)
	}

	o, err := c.Commit(ctx, key, self, self)

	if !errors.Is(err, claim.ErrNotPrepared) {
		t.Fatalf("Commit(self, self) = %s, %v; want an error wrapping ErrNotPrepared", o.Reason, err)
	}
	rec, err := c.Current(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Version != granted.Record.Version {
		t.Fatalf("Commit(self, self) wrote the record: version %s, was %s", rec.Version, granted.Record.Version)
	}
}

// TestCommitWithNothingPreparedIsNotATakeover: Commit fails with
// ErrNotPrepared when no successor (or another holder) is recorded; only a
// Commit retried after its own write landed reports the grant again. Given a
// key that successor acquired on its own (no handover was ever prepared; self
// never held the key), When self commits a handover of the key to successor,
// Then it fails with ErrNotPrepared or ErrNotHolder: a holder is never told
// that a handover it never prepared went through, nor a holder whose key was
// taken over by the object it had meant to hand over to.
func TestCommitWithNothingPreparedIsNotATakeover(t *testing.T) {
	ctx := context.Background()
	c := memClaimer(t)
	self := claim.Holder{Kind: "CamundaCluster", Namespace: "team-a", Name: "alpha", UID: "uid-alpha"}
	successor := claim.Holder{Kind: "CamundaCluster", Namespace: "team-a", Name: "bravo", UID: "uid-bravo"}
	const key = "elasticsearch|https://es.data.svc:9200"
	wantAcquire(t, c, key, successor, claim.ReasonAcquired, "Acquire(successor)")

	o, err := c.Commit(ctx, key, self, successor)

	if !errors.Is(err, claim.ErrNotPrepared) && !errors.Is(err, claim.ErrNotHolder) {
		t.Fatalf("Commit(self, successor) with nothing prepared and self never holding = %s (previous %s), %v; want ErrNotPrepared or ErrNotHolder", o.Reason, o.Previous, err)
	}
}
