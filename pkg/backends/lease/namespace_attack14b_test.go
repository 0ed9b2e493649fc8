package lease_test

import (
	"context"
	"testing"

	"github.com/ocf-claim/claim/pkg/claim"
)

// TestAttack14bOneClaimNamespaceIsOneExclusionBoundary: promise
// (claim.Config.Namespace, docs/multi-tenancy.md): the claim namespace is the
// whole exclusion boundary, "a key is exclusive among the objects whose
// middlewares store their records in one claim namespace". Config.Set even
// anticipates two Claimers with different Prefixes in one namespace. Given
// two Claimers storing Leases in the same namespace, one with the default
// Prefix and one with Prefix "lock-", When two holders acquire the same key,
// Then the second must not be granted. It is: each Claimer looks only at its
// own record name, so one key has two holders in one claim namespace, and
// `kubectl claims list -A` has nothing to warn about (one namespace).
func TestAttack14bOneClaimNamespaceIsOneExclusionBoundary(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	writer, err := env.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	ca, err := claim.New(env.APIReader, writer, claim.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	cb, err := claim.New(env.APIReader, writer, claim.Config{Namespace: ns, Prefix: "lock-"})
	if err != nil {
		t.Fatal(err)
	}

	_, oa, err := ca.Acquire(ctx, key, a)
	if err != nil || !oa.Granted() {
		t.Fatalf("a: Acquire() = %s, %v; want granted", oa.Reason, err)
	}
	_, ob, err := cb.Acquire(ctx, key, b)
	if err != nil {
		t.Fatalf("b: Acquire(): %v", err)
	}
	if ob.Granted() {
		t.Errorf("key %q granted to %s (record %s) while %s holds it (record %s), both records in claim namespace %s", key, b, ob.Record.Ref, a, oa.Record.Ref, ns)
	}
}
