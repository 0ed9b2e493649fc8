package databaseclaim_test

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/examples/ports/databaseclaim"
	"github.com/ocf-claim/claim/examples/ports/internal/portapi"
	"github.com/ocf-claim/claim/examples/ports/internal/porttest"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

var env *envtest.Env

func TestMain(m *testing.M) { porttest.Main(m, &env, portapi.DatabaseCRD()) }

// fixture is one operator: its namespace, an application namespace, a
// cache with the key index, and the ported middleware.
type fixture struct {
	opNS, appNS string
	client      client.Client
	cache       cache.Cache
	mw          *claimmw.Middleware
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ca, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := databaseclaim.IndexKey(ctx, ca); err != nil {
		t.Fatal(err)
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	c := env.TestClient(t)
	f := &fixture{opNS: env.Namespace(t), appNS: env.Namespace(t), client: c, cache: ca}
	opts := append(databaseclaim.Options(f.opNS, ca, env.APIReader),
		claimmw.WithClient(c), claimmw.WithAPIReader(env.APIReader), claimmw.WithMetrics(false))
	if f.mw, err = claimmw.Wrap(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), opts...); err != nil {
		t.Fatal(err)
	}
	return f
}

// system is a PostgreSQL system identifier unique to the fixture, so that
// the cluster-wide key index never mixes tests.
func (f *fixture) system() string { return "sys-" + f.appNS }

func (f *fixture) database(t *testing.T, name, database string) *portapi.Database {
	t.Helper()
	db := &portapi.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.appNS, Name: name},
		Spec:       portapi.DatabaseSpec{SystemIdentifier: f.system(), Name: database},
	}
	if err := f.client.Create(context.Background(), db); err != nil {
		t.Fatalf("creating Database %s: %v", name, err)
	}
	return db
}

// reconcile runs one pass for db and returns the result and the claim
// condition as the API server has it.
func (f *fixture) reconcile(t *testing.T, db *portapi.Database) (reconcile.Result, metav1.Condition) {
	t.Helper()
	res := porttest.Pass(t, f.mw, db)
	cond, exists := porttest.ClaimCondition(t, env.APIReader, db)
	if !exists {
		// The pass of a deleted Database that removes its finalizer removes
		// it: there is no condition left to read.
		return res, metav1.Condition{}
	}
	if cond == nil {
		t.Fatalf("%s has no claim condition", db.Name)
	}
	return res, *cond
}

// rename points db at another database name, on its newest version.
func (f *fixture) rename(t *testing.T, db *portapi.Database, database string) {
	t.Helper()
	if err := env.APIReader.Get(context.Background(), client.ObjectKeyFromObject(db), db); err != nil {
		t.Fatal(err)
	}
	db.Spec.Name = database
	if err := f.client.Update(context.Background(), db); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) lease(t *testing.T, key string) (*coordinationv1.Lease, bool) {
	t.Helper()
	return porttest.Lease(t, env.APIReader, f.opNS, databaseclaim.LeasePrefix, key)
}

// legacyLease writes a Lease the way the hand-written claim did: its prefix,
// its annotations, a label by holder name, no kind, a display identity.
func (f *fixture) legacyLease(t *testing.T, key string, holder *portapi.Database) *coordinationv1.Lease {
	t.Helper()
	return porttest.CreateLegacyLease(t, env.Client, porttest.LegacyLease{
		Namespace: f.opNS, Prefix: databaseclaim.LeasePrefix, Key: key, Identity: holder.Namespace + "/" + holder.Name,
		Labels: map[string]string{databaseclaim.HolderNameLabel: holder.Name},
		Annotations: map[string]string{
			databaseclaim.KeyAnnotation:             key,
			databaseclaim.HolderNamespaceAnnotation: holder.Namespace,
			databaseclaim.HolderNameAnnotation:      holder.Name,
			databaseclaim.HolderUIDAnnotation:       string(holder.UID),
		},
	})
}

// waitCached waits until the cache's key index lists n Databases for key.
func (f *fixture) waitCached(t *testing.T, key string, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var list portapi.DatabaseList
		if err := f.cache.List(ctx, &list, client.MatchingFields{databaseclaim.KeyIndex: key}); err != nil {
			return false, err
		}
		return len(list.Items) == n, nil
	})
	if err != nil {
		t.Fatalf("cache never listed %d Databases for %q: %v", n, key, err)
	}
}

// nextSecond waits until the wall clock enters a new second, so that the
// next object gets a later creationTimestamp (second granularity).
func nextSecond() {
	now := time.Now()
	time.Sleep(now.Truncate(time.Second).Add(time.Second + 50*time.Millisecond).Sub(now))
}

func TestTheOlderDatabaseGoesFirstWhileTheKeyIsFree(t *testing.T) {
	f := newFixture(t)
	// Given an older Database and a younger one, named so that the name
	// tie-break alone would pick the younger
	older := f.database(t, "z-older", "orders")
	nextSecond()
	younger := f.database(t, "a-younger", "orders")
	key := f.system() + "/orders"
	f.waitCached(t, key, 2)

	// When the younger reconciles first
	res, cond := f.reconcile(t, younger)
	// Then it yields to the older one, creates no Lease, and asks again in 60 s
	porttest.WantCondition(t, "younger", cond, conditions.ReasonNotFirst, "z-older", `"orders"`)
	if _, ok := f.lease(t, key); ok {
		t.Fatal("the younger Database created the Lease")
	}
	if res.RequeueAfter != databaseclaim.Requeue {
		t.Fatalf("requeue %s, want %s", res.RequeueAfter, databaseclaim.Requeue)
	}
	// And the older one takes the key, under the kept finalizer
	_, cond = f.reconcile(t, older)
	porttest.WantCondition(t, "older", cond, conditions.ReasonClaimed)
	var got portapi.Database
	if err := env.APIReader.Get(context.Background(), client.ObjectKeyFromObject(older), &got); err != nil {
		t.Fatal(err)
	}
	if !controllerutil.ContainsFinalizer(&got, databaseclaim.Finalizer) {
		t.Fatalf("finalizers %v, want %s", got.Finalizers, databaseclaim.Finalizer)
	}
}

func TestTheLoserNamesTheLeaseHolderNotTheOldestClaimant(t *testing.T) {
	f := newFixture(t)
	// Given the oldest Database wanting another database at first
	oldest := f.database(t, "oldest", "other")
	nextSecond()
	holder := f.database(t, "holder", "orders")
	loser := f.database(t, "loser", "orders")
	key := f.system() + "/orders"
	f.waitCached(t, key, 2)
	// And a younger Database that took the free key meanwhile
	_, cond := f.reconcile(t, holder)
	porttest.WantCondition(t, "holder", cond, conditions.ReasonClaimed)

	// When the oldest switches to the same database
	f.rename(t, oldest, "orders")
	f.waitCached(t, key, 3)

	// Then the Lease decides, not age: both losers name the Lease holder
	for _, db := range []*portapi.Database{loser, oldest} {
		_, cond := f.reconcile(t, db)
		porttest.WantCondition(t, db.Name, cond, conditions.ReasonParked, f.appNS+"/holder")
		if strings.Contains(cond.Message, "oldest") {
			t.Fatalf("%s: message %q names the oldest claimant", db.Name, cond.Message)
		}
	}
}

func TestALegacyLeaseIsHeldByItsHolderAfterThePort(t *testing.T) {
	f := newFixture(t)
	// Given a Database holding its key through a Lease the hand-written claim wrote
	a := f.database(t, "a", "orders")
	b := f.database(t, "b", "orders")
	key := f.system() + "/orders"
	legacy := f.legacyLease(t, key, a)

	// When the ported operator reconciles both
	_, condA := f.reconcile(t, a)
	_, condB := f.reconcile(t, b)

	// Then the holder re-enters without a write and the other is parked
	// naming it: no double grant across the upgrade
	porttest.WantCondition(t, "a", condA, conditions.ReasonClaimed)
	porttest.WantCondition(t, "b", condB, conditions.ReasonParked, f.appNS+"/a")
	if l, _ := f.lease(t, key); l.ResourceVersion != legacy.ResourceVersion {
		t.Fatal("the legacy Lease was written on re-entry")
	}

	// And deleting the holder releases the legacy Lease, found by its
	// legacy label, after which the other takes the key
	if err := f.client.Delete(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t, a)
	if _, ok := f.lease(t, key); ok {
		t.Fatal("the legacy Lease survived its holder's finalizer")
	}
	_, condB = f.reconcile(t, b)
	porttest.WantCondition(t, "b", condB, conditions.ReasonClaimed)
}

func TestALegacyLeaseOfAVanishedDatabaseIsTakenOver(t *testing.T) {
	f := newFixture(t)
	// Given a legacy Lease (no kind recorded) whose Database was deleted
	// while the old release was down
	gone := f.database(t, "gone", "orders")
	key := f.system() + "/orders"
	f.legacyLease(t, key, gone)
	if err := f.client.Delete(context.Background(), gone); err != nil {
		t.Fatal(err)
	}
	// And a Database recreated under the same name: a new holder
	again := f.database(t, "gone", "orders")

	// When it reconciles
	_, cond := f.reconcile(t, again)

	// Then the liveness reads Databases although the record names no kind,
	// finds another UID, and the key is taken over
	porttest.WantCondition(t, "gone (recreated)", cond, conditions.ReasonClaimed)
	l, _ := f.lease(t, key)
	if got := l.Annotations[databaseclaim.HolderUIDAnnotation]; got != string(again.UID) {
		t.Fatalf("Lease holder UID %s, want the recreated Database's %s", got, again.UID)
	}
}

func TestTheSweepKeepsOnlyTheCurrentKey(t *testing.T) {
	f := newFixture(t)
	// Given a Database holding "orders"
	db := f.database(t, "db", "orders")
	_, cond := f.reconcile(t, db)
	porttest.WantCondition(t, "db", cond, conditions.ReasonClaimed)

	// When it is renamed to "invoices"
	f.rename(t, db, "invoices")
	_, cond = f.reconcile(t, db)

	// Then it holds "invoices" and the sweep released "orders"
	porttest.WantCondition(t, "db", cond, conditions.ReasonClaimed, "invoices")
	if _, ok := f.lease(t, f.system()+"/orders"); ok {
		t.Fatal("the Lease of the old key survived the sweep")
	}
	if _, ok := f.lease(t, f.system()+"/invoices"); !ok {
		t.Fatal("the Lease of the kept key is gone")
	}

	// And deleting it releases the kept key too and lets it go
	if err := f.client.Delete(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	// (The deletion path releases the keys it holds in one pass and sweeps
	// and removes its finalizer in the next, which it asks for.)
	for range 3 {
		if res, _ := f.reconcile(t, db); res.RequeueAfter == 0 {
			break
		}
	}
	if _, ok := f.lease(t, f.system()+"/invoices"); ok {
		t.Fatal("the Lease survived the deletion")
	}
	if err := env.APIReader.Get(context.Background(), client.ObjectKeyFromObject(db), &portapi.Database{}); !apierrors.IsNotFound(err) {
		t.Fatalf("Database after its finalizer ran: %v, want NotFound", err)
	}
}

func TestAKeyWithoutSystemIdentifierIsInvalid(t *testing.T) {
	f := newFixture(t)
	db := &portapi.Database{ObjectMeta: metav1.ObjectMeta{Namespace: f.appNS, Name: "no-system"}, Spec: portapi.DatabaseSpec{Name: "orders"}}
	if err := f.client.Create(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	_, cond := f.reconcile(t, db)
	porttest.WantCondition(t, "no-system", cond, conditions.ReasonInvalidKey, "systemIdentifier")
}
