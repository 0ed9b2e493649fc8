package controller_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ocf-claim/claim/examples/database/api/v1alpha1"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// TestClaimedIsNeverTrueForAGenerationWhoseKeyIsHeldElsewhere attacks issue
// 15, items 2 and 4 (ObservedGeneration is the generation a condition was
// computed for) in the middleware itself: the first pass of a new object
// adds the finalizer, and when that patch conflicts the finalizer re-reads
// the object into the pass's own object. The pass then goes on with the
// keys it computed from the first read, but writes the claim condition with
// the generation of the re-read: Claimed=True for a generation that names a
// key another object holds, so that two Databases both say, for their
// current generation, that they hold one database.
func TestClaimedIsNeverTrueForAGenerationWhoseKeyIsHeldElsewhere(t *testing.T) {
	const (
		urlOrders  = "postgres://pg.data.svc/orders"
		urlBilling = "postgres://pg.data.svc/billing"
	)
	var armed atomic.Bool
	var writer atomic.Pointer[client.Client]
	var newGen atomic.Int64
	var swapErr atomic.Pointer[error]
	// swapped is closed when the swap has run: disarming happens before its
	// patch, so newGen and swapErr are read only after this.
	swapped := make(chan struct{})
	newClient := func(cfg *rest.Config, o client.Options) (client.Client, error) {
		base, err := client.NewWithWatch(cfg, o)
		if err != nil {
			return nil, err
		}
		return interceptor.NewClient(base, interceptor.Funcs{
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
				if _, isDB := obj.(*v1alpha1.Database); isDB && obj.GetName() == "db" && armed.CompareAndSwap(true, false) {
					// A user switches db to billing just before the
					// middleware's finalizer patch reaches the server: the
					// patch, locked on the read, conflicts for real.
					w := *writer.Load()
					sw := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: obj.GetNamespace(), Name: "db"}}
					if err := w.Patch(ctx, sw, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"url":%q}}`, urlBilling))); err != nil {
						swapErr.Store(&err)
					}
					newGen.Store(sw.Generation)
					close(swapped)
				}
				return c.Patch(ctx, obj, p, opts...)
			},
		}), nil
	}
	ns, c := startManager(t, func(o *ctrl.Options) { o.NewClient = newClient })
	writer.Store(&c)
	ctx := context.Background()

	// Given other holds billing
	other := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}, Spec: v1alpha1.DatabaseSpec{URL: urlBilling}}
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	waitForClaim(t, c, ns, "other", conditions.ReasonClaimed)
	watchCtx, stopWatching := context.WithCancel(ctx)
	histories := watchStatus(watchCtx, t, ns)

	// When db is created naming orders, and switched to billing while the
	// middleware adds its finalizer in db's first pass
	armed.Store(true)
	db := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: v1alpha1.DatabaseSpec{URL: urlOrders}}
	if err := c.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for armed.Load() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if armed.Load() {
		t.Fatal("the middleware never patched db")
	}
	select {
	case <-swapped:
	case <-time.After(15 * time.Second):
		t.Fatal("the spec swap never finished")
	}
	if p := swapErr.Load(); p != nil && !apierrors.IsConflict(*p) {
		t.Fatal(*p)
	}
	gen := newGen.Load()
	// Then db ends parked behind other
	waitForClaim(t, c, ns, "db", conditions.ReasonParked)
	waitForGeneration(t, c, ns, "db", "")
	stopWatching()
	h := (<-histories)["db"]

	// And no version of db said Claimed=True for the generation naming
	// billing, which other held all along
	for i, snap := range h {
		if o, ok := snap[string(conditions.Claimed)]; ok && o.status == metav1.ConditionTrue && o.generation >= gen {
			t.Errorf("observation %d: Claimed=True at generation %d (%q), the generation that names billing, held by other",
				i, o.generation, o.message)
		}
		if o, ok := snap[string(conditions.Ready)]; ok && o.status == metav1.ConditionTrue && o.generation >= gen {
			t.Errorf("observation %d: Ready=True at generation %d (%q)", i, o.generation, o.message)
		}
	}
}
