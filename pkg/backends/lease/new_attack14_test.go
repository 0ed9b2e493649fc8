package lease_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ocf-claim/claim/pkg/claim"
)

// TestAttack14_NewRefusesANameFuncThatMakesInvalidLeaseNames (issue 14, item
// 1: New validates configuration once, at construction): Given a Config whose
// NameFunc returns names no Lease can have (upper case, '_'), When claim.New
// is called with the default Lease backend, Then it refuses the config naming
// NameFunc, as it refuses a HolderLabels function by probing it. It accepts
// it; the problem surfaces only at the first Acquire, as an API error of the
// first write.
func TestAttack14_NewRefusesANameFuncThatMakesInvalidLeaseNames(t *testing.T) {
	ns := env.Namespace(t)
	cfg := claim.Config{Namespace: ns, NameFunc: func(key string) string { return "Claim_" + key }}
	c, err := claim.New(env.APIReader, env.Client, cfg)
	if err != nil {
		if !strings.Contains(err.Error(), "NameFunc") {
			t.Fatalf("New() refused the config but does not name NameFunc: %v", err)
		}
		return
	}
	a := holder(t, ns, "a")
	_, _, acqErr := c.Acquire(context.Background(), "orders", a)
	t.Fatalf("claim.New accepted a NameFunc that makes invalid Lease names; the first Acquire then failed with: %v", acqErr)
}
