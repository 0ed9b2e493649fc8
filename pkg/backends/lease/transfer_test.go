package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
)

// prepared sets up a handover: a holds key through c (first is its
// grant) and has prepared to hand it to b.
func prepared(t *testing.T) (ns string, c *claim.Claimer, a, b claim.Holder, first claim.Outcome) {
	t.Helper()
	ns = env.Namespace(t)
	a, b = holder(t, ns, "a"), holder(t, ns, "b")
	c = newClaimer(t, ns, nil, nil)
	first = acquire(t, c, key, a)
	if _, err := c.Prepare(context.Background(), key, a, b); err != nil {
		t.Fatal(err)
	}
	return ns, c, a, b, first
}

func TestPlannedHandoverHappyPath(t *testing.T) {
	ctx := context.Background()
	// Given a prepared a handover to b
	_, c, a, b, first := prepared(t)
	// Then b is not granted before the commit, and is told it waits
	waiting := acquire(t, c, key, b)
	wantReason(t, waiting, claim.ReasonWaitingForHandover)
	if !waiting.Previous.Is(a) {
		t.Fatalf("waiting names %s, want %s", waiting.Previous, a)
	}
	// And a still holds with its token unchanged
	if still := acquire(t, c, key, a); still.Reason != claim.ReasonHeld || still.Token != first.Token {
		t.Fatalf("holder after Prepare: %s token %s, want Held token %s", still.Reason, still.Token, first.Token)
	}
	// When a commits
	committed, err := c.Commit(ctx, key, a, b)
	if err != nil {
		t.Fatal(err)
	}
	// Then b holds with a larger token and a no longer does
	if !committed.Holder.Is(b) || committed.Reason != claim.ReasonTakenOver {
		t.Fatalf("commit outcome %+v", committed)
	}
	if cmp, _ := committed.Token.Compare(first.Token); cmp <= 0 {
		t.Fatalf("committed token %s not after %s", committed.Token, first.Token)
	}
	got := acquire(t, c, key, b)
	wantReason(t, got, claim.ReasonHeld)
	if got.Token != committed.Token {
		t.Fatalf("successor re-entry token %s, want %s", got.Token, committed.Token)
	}
	if held, _ := c.Holds(ctx, key, a); held {
		t.Fatal("previous holder still holds after commit")
	}
}

func TestCommitAfterTheRecordChangedFails(t *testing.T) {
	ctx := context.Background()
	ns, c, a, b, _ := prepared(t)
	third := holder(t, ns, "third")
	// Given the handover was re-prepared for another successor
	if _, err := c.Prepare(ctx, key, a, third); err != nil {
		t.Fatal(err)
	}
	// When the first handover is committed
	_, err := c.Commit(ctx, key, a, b)
	// Then it is refused and nobody but a holds
	if !errors.Is(err, claim.ErrNotPrepared) {
		t.Fatalf("Commit to a replaced successor: %v, want ErrNotPrepared", err)
	}
	if held, _ := c.Holds(ctx, key, a); !held {
		t.Fatal("a lost the key to a refused commit")
	}

	// Given a Lease edit lands between Commit's read and its write
	var cc *claim.Claimer
	writer := env.TestClient(t)
	editing := interceptor.NewClient(writer, interceptor.Funcs{
		Update: func(ctx context.Context, w client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := touchLease(ctx, t, w, cc, key); err != nil {
				return err
			}
			return w.Update(ctx, obj, opts...)
		},
	})
	cc = newClaimer(t, ns, nil, editing)
	// Then the commit is refused as a conflict, not half-applied
	if _, err := cc.Commit(ctx, key, a, third); !errors.Is(err, backends.ErrConflict) {
		t.Fatalf("Commit over an edited Lease: %v, want ErrConflict", err)
	}
	if held, _ := c.Holds(ctx, key, third); held {
		t.Fatal("successor granted by a refused commit")
	}
}

func TestAbort(t *testing.T) {
	ctx := context.Background()
	_, c, a, b, _ := prepared(t)
	// When a aborts
	if err := c.Abort(ctx, key, a); err != nil {
		t.Fatal(err)
	}
	// Then b is parked again, not waiting, and a commit is refused
	wantReason(t, acquire(t, c, key, b), claim.ReasonHeldElsewhere)
	if _, err := c.Commit(ctx, key, a, b); !errors.Is(err, claim.ErrNotPrepared) {
		t.Fatalf("Commit after Abort: %v, want ErrNotPrepared", err)
	}
	// And aborting again writes nothing and succeeds
	if err := c.Abort(ctx, key, a); err != nil {
		t.Fatalf("second Abort: %v", err)
	}

	// Given a committed handover
	if _, err := c.Prepare(ctx, key, a, b); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Commit(ctx, key, a, b); err != nil {
		t.Fatal(err)
	}
	// Then an abort is refused and b keeps the key
	if err := c.Abort(ctx, key, a); !errors.Is(err, claim.ErrNotHolder) {
		t.Fatalf("Abort after Commit: %v, want ErrNotHolder", err)
	}
	if held, _ := c.Holds(ctx, key, b); !held {
		t.Fatal("successor lost the key to a refused abort")
	}
}

func TestCommitRetriedAfterALostResponseConverges(t *testing.T) {
	ctx := context.Background()
	ns, c, a, b, _ := prepared(t)
	// Given a writer whose first Update is applied on the server but whose
	// answer is lost
	var lost atomic.Bool
	writer := env.TestClient(t)
	lossy := interceptor.NewClient(writer, interceptor.Funcs{
		Update: func(ctx context.Context, w client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := w.Update(ctx, obj, opts...); err != nil {
				return err
			}
			if lost.CompareAndSwap(false, true) {
				return errors.New("connection reset by peer")
			}
			return nil
		},
	})
	lc := newClaimer(t, ns, nil, lossy)
	if _, err := lc.Commit(ctx, key, a, b); err == nil {
		t.Fatal("the lost answer was not reported")
	}
	// When the commit is retried
	again, err := lc.Commit(ctx, key, a, b)
	// Then it converges on the one grant that landed, without a second write
	if err != nil {
		t.Fatalf("retried Commit: %v", err)
	}
	held := acquire(t, c, key, b)
	if !again.Holder.Is(b) || again.Token != held.Token {
		t.Fatalf("retry reports %s token %s; b holds with token %s", again.Holder, again.Token, held.Token)
	}
	// And a retried Prepare is idempotent the same way
	if _, err := c.Prepare(ctx, key, b, a); err != nil {
		t.Fatal(err)
	}
	before := leaseOf(t, c, key).ResourceVersion
	if _, err := c.Prepare(ctx, key, b, a); err != nil {
		t.Fatal(err)
	}
	if after := leaseOf(t, c, key).ResourceVersion; after != before {
		t.Fatal("a repeated Prepare wrote the Lease again")
	}
}

func TestPrepareByANonHolderIsRefused(t *testing.T) {
	ctx, ns := context.Background(), env.Namespace(t)
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	c := newClaimer(t, ns, nil, nil)
	acquire(t, c, key, a)
	if _, err := c.Prepare(ctx, key, b, b); !errors.Is(err, claim.ErrNotHolder) {
		t.Fatalf("Prepare by a non-holder: %v, want ErrNotHolder", err)
	}
	if _, err := c.Prepare(ctx, key, a, a); !errors.Is(err, claim.ErrInvalidHolder) {
		t.Fatalf("Prepare to self: %v, want ErrInvalidHolder", err)
	}
}
