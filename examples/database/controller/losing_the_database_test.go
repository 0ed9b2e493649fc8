package controller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ocf-claim/claim/examples/database/api/v1alpha1"
	"github.com/ocf-claim/claim/examples/database/controller"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
	"github.com/ocf-claim/claim/pkg/fence"
)

// Losing the database: a Database whose key is taken over, or that gives
// its database up, stops its components (no apply, no migration, no
// connection) in the pass that is told so.

// applyCounter counts the server-side applies the manager's client sends,
// per object name, and the schema record's per Database that sent it
// ([migratedBy]): every apply of a component, fenced or not, goes through
// it.
type applyCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (a *applyCounter) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if patch.Type() == types.ApplyPatchType {
				name := obj.GetName()
				if cm, ok := obj.(*corev1.ConfigMap); ok && cm.Data[controller.SchemaMigratedBy] != "" {
					name = migratedBy(name, cm.Data[controller.SchemaMigratedBy])
				}
				a.mu.Lock()
				a.n[name]++
				a.mu.Unlock()
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}
}

// migratedBy names, for the applyCounter, the applies of the schema record
// named record sent by the Database db (namespace/name).
func migratedBy(record, db string) string { return record + "@" + db }

func (a *applyCounter) of(names ...string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	sum := 0
	for _, n := range names {
		sum += a.n[n]
	}
	return sum
}

// stamp returns the fencing token ConfigMap ns/name carries for key, and its
// data.
func stamp(t *testing.T, c client.Client, ns, name, key string) (claim.Token, map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
		t.Fatalf("reading ConfigMap %s: %v", name, err)
	}
	return claim.Token(cm.Annotations[fence.AnnotationFor(key)]), cm.Data
}

// waitForComponent waits until condition t of Database ns/name has status
// and reason.
func waitForComponent(t *testing.T, c client.Client, ns, name string, ct conditions.Type, status metav1.ConditionStatus, reason conditions.Reason) {
	t.Helper()
	eventuallyDatabase(t, c, ns, name, 20*time.Second, 50*time.Millisecond, func(db *v1alpha1.Database) (bool, string) {
		cond := condition(db, ct)
		return cond != nil && cond.Status == status && cond.Reason == string(reason) && cond.ObservedGeneration == db.Generation,
			fmt.Sprintf("Database %s/%s: %s = %+v, want %s/%s", ns, name, ct, cond, status, reason)
	})
}

func newer(t *testing.T, a, b claim.Token) bool {
	t.Helper()
	c, err := a.Compare(b)
	if err != nil {
		t.Fatalf("comparing tokens %s and %s: %v", a, b, err)
	}
	return c > 0
}

// takerJudgingEveryHolderDead returns a claimer of the controller's claim
// set in ns that judges every holder dead: a contender behind a partition or
// a lagging liveness.
func takerJudgingEveryHolderDead(t *testing.T, c client.Client, ns string) *claim.Claimer {
	t.Helper()
	claimCfg := controller.ClaimConfig(ns)
	claimCfg.Set = controller.Name
	taker, err := claim.New(env.APIReader, c, claimCfg,
		claim.WithLiveness(claim.LivenessFunc(func(context.Context, claim.Record) (bool, error) { return false, nil })))
	if err != nil {
		t.Fatal(err)
	}
	return taker
}

// TestAComponentStopsApplyingInThePassThatTellsItsDatabaseIsLost runs the
// ocf-shaped controller through a grant, a loss, and a grant again, with
// every resource written by fenced server-side apply: in the pass that
// tells the former holder it lost its database, its components apply
// nothing (an ocf Prerequisite, asked only until a component is first
// healthy, would let them go on), and the grant that follows applies again
// with a newer token.
func TestAComponentStopsApplyingInThePassThatTellsItsDatabaseIsLost(t *testing.T) {
	applies := &applyCounter{n: map[string]int{}}
	ns, c := startManager(t, intercepted(applies.funcs()))
	ctx := context.Background()
	const url = "postgres://pg.data.svc/orders"

	// Given orders holds the database and applied its schema, fenced
	key, record := ordersIsReady(t, c, ns, url)
	ordersSchema := migratedBy(record, ns+"/orders")
	granted, data := stamp(t, c, ns, record, key)
	if granted == "" || data["version"] != "1" {
		t.Fatalf("orders' schema record: token %q, data %v; want a stamp and version 1", granted, data)
	}
	// And billing waits for it
	billing := createDatabase(t, c, ns, "billing", url, 1)
	waitForClaim(t, c, ns, "billing", conditions.ReasonParked)
	time.Sleep(300 * time.Millisecond) // no pass of orders in flight
	before := applies.of(ordersSchema, "orders"+controller.ConnectionSuffix)

	// When billing takes the database over while orders still exists (a
	// contender that judged orders dead: a partition, a lagging liveness),
	// and orders' spec asks for a new schema version at once
	taker := takerJudgingEveryHolderDead(t, c, ns)
	if err := c.Get(ctx, client.ObjectKeyFromObject(billing), billing); err != nil {
		t.Fatal(err)
	}
	self, err := taker.HolderOf(billing)
	if err != nil {
		t.Fatal(err)
	}
	if _, o, err := taker.Acquire(ctx, key, self); err != nil || o.Reason != claim.ReasonTakenOver {
		t.Fatalf("taking the database over for billing: %+v, %v", o, err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"schemaVersion":2}}`))
	if err := c.Patch(ctx, &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"}}, patch); err != nil {
		t.Fatal(err)
	}

	// Then orders is told: Parked, each component closed by the gate
	waitForClaim(t, c, ns, "orders", conditions.ReasonParked)
	waitForComponent(t, c, ns, "orders", controller.SchemaReady, metav1.ConditionFalse, controller.ReasonPrerequisiteNotMet)
	waitForComponent(t, c, ns, "orders", controller.ConnectionReady, metav1.ConditionFalse, controller.ReasonPrerequisiteNotMet)
	waitForComponent(t, c, ns, "orders", conditions.Ready, metav1.ConditionFalse, controller.ReasonPrerequisiteNotMet)
	// And billing holds it and applied its own records
	waitForClaim(t, c, ns, "billing", conditions.ReasonClaimed)
	eventuallyReady(t, c, ns, "billing")
	time.Sleep(300 * time.Millisecond) // every pass the loss caused has ended
	// And orders applied nothing since it lost the database: not version 2
	if got := applies.of(ordersSchema, "orders"+controller.ConnectionSuffix) - before; got != 0 {
		t.Errorf("orders applied %d times after it lost its database, want 0", got)
	}
	// (the record is the database's, shared with billing: billing's
	// migration to version 1 is the last one, never orders' to version 2)
	taken, data := stamp(t, c, ns, record, key)
	if data[controller.SchemaVersion] != "1" || data[controller.SchemaMigratedBy] != ns+"/billing" {
		t.Errorf("the schema record after the loss: token %s, data %v; want version 1 migrated by billing, never orders' version 2", taken, data)
	}
	// And its connection details are withdrawn
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders" + controller.ConnectionSuffix}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("orders' connection ConfigMap after the loss: %v, want NotFound", err)
	}
	if !newer(t, taken, granted) {
		t.Errorf("billing's token %s is not newer than orders' %s", taken, granted)
	}

	// When billing is deleted
	if err := c.Delete(ctx, billing); err != nil {
		t.Fatal(err)
	}
	// Then orders is granted again and applies version 2 with a newer token
	waitForClaim(t, c, ns, "orders", conditions.ReasonClaimed)
	eventuallyReady(t, c, ns, "orders")
	regranted, data := stamp(t, c, ns, record, key)
	if data["version"] != "2" || !newer(t, regranted, taken) {
		t.Errorf("orders' schema record after the grant: token %s, data %v; want version 2 and a token newer than %s", regranted, data, taken)
	}
	if applies.of(ordersSchema) == 0 {
		t.Error("no apply of orders' schema was counted")
	}
}

// hookedApplies runs a hook, once, when the manager's client is about to
// send the server-side apply of the named object: the pass that sends it
// was granted before the hook ran.
type hookedApplies struct {
	mu   sync.Mutex
	name string
	hook func()
}

func (h *hookedApplies) arm(name string, hook func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.name, h.hook = name, hook
}

func (h *hookedApplies) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			h.mu.Lock()
			var hook func()
			if patch.Type() == types.ApplyPatchType && obj.GetName() == h.name {
				hook, h.hook, h.name = h.hook, nil, ""
			}
			h.mu.Unlock()
			if hook != nil {
				hook()
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	}
}

// TestASchemaMigrationBegunBeforeATakeoverIsRefusedOnceTheNewHolderMigrated:
// reconcile.go applies the schema record, which "stands in for the database
// itself", through the fenced client so that "a Database that lost its
// database since this pass began is refused instead of migrating under a
// newer holder". Here orders' pass is granted, then billing takes the
// database over and migrates it (its pass applies its schema record, fenced
// with the newer token) before orders' apply is sent: orders' migration
// must be refused, its schema record left at version 1.
func TestASchemaMigrationBegunBeforeATakeoverIsRefusedOnceTheNewHolderMigrated(t *testing.T) {
	hooks := &hookedApplies{}
	ns, c := startManager(t, intercepted(hooks.funcs()))
	ctx := context.Background()
	const url = "postgres://pg.data.svc/orders"
	// Given orders holds the database and migrated it to version 1
	key, record := ordersIsReady(t, c, ns, url)
	granted, _ := stamp(t, c, ns, record, key)
	// And billing waits for it
	billing := createDatabase(t, c, ns, "billing", url, 1)
	waitForClaim(t, c, ns, "billing", conditions.ReasonParked)
	if err := c.Get(ctx, client.ObjectKeyFromObject(billing), billing); err != nil {
		t.Fatal(err)
	}

	// When, in orders' next granted pass, before its schema apply is sent,
	// billing takes the database over (a contender that judged orders
	// dead) and migrates it as billing's pass does
	taker := takerJudgingEveryHolderDead(t, c, ns)
	self, err := taker.HolderOf(billing)
	if err != nil {
		t.Fatal(err)
	}
	hookRan := make(chan claim.Token, 1)
	hooks.arm(record, func() {
		_, o, err := taker.Acquire(ctx, key, self)
		if err != nil || o.Reason != claim.ReasonTakenOver {
			t.Errorf("taking the database over for billing: %+v, %v", o, err)
			hookRan <- ""
			return
		}
		fenced, err := fence.New(c, env.APIReader, fence.Grant{Key: key, Token: o.Token})
		if err != nil {
			t.Errorf("billing's fenced client: %v", err)
		}
		cm := &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: record, Labels: map[string]string{controller.LabelManagedBy: controller.ManagedBy}},
			Data:       map[string]string{controller.SchemaDatabase: key, controller.SchemaVersion: "1", controller.SchemaMigratedBy: ns + "/billing"},
		}
		if err := fenced.Patch(ctx, cm, client.Apply, client.ForceOwnership, client.FieldOwner(controller.FieldOwner)); err != nil {
			t.Errorf("billing migrating the database: %v", err)
		}
		hookRan <- o.Token
	})
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"schemaVersion":2}}`))
	if err := c.Patch(ctx, &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"}}, patch); err != nil {
		t.Fatal(err)
	}
	var taken claim.Token
	select {
	case taken = <-hookRan:
	case <-time.After(20 * time.Second):
		t.Fatal("orders' pass never applied its schema record after the spec change")
	}
	if !newer(t, taken, granted) {
		t.Fatalf("billing's token %s is not newer than orders' %s", taken, granted)
	}

	// Then orders learns it lost the database
	waitForClaim(t, c, ns, "orders", conditions.ReasonParked)
	time.Sleep(300 * time.Millisecond) // the pass the loss caused has ended
	// And its migration to version 2 was refused: the database is billing's
	if tok, data := stamp(t, c, ns, record, key); data["version"] != "1" {
		t.Errorf("orders migrated the database to version %s with token %s after billing took it over with %s; want the stale migration refused (fence.ErrFenced)",
			data["version"], tok, taken)
	}
}

// TestAParkedDatabaseDoesNotKeepItsApplicationsOnADatabaseAnotherManages pins
// the example's promise (reconcile.go, convergeConnection): "an application
// of a parked Database must not connect to a database another Database
// manages". A Database that gives its database up (its spec now names one
// held elsewhere) is parked and its components stage PrerequisiteNotMet; the
// ConnectionReady component withdraws its ConfigMap rather than only ceasing
// to update it, so the applications that mount it do not keep the old
// database's URL after another Database took that database over.
func TestAParkedDatabaseDoesNotKeepItsApplicationsOnADatabaseAnotherManages(t *testing.T) {
	const (
		urlOrders  = "postgres://pg.data.svc/orders"
		urlBilling = "postgres://pg.data.svc/billing"
	)
	ns, c := startManager(t)
	ctx := context.Background()
	create := func(name, url string) {
		t.Helper()
		createDatabase(t, c, ns, name, url, 0)
	}
	// Given other manages billing, and db manages orders and has published
	// its connection details
	create("other", urlBilling)
	waitForClaim(t, c, ns, "other", conditions.ReasonClaimed)
	create("db", urlOrders)
	waitForClaim(t, c, ns, "db", conditions.ReasonClaimed)
	eventuallyReady(t, c, ns, "db")
	ordersKey := connectionURL(t, c, ns, "db")
	if ordersKey == "" {
		t.Fatal("db published no connection")
	}
	// When db is switched to billing, which other manages: db is parked and
	// gives orders up
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"url":%q}}`, urlBilling))
	if err := c.Patch(ctx, &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}}, patch); err != nil {
		t.Fatal(err)
	}
	waitForClaim(t, c, ns, "db", conditions.ReasonParked)
	waitForGeneration(t, c, ns, "db", "")
	// And a new Database, next, takes orders
	create("next", urlOrders)
	waitForClaim(t, c, ns, "next", conditions.ReasonClaimed)
	eventuallyReady(t, c, ns, "next")
	time.Sleep(500 * time.Millisecond)

	// Then db's applications are not pointed at orders, which next manages
	if got := connectionURL(t, c, ns, "db"); got == ordersKey {
		t.Errorf("ConfigMap db%s still says url=%q while db is parked (ConnectionReady=False) and next manages that database: "+
			"db's applications and next's both use it", controller.ConnectionSuffix, got)
	}
}

// connectionURL returns the url of Database name's connection ConfigMap,
// or "" when there is none.
func connectionURL(t *testing.T, c client.Client, ns, name string) string {
	t.Helper()
	cm := &corev1.ConfigMap{}
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name + controller.ConnectionSuffix}, cm)
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data["url"]
}
