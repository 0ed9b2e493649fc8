package lease_test

import (
	"context"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/claim"
)

// TestHolderLabelsOfNamespaceAndNameAreWritable: Given HolderLabels that
// label records with the holder's namespace/name (a '/' no label value may
// hold), When a holder acquires and then releases on a real API server, Then
// the Lease is written with a valid label and the release sweep finds it by
// that label and deletes it.
func TestHolderLabelsOfNamespaceAndNameAreWritable(t *testing.T) {
	ctx, ns := context.Background(), env.Namespace(t)
	a := holder(t, ns, "a")
	writer := env.TestClient(t)
	cfg := claim.Config{Namespace: ns, HolderLabels: func(h claim.Holder) map[string]string {
		return map[string]string{"example.com/holder": h.Namespace + "/" + h.Name}
	}}
	c, err := claim.New(env.APIReader, writer, cfg)
	if err != nil {
		t.Fatalf("lease.NewClaimer: %v", err)
	}

	wantReason(t, acquire(t, c, key, a), claim.ReasonAcquired)
	if err := c.Release(ctx, a); err != nil {
		t.Fatalf("Release: %v", err)
	}

	var l coordinationv1.Lease
	err = env.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Config().NameFunc(key)}, &l)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("Lease after release: %v (labels %v), want it deleted", err, l.Labels)
	}
}

// TestNewRefusesANameFuncThatMakesInvalidLeaseNames: New validates
// configuration once, at construction. Given a Config whose NameFunc returns
// names no Lease can have (upper case, '_'), When claim.New is called with
// the default Lease backend, Then it refuses the config naming NameFunc, as
// it refuses a HolderLabels function by probing it, rather than failing the
// first Acquire with an API error.
func TestNewRefusesANameFuncThatMakesInvalidLeaseNames(t *testing.T) {
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
