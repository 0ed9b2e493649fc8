package lease_test

import (
	"context"
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
	writer, err := env.NewClient()
	if err != nil {
		t.Fatal(err)
	}
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
