package lease_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/ocf-claim/claim/pkg/claim"
)

// TestTokensStrictlyIncreaseOverRandomOperations drives one key through
// random acquires, takeovers, releases, re-acquires, holder deletions and
// recreations, and planned handovers, and checks the fencing token: every new
// grant's token is greater than every earlier grant's, and re-entry reports
// the token of the grant in force.
func TestTokensStrictlyIncreaseOverRandomOperations(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			ctx, ns := context.Background(), env.Namespace(t)
			rng := rand.New(rand.NewPCG(seed, seed))
			c := newClaimer(t, ns, nil, nil)
			names := []string{"a", "b", "c"}
			holders := map[string]claim.Holder{}
			for _, n := range names {
				holders[n] = holder(t, ns, n)
			}
			var last claim.Token // token of the newest grant
			grants := 0
			newGrant := func(op string, tok claim.Token) {
				t.Helper()
				if cmp, err := tok.Compare(last); err != nil || cmp <= 0 {
					t.Fatalf("%s: token %s not after the previous grant's %s (%v)", op, tok, last, err)
				}
				last = tok
				grants++
			}
			for step := range 40 {
				n := names[rng.IntN(len(names))]
				h := holders[n]
				op := rng.IntN(5)
				switch op {
				case 0, 1: // acquire (may grant, take over, re-enter or park)
					_, o, err := c.Acquire(ctx, key, h)
					if err != nil {
						t.Fatalf("step %d acquire by %s: %v", step, n, err)
					}
					switch o.Reason {
					case claim.ReasonAcquired, claim.ReasonTakenOver:
						newGrant(fmt.Sprintf("step %d %s by %s", step, o.Reason, n), o.Token)
					case claim.ReasonHeld:
						if o.Token != last {
							t.Fatalf("step %d re-entry by %s reports token %s, grant in force has %s", step, n, o.Token, last)
						}
					}
				case 2: // release
					if err := c.Release(ctx, h); err != nil {
						t.Fatalf("step %d release by %s: %v", step, n, err)
					}
				case 3: // the holder object dies and comes back with a new UID
					deleteHolder(t, h)
					holders[n] = holder(t, ns, n)
				case 4: // planned handover to another holder, if n holds
					to := holders[names[(indexOf(names, n)+1)%len(names)]]
					if _, err := c.Prepare(ctx, key, h, to); err != nil {
						if errors.Is(err, claim.ErrNotHolder) {
							continue
						}
						t.Fatalf("step %d prepare: %v", step, err)
					}
					o, err := c.Commit(ctx, key, h, to)
					if err != nil {
						t.Fatalf("step %d commit: %v", step, err)
					}
					newGrant(fmt.Sprintf("step %d commit %s->%s", step, n, to.Name), o.Token)
				}
			}
			if grants < 3 {
				t.Fatalf("only %d grants in 40 steps: the sequence proves little", grants)
			}
		})
	}
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}
