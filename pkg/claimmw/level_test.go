package claimmw_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
	"github.com/ocf-claim/claim/pkg/finalizer"
)

// lossWithin is how soon a holder must notice that its record is gone or
// names someone else.
const lossWithin = 2 * time.Second

func (f *fixture) setKeys(t *testing.T, name string, keys ...string) {
	t.Helper()
	eventually(t, 5*time.Second, func() (bool, string) {
		w, err := f.widget(t, name)
		if err != nil {
			return false, err.Error()
		}
		w.Spec.Keys = keys
		err = direct(t).Update(context.Background(), w)
		return err == nil, fmt.Sprintf("updating the keys of %s: %v", name, err)
	})
}

func (f *fixture) deleteLease(t *testing.T, key string) {
	t.Helper()
	l := &coordinationv1.Lease{}
	name := f.mw.Claimer().Config().NameFunc(key)
	if err := env.APIReader.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, l); err != nil {
		t.Fatal(err)
	}
	if err := direct(t).Delete(context.Background(), l); err != nil {
		t.Fatal(err)
	}
}

func TestAHolderWhoseRecordIsDeletedFromOutsideStopsClaimingWithinTwoSeconds(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WhileParked(claimmw.RunInnerWhileParked)}})
	// Given alpha holds k and bravo is parked on it
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	// When a person deletes k's Lease (kubectl claims release, a GitOps prune)
	deleted := time.Now()
	f.deleteLease(t, "k")
	// Then within two seconds exactly one of them holds k, and the other's
	// condition says it does not: never two Claimed=True for one key
	var holder, other string
	eventually(t, lossWithin, func() (bool, string) {
		rec, err := f.mw.Claimer().Current(context.Background(), "k")
		if err != nil || !rec.Exists {
			return false, fmt.Sprintf("record of k: exists %t, %v", rec.Exists, err)
		}
		holder, other = rec.Holder.Name, "alpha"
		if holder == "alpha" {
			other = "bravo"
		}
		hc, oc := f.claimed(t, holder), f.claimed(t, other)
		return hc.Status == "True" && oc.Status == "False",
			fmt.Sprintf("record names %s; %s: %s/%s, %s: %s/%s", holder, holder, hc.Status, hc.Reason, other, oc.Status, oc.Reason)
	})
	t.Logf("%s holds k, %s parked, %s after the deletion", holder, other, time.Since(deleted).Round(time.Millisecond))
	// And the inner reconciler of the loser last ran parked
	calls := f.inner.callsOf(other)
	if len(calls) == 0 || calls[len(calls)-1].state.Granted {
		t.Errorf("last inner call of %s: %+v, want a parked pass", other, calls[len(calls)-1:])
	}
}

func TestAHolderThatLosesItsKeyIsToldByAnEventAndItsInnerPassRunsParked(t *testing.T) {
	f := start(t, setup{})
	// Given alpha holds k (skip mode: its inner runs only when it must)
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k")
	before := len(f.inner.callsOf("alpha"))
	// When another replica judging alpha expired takes k over for the
	// parked object other (a takeover
	// fenced on the Lease's version, as expiry.Liveness would allow)
	f.createAndWait(t, "other", conditions.ReasonParked, "k")
	f.takeOverFor(t, "k", "other")
	// Then alpha is Parked within two seconds, naming other, which is Claimed
	cond := f.waitForReason(t, "alpha", conditions.ReasonParked, lossWithin)
	mustContain(t, "alpha's message", cond.Message, "other")
	f.waitForReason(t, "other", conditions.ReasonClaimed, lossWithin)
	// And its inner reconciler ran once more, parked, to stop acting
	eventually(t, lossWithin, func() (bool, string) {
		calls := f.inner.callsOf("alpha")
		if len(calls) <= before {
			return false, "no inner pass of alpha after the loss"
		}
		last := calls[len(calls)-1]
		return !last.state.Granted && len(last.state.Grants) == 0, fmt.Sprintf("last inner pass of alpha: %+v", last.state)
	})
}

// xAndYHold creates Widgets x naming xKey and y naming yKey, both at once,
// and waits until both hold their key.
func (f *fixture) xAndYHold(t *testing.T, xKey, yKey string) {
	t.Helper()
	f.createWidget(t, "x", xKey)
	f.createWidget(t, "y", yKey)
	f.waitForReason(t, "x", conditions.ReasonClaimed, 10*time.Second)
	f.waitForReason(t, "y", conditions.ReasonClaimed, 10*time.Second)
}

func TestSwappingKeysBetweenTwoHoldersConverges(t *testing.T) {
	f := start(t, setup{})
	// Given x holds A and y holds B
	f.xAndYHold(t, "A", "B")
	// When x is edited to name B and y to name A
	f.setKeys(t, "x", "B")
	f.setKeys(t, "y", "A")
	// Then both end up Claimed on their new keys, without any requeue (the
	// fixture's requeues are an hour)
	for name, key := range map[string]string{"x": "B", "y": "A"} {
		eventually(t, 10*time.Second, func() (bool, string) {
			c := f.claimed(t, name)
			return c.Reason == string(conditions.ReasonClaimed) && strings.Contains(c.Message, `"`+key+`"`),
				fmt.Sprintf("%s: %s %s", name, c.Reason, c.Message)
		})
	}
}

func TestGrowingTheKeySetWhileAnotherHoldsTheNewSmallerKeyGivesTheLargerOneUp(t *testing.T) {
	f := start(t, setup{})
	// Given x holds B and y holds A
	f.xAndYHold(t, "B", "A")
	// When both are edited to name A and B (x would hold B and wait for A,
	// y hold A and wait for B: a deadlock with sorted acquisition alone)
	f.setKeys(t, "x", "A", "B")
	f.setKeys(t, "y", "A", "B")
	// Then one of them holds both keys, and the other waits holding none,
	// each condition computed for the object's latest spec
	eventually(t, 10*time.Second, func() (bool, string) {
		x, errx := f.widget(t, "x")
		y, erry := f.widget(t, "y")
		if errx != nil || erry != nil {
			return false, fmt.Sprintf("reading widgets: %v %v", errx, erry)
		}
		cx, cy := f.claimed(t, "x"), f.claimed(t, "y")
		current := cx.ObservedGeneration == x.Generation && cy.ObservedGeneration == y.Generation
		return current && (cx.Status == "True") != (cy.Status == "True"),
			fmt.Sprintf("x (gen %d): %s %s; y (gen %d): %s %s", x.Generation, cx.Reason, cx.Message, y.Generation, cy.Reason, cy.Message)
	})
	holder := "x"
	if f.claimed(t, "y").Status == "True" {
		holder = "y"
	}
	for _, k := range []string{"A", "B"} {
		rec, err := f.mw.Claimer().Current(context.Background(), k)
		if err != nil || rec.Holder.Name != holder {
			t.Errorf("record of %s names %s (%v), want %s", k, rec.Holder.Name, err, holder)
		}
	}
}

func TestAKeyAcquiredInAPassThatFailedIsReleasedOnceNoLongerNamed(t *testing.T) {
	f := start(t, setup{})
	// Given x holds A, with a successful pass
	f.createAndWait(t, "x", conditions.ReasonClaimed, "A")
	// And x then names A and B, but its inner passes fail
	f.inner.setFail(func(name string, c call) error {
		if name == "x" && len(c.state.Grants) == 2 {
			return errors.New("injected: inner pass failed")
		}
		return nil
	})
	f.setKeys(t, "x", "A", "B")
	eventually(t, 10*time.Second, func() (bool, string) { return f.leaseExists(t, "B"), "Lease of B missing" })
	// When x goes back to naming only A (the set its last successful pass kept)
	f.setKeys(t, "x", "A")
	// Then B's Lease is released, and y, which names B, gets it
	eventually(t, 10*time.Second, func() (bool, string) { return !f.leaseExists(t, "B"), "Lease of B still held" })
	f.createAndWait(t, "y", conditions.ReasonClaimed, "B")
}

func TestANonIdempotentNormalizerIsAppliedOnce(t *testing.T) {
	tenant := func(k string) (string, error) { return "tenant-a/" + k, nil }
	f := start(t, setup{claimCfg: &claim.Config{Normalize: tenant}})
	// Given a key normalizer that prefixes a tenant
	f.createWidget(t, "x", "orders")
	// Then x holds tenant-a/orders, recorded under that key only
	cond := f.waitForReason(t, "x", conditions.ReasonClaimed, 10*time.Second)
	mustContain(t, "x's message", cond.Message, `"tenant-a/orders"`)
	if !f.leaseExists(t, "tenant-a/orders") {
		t.Error("no Lease for tenant-a/orders")
	}
	if f.leaseExists(t, "tenant-a/tenant-a/orders") {
		t.Error("a Lease for tenant-a/tenant-a/orders: the key normalizer was applied twice")
	}
}

func TestManyLongKeysStillGiveAConditionTheServerAccepts(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithMaxKeys(40)}})
	// Given an object naming 40 keys of 1,000 bytes (40 KB of keys, more
	// than a condition message may hold)
	keys := make([]string, 40)
	for i := range keys {
		keys[i] = fmt.Sprintf("%03d-%s", i, strings.Repeat("k", 996))
	}
	f.createWidget(t, "x", keys...)
	// Then it is Claimed, with a bounded message that counts what it left out
	cond := f.waitForReason(t, "x", conditions.ReasonClaimed, 20*time.Second)
	if len(cond.Message) > conditions.MaxMessageLength {
		t.Errorf("message is %d bytes, want at most %d", len(cond.Message), conditions.MaxMessageLength)
	}
	mustContain(t, "x's message", cond.Message, "and 35 more")
}

func TestAnObjectNamingTooManyKeysIsInvalidAndWritesNoRecord(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithMaxKeys(3)}})
	// Given a limit of 3 keys, when an object names 4
	f.createWidget(t, "x", "a", "b", "c", "d")
	// Then it is InvalidKey, saying why, and no record exists for any key
	cond := f.waitForReason(t, "x", conditions.ReasonInvalidKey, 10*time.Second)
	mustContain(t, "x's message", cond.Message, "names 4 keys, at most 3")
	for _, k := range []string{"a", "b", "c", "d"} {
		if f.leaseExists(t, k) {
			t.Errorf("a Lease exists for %q", k)
		}
	}
	// When it names 3, then it holds them
	f.setKeys(t, "x", "a", "b", "c")
	f.waitForReason(t, "x", conditions.ReasonClaimed, 10*time.Second)
}

func TestTheDeletionPathTellsTheInnerReconcilerWhichKeysTheObjectStillHolds(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WhileParked(claimmw.RunInnerWhileParked)}})
	ctx := context.Background()
	// Given alpha holds k and bravo is parked on it
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	var fencedErr error
	f.inner.setHook(func(ctx context.Context, name string, c call) (reconcile.Result, error) {
		if name == "alpha" && c.state.Deleting && len(c.state.Grants) > 0 {
			_, fencedErr = claimmw.FencedClient(ctx)
		}
		return reconcile.Result{}, nil
	})
	token := f.tokenOf(t, "k")
	// When the parked bravo is deleted
	f.deleteWidget(t, "bravo")
	// Then its inner deletion pass sees Deleting and no grant: it must not
	// clean up k, which alpha holds
	last := f.lastCall(t, "bravo", func(c call) bool { return c.state.Deleting })
	if len(last.state.Grants) != 0 || last.state.Granted {
		t.Errorf("bravo's deletion pass: %+v, want Deleting without grants", last.state)
	}
	// When the holder alpha is deleted
	f.deleteWidget(t, "alpha")
	// Then its (first) deletion pass holds k with its token, and can build a
	// fenced client; a later pass, after the release, rightly holds none
	last = f.firstCall(t, "alpha", func(c call) bool { return c.state.Deleting })
	if len(last.state.Grants) != 1 || last.state.Grants[0].Key != "k" || last.state.Grants[0].Token != token {
		t.Errorf("alpha's deletion pass grants %+v, want k with token %s", last.state.Grants, token)
	}
	if fencedErr != nil {
		t.Errorf("FencedClient on the deletion path: %v", fencedErr)
	}
	eventually(t, wakeWithin, func() (bool, string) { return !f.leaseExists(t, "k"), "k still held after alpha's deletion" })
	_ = ctx
}

func (f *fixture) tokenOf(t *testing.T, key string) claim.Token {
	t.Helper()
	rec, err := f.mw.Claimer().Current(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return rec.Token
}

// deleteWidgetAsync asks to delete the Widget named name and returns: its
// finalizers may keep it.
// deleteWidgetAsync deletes Widget name, as read just before, and returns
// what it read; deleteWidget waits until the Widget is gone too.
func (f *fixture) deleteWidgetAsync(t *testing.T, name string) *testcrd.Widget {
	t.Helper()
	w, err := f.widget(t, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := direct(t).Delete(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	return w
}

func (f *fixture) deleteWidget(t *testing.T, name string) {
	t.Helper()
	f.deleteWidgetAsync(t, name)
	eventually(t, wakeWithin, func() (bool, string) {
		_, err := f.widget(t, name)
		return apierrors.IsNotFound(err), fmt.Sprintf("%s after deletion: %v", name, err)
	})
}

// firstCall returns the first inner call of name that matches.
func (f *fixture) firstCall(t *testing.T, name string, match func(call) bool) call {
	t.Helper()
	for _, c := range f.inner.callsOf(name) {
		if match(c) {
			return c
		}
	}
	t.Fatalf("no matching inner call of %s", name)
	return call{}
}

// lastCall returns the last inner call of name that matches.
func (f *fixture) lastCall(t *testing.T, name string, match func(call) bool) call {
	t.Helper()
	calls := f.inner.callsOf(name)
	for i := len(calls) - 1; i >= 0; i-- {
		if match(calls[i]) {
			return calls[i]
		}
	}
	t.Fatalf("no matching inner call of %s among %d", name, len(calls))
	return call{}
}

// TestTwoMiddlewaresOnOneKindNeverReleaseEachOthersRecords runs two
// middlewares for Widgets in one manager and one namespace, with the same
// record name prefix: a "storage" claim on spec.keys and a "realm" claim on
// the same keys with a prefix.
func TestTwoMiddlewaresOnOneKindNeverReleaseEachOthersRecords(t *testing.T) {
	ns := env.Namespace(t)
	mgr := newManager(t, ns, nil)
	mws := map[string]*claimmw.Middleware{}
	for _, name := range []string{"storage", "realm"} {
		keys := func(_ context.Context, obj client.Object) ([]string, error) {
			var out []string
			for _, k := range obj.(*testcrd.Widget).Spec.Keys {
				out = append(out, name+"-"+k)
			}
			return out, nil
		}
		mw, err := claimmw.Wrap(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			return reconcile.Result{}, nil
		}),
			claimmw.FromManager(mgr),
			claimmw.For(&testcrd.Widget{}),
			claimmw.WithName(name),
			claimmw.WithConditionType(conditions.Type(strings.ToUpper(name[:1])+name[1:]+"Claimed")),
			claimmw.WithFinalizer(finalizer.Name(backends.Domain+"/release-"+name)),
			claimmw.WithClaim(claim.Config{Namespace: ns}, claim.WithBackend(lease.Backend)),
			claimmw.WithKeys(keys),
			claimmw.WithRequeue(time.Hour, time.Hour),
		)
		if err != nil {
			t.Fatal(err)
		}
		if err := mw.SetupWithManager(mgr, ctrl.NewControllerManagedBy(mgr).Named(name).For(&testcrd.Widget{})); err != nil {
			t.Fatal(err)
		}
		mws[name] = mw
	}
	// Given a third middleware with a name already taken, its setup fails
	dup, err := claimmw.Wrap(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }),
		claimmw.FromManager(mgr), claimmw.For(&testcrd.Widget{}), claimmw.WithName("storage"),
		claimmw.WithClaim(claim.Config{Namespace: ns}, claim.WithBackend(lease.Backend)),
		claimmw.WithKeys(specKeys))
	if err != nil {
		t.Fatal(err)
	}
	if err := dup.SetupWithManager(mgr, ctrl.NewControllerManagedBy(mgr).Named("dup").For(&testcrd.Widget{})); err == nil {
		t.Error("a second middleware named storage for Widgets was set up; want an error naming the clash")
	}
	envtest.RunManager(t, mgr)
	// When a Widget names key k, so it holds storage-k and realm-k
	w := &testcrd.Widget{}
	w.Namespace, w.Name, w.Spec.Keys = ns, "w", []string{"k"}
	if err := direct(t).Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	uids := map[string]types.UID{}
	eventually(t, 10*time.Second, func() (bool, string) {
		got := &testcrd.Widget{}
		if err := env.APIReader.Get(context.Background(), client.ObjectKeyFromObject(w), got); err != nil {
			return false, err.Error()
		}
		for _, ct := range []string{"StorageClaimed", "RealmClaimed"} {
			if !meta.IsStatusConditionTrue(got.Status.Conditions, ct) {
				return false, fmt.Sprintf("%s not True: %+v", ct, got.Status.Conditions)
			}
		}
		for _, name := range []string{"storage", "realm"} {
			l := &coordinationv1.Lease{}
			key := client.ObjectKey{Namespace: ns, Name: mws[name].Claimer().Config().NameFunc(name + "-k")}
			if err := env.APIReader.Get(context.Background(), key, l); err != nil {
				return false, fmt.Sprintf("Lease of %s-k: %v", name, err)
			}
			uids[name] = l.UID
		}
		return true, ""
	})
	// Then for a while both Leases stay the same objects: neither
	// middleware's sweep released the other's record
	time.Sleep(2 * time.Second)
	for _, name := range []string{"storage", "realm"} {
		l := &coordinationv1.Lease{}
		key := client.ObjectKey{Namespace: ns, Name: mws[name].Claimer().Config().NameFunc(name + "-k")}
		if err := env.APIReader.Get(context.Background(), key, l); err != nil {
			t.Fatalf("Lease of %s-k: %v", name, err)
		}
		if l.UID != uids[name] {
			t.Errorf("Lease of %s-k was deleted and re-created (uid %s -> %s)", name, uids[name], l.UID)
		}
	}
}

func TestFairnessNeverLetsAFreeKeyWaitForAnOlderObjectParkedElsewhere(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithFairness()}})
	// Given z holds A, and the older y names A and B, so it is parked on A
	f.createAndWait(t, "z", conditions.ReasonClaimed, "A")
	f.createAndWait(t, "y", conditions.ReasonParked, "A", "B")
	time.Sleep(1100 * time.Millisecond) // creation timestamps have seconds
	// When the younger x names only B, which is free
	f.createWidget(t, "x", "B")
	// Then x takes B: y, parked on A, could not take B now, so it is no
	// sibling x must yield to
	cond := f.waitForReason(t, "x", conditions.ReasonClaimed, 10*time.Second)
	mustContain(t, "x's message", cond.Message, `"B"`)
}
