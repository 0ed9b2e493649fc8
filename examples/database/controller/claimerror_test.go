package controller_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ocf-claim/claim/pkg/conditions"
)

// TestReadyIsNotTrueWhileTheClaimIsAnError: Ready folds the claim in by
// unanimity (True only when Claimed is True), also when the claim cannot be
// judged: the middleware then writes Claimed=False (ClaimError) and returns
// the error without calling the inner reconciler, and the example's Ready,
// which only the inner pass writes, does not stay True for the same
// generation beside the False claim while the fault lasts.
func TestReadyIsNotTrueWhileTheClaimIsAnError(t *testing.T) {
	var failLeaseCreates atomic.Bool
	funcs := interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, isLease := obj.(*coordinationv1.Lease); isLease && failLeaseCreates.Load() {
				return apierrors.NewServiceUnavailable("injected by the test: Lease creates fail")
			}
			return c.Create(ctx, obj, opts...)
		},
	}
	ns, c := startManager(t, intercepted(funcs))
	ctx := context.Background()

	// Given db holds its database and is Ready
	db := createDatabase(t, c, ns, "db", "postgres://pg.data.svc/orders", 0)
	waitForClaim(t, c, ns, "db", conditions.ReasonClaimed)
	eventuallyReady(t, c, ns, "db")

	// When its claim record disappears and the API server refuses to
	// create Leases for a while (the claim cannot be judged)
	failLeaseCreates.Store(true)
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 1 {
		t.Fatalf("%d Leases, want db's one", len(leases.Items))
	}
	if err := c.Delete(ctx, &leases.Items[0]); err != nil {
		t.Fatal(err)
	}
	got := waitForClaim(t, c, ns, "db", conditions.ReasonClaimError)
	time.Sleep(2 * time.Second) // a few retries
	if err := c.Get(ctx, client.ObjectKeyFromObject(db), got); err != nil {
		t.Fatal(err)
	}

	// Then Ready is not True beside the False claim of the same generation
	claimed := meta.FindStatusCondition(got.Status.Conditions, string(conditions.Claimed))
	ready := meta.FindStatusCondition(got.Status.Conditions, string(conditions.Ready))
	t.Logf("generation %d: Claimed=%s/%s@%d %q; Ready=%s/%s@%d", got.Generation,
		claimed.Status, claimed.Reason, claimed.ObservedGeneration, claimed.Message, ready.Status, ready.Reason, ready.ObservedGeneration)
	if claimed.Status != metav1.ConditionTrue && ready.Status == metav1.ConditionTrue {
		t.Errorf("Ready=True (%s, generation %d) while Claimed=%s (%s, generation %d): Ready is not the unanimous fold of the claim",
			ready.Reason, ready.ObservedGeneration, claimed.Status, claimed.Reason, claimed.ObservedGeneration)
	}
}
