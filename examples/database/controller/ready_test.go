package controller_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/examples/database/api/v1alpha1"
	"github.com/ocf-claim/claim/examples/database/controller"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// When the example says Ready (and Claimed): only for a generation whose
// key the claim judged and granted; while the claim is an error, Ready is
// not True.

// specSwapper changes a Database's spec on the API server at the moment the
// inner reconciler reads it (a Get whose context carries the middleware's
// State), and waits until the manager's cache has seen the change: the
// inner pass then reads a generation newer than the one the middleware
// computed the keys, the grants and the claim condition for. This is an
// ordinary race of a cached read (a user edits the spec while a pass runs);
// the test only pins its timing.
type specSwapper struct {
	armed  atomic.Bool
	writer atomic.Pointer[client.Client] // uncached, set once the manager runs
	name   string
	patch  []byte
	newGen atomic.Int64
	err    atomic.Pointer[error]
	// done is closed when swap has returned: disarming happens before the
	// swap's patch, so the test must not read newGen or err before this.
	done chan struct{}
}

func (s *specSwapper) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			_, inner := claimmw.StateFrom(ctx)
			if _, isDB := obj.(*v1alpha1.Database); isDB && inner && key.Name == s.name && s.armed.CompareAndSwap(true, false) {
				s.swap(ctx, c, key)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}
}

func (s *specSwapper) swap(ctx context.Context, cached client.Reader, key client.ObjectKey) {
	defer close(s.done)
	w := *s.writer.Load()
	db := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	if err := w.Patch(ctx, db, client.RawPatch(types.MergePatchType, s.patch)); err != nil {
		s.err.Store(&err)
		return
	}
	s.newGen.Store(db.Generation)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		seen := &v1alpha1.Database{}
		if err := cached.Get(ctx, key, seen); err == nil && seen.Generation >= db.Generation {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	err := fmt.Errorf("the cache never saw generation %d", db.Generation)
	s.err.Store(&err)
}

// TestReadyIsNeverTrueForAGenerationWhoseKeyTheClaimDidNotJudge:
// ObservedGeneration is the generation a condition was computed for (ocf's
// rule). The inner pass re-reads the owner from the cache, so it can see a
// newer spec than the middleware judged; the example never reports its
// components and Ready as True for that newer generation while acting on the
// grant of the older key.
func TestReadyIsNeverTrueForAGenerationWhoseKeyTheClaimDidNotJudge(t *testing.T) {
	const (
		urlOrders  = "postgres://pg.data.svc/orders"
		urlBilling = "postgres://pg.data.svc/billing"
	)
	s := &specSwapper{name: "db", done: make(chan struct{})}
	ns, c := startManager(t, intercepted(s.funcs()))
	s.writer.Store(&c)
	ctx := context.Background()

	// Given other holds the billing database
	for _, d := range []struct{ name, url string }{{"other", urlBilling}, {"db", urlOrders}} {
		createDatabase(t, c, ns, d.name, d.url, 0)
		waitForClaim(t, c, ns, d.name, conditions.ReasonClaimed)
		eventuallyReady(t, c, ns, d.name)
	}
	// And db holds orders and is Ready (both created above)
	watchCtx, stopWatching := context.WithCancel(ctx)
	histories := watchStatus(watchCtx, t, ns)

	// When a user switches db to the billing database (and schema version
	// 7) while a pass of db runs: after the middleware read db, before the
	// inner reconciler read it
	s.patch = fmt.Appendf(nil, `{"spec":{"url":%q,"schemaVersion":7}}`, urlBilling)
	s.armed.Store(true)
	kick := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"test/kick":"1"}}}`))
	if err := c.Patch(ctx, &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}}, kick); err != nil {
		t.Fatal(err)
	}
	// Then, once db settled, it is parked behind other
	envtest.EventuallyEvery(t, 20*time.Second, 20*time.Millisecond, func() (bool, string) {
		return !s.armed.Load(), "no inner pass of db read it after the kick"
	})
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the spec swap never finished")
	}
	if p := s.err.Load(); p != nil {
		t.Fatal(*p)
	}
	gen := s.newGen.Load()
	waitForClaim(t, c, ns, "db", conditions.ReasonParked)
	waitForGeneration(t, c, ns, "db", "")
	stopWatching()
	h := (<-histories)["db"]

	// And no version of db ever said it was Ready, or that its schema or
	// connection was in place, for generation gen: the generation that names
	// the billing database, which other holds and db never did
	for i, snap := range h {
		for _, ct := range []conditions.Type{conditions.Ready, controller.SchemaReady, controller.ConnectionReady} {
			o, ok := snap[string(ct)]
			if ok && o.status == metav1.ConditionTrue && o.generation >= gen {
				t.Errorf("observation %d: %s=True at generation %d (%q), while the claim of that generation was %v: "+
					"the inner pass reported a spec the middleware never judged, acting on the older key's grant",
					i, ct, o.generation, o.message, snap[string(conditions.Claimed)])
			}
		}
	}
}

// TestClaimedIsNeverTrueForAGenerationWhoseKeyIsHeldElsewhere:
// ObservedGeneration is the generation a condition was computed for, in the
// middleware itself too. The first pass of a new object adds the finalizer,
// and when that patch conflicts the finalizer re-reads the object into the
// pass's own object; the pass goes on with the keys it computed from the
// first read, and the claim condition it writes speaks of that generation,
// never Claimed=True for a generation that names a key another object holds
// (two Databases would both say, for their current generation, that they hold
// one database).
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
	funcs := interceptor.Funcs{
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
	}
	ns, c := startManager(t, intercepted(funcs))
	writer.Store(&c)
	ctx := context.Background()

	// Given other holds billing
	createDatabase(t, c, ns, "other", urlBilling, 0)
	waitForClaim(t, c, ns, "other", conditions.ReasonClaimed)
	watchCtx, stopWatching := context.WithCancel(ctx)
	histories := watchStatus(watchCtx, t, ns)

	// When db is created naming orders, and switched to billing while the
	// middleware adds its finalizer in db's first pass
	armed.Store(true)
	createDatabase(t, c, ns, "db", urlOrders, 0)
	envtest.EventuallyEvery(t, 15*time.Second, 20*time.Millisecond, func() (bool, string) {
		return !armed.Load(), "the middleware never patched db"
	})
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
	claimed := condition(got, conditions.Claimed)
	ready := condition(got, conditions.Ready)
	t.Logf("generation %d: Claimed=%s/%s@%d %q; Ready=%s/%s@%d", got.Generation,
		claimed.Status, claimed.Reason, claimed.ObservedGeneration, claimed.Message, ready.Status, ready.Reason, ready.ObservedGeneration)
	if claimed.Status != metav1.ConditionTrue && ready.Status == metav1.ConditionTrue {
		t.Errorf("Ready=True (%s, generation %d) while Claimed=%s (%s, generation %d): Ready is not the unanimous fold of the claim",
			ready.Reason, ready.ObservedGeneration, claimed.Status, claimed.Reason, claimed.ObservedGeneration)
	}
}
