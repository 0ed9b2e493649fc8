package controller_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/examples/database/api/v1alpha1"
	"github.com/ocf-claim/claim/examples/database/controller"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// This file is the envtest template of docs/testing.md: copy it into your
// own module and replace the Database parts with your kind.

var env *envtest.Env

// TestMain starts one kube-apiserver and etcd for the whole package, from
// the directory $KUBEBUILDER_ASSETS names, and installs the CRD manifests.
func TestMain(m *testing.M) {
	envtest.Main(m, &env, envtest.Options{
		AddToScheme: []func(*runtime.Scheme) error{v1alpha1.AddToScheme},
		CRDPaths:    []string{filepath.Join("..", "config", "crd")},
	})
}

// startManager runs the operator in a manager of its own, restricted to a
// fresh namespace that holds both the Databases and the claim Leases, and
// returns the namespace and an uncached client. The manager's cache sees
// only what the operator watches there (controller.CacheOptions). The
// parked requeue is an hour, so every state a test reaches within seconds
// was reached by a wake-up. opts adjust the manager's options (a test's own
// client, say).
func startManager(t *testing.T, opts ...func(*ctrl.Options)) (string, client.Client) {
	t.Helper()
	ns := env.Namespace(t)
	o := env.ManagerOptions(ns)
	o.Logger = envtest.TestLogger(t)
	o.Cache.ByObject = controller.CacheOptions(ns).ByObject
	for _, opt := range opts {
		opt(&o)
	}
	r := &controller.Reconciler{ClaimNamespace: ns, ParkedRequeue: time.Hour}
	env.StartManager(t, o, r.SetupWithManager)
	return ns, env.TestClient(t)
}

// createDatabase creates Database ns/name of url, at spec.schemaVersion
// version (0: none).
func createDatabase(t *testing.T, c client.Client, ns, name, url string, version int32) *v1alpha1.Database {
	t.Helper()
	db := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.DatabaseSpec{URL: url, SchemaVersion: version}}
	if err := c.Create(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

// ordersIsReady creates Database orders of url at schema version 1, waits
// until it holds its database and is ready, and returns its claim key and
// the name of its schema record.
func ordersIsReady(t *testing.T, c client.Client, ns, url string) (key, record string) {
	t.Helper()
	orders := createDatabase(t, c, ns, "orders", url, 1)
	waitForClaim(t, c, ns, "orders", conditions.ReasonClaimed)
	eventuallyReady(t, c, ns, "orders")
	key, err := controller.Key(orders)
	if err != nil {
		t.Fatal(err)
	}
	return key, controller.SchemaRecordName(key)
}

// intercepted is a startManager option: the manager's clients call funcs.
func intercepted(funcs interceptor.Funcs) func(*ctrl.Options) {
	return func(o *ctrl.Options) {
		o.NewClient = envtest.WrapClient(func(c client.WithWatch) client.WithWatch { return interceptor.NewClient(c, funcs) })
	}
}

// eventuallyDatabase reads Database ns/name through c every interval until
// holds, given what was read, is true, and returns the Database as it was
// then. A read that fails counts as not yet; once within has passed, t fails
// with the last read's error or holds' last message.
func eventuallyDatabase(t *testing.T, c client.Client, ns, name string, within, every time.Duration, holds func(*v1alpha1.Database) (bool, string)) *v1alpha1.Database {
	t.Helper()
	var db *v1alpha1.Database
	envtest.EventuallyEvery(t, within, every, func() (bool, string) {
		db = &v1alpha1.Database{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, db); err != nil {
			return false, fmt.Sprintf("reading Database %s/%s: %v", ns, name, err)
		}
		return holds(db)
	})
	return db
}

// condition returns db's condition of type ct, nil when it has none.
func condition(db *v1alpha1.Database, ct conditions.Type) *metav1.Condition {
	return meta.FindStatusCondition(db.Status.Conditions, string(ct))
}

// waitForClaim waits until the claim condition of Database ns/name has
// reason, and returns the Database as it was then.
//
// It and the test below read the conditions themselves rather than through
// eventuallyDatabase and condition: docs/testing.md quotes both as the whole
// of what a test needs.
func waitForClaim(t *testing.T, c client.Client, ns, name string, reason conditions.Reason) *v1alpha1.Database {
	t.Helper()
	db := &v1alpha1.Database{}
	envtest.Eventually(t, 20*time.Second, func() (bool, string) {
		err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, db)
		claimed := meta.FindStatusCondition(db.Status.Conditions, string(conditions.Claimed))
		// Ready too: the reconciler writes it after the middleware's claim
		ready := meta.FindStatusCondition(db.Status.Conditions, string(conditions.Ready))
		return err == nil && claimed != nil && claimed.Reason == string(reason) && ready != nil,
			fmt.Sprintf("Database %s/%s: claim condition %+v (error %v), want reason %s", ns, name, claimed, err, reason)
	})
	return db
}

func TestADatabaseAlreadyManagedElsewhereIsParkedUntilItsHolderIsDeleted(t *testing.T) {
	ns, c := startManager(t)
	ctx := context.Background()
	// Given orders manages the database postgres://pg.data.svc:5432/orders
	orders := &v1alpha1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
		Spec:       v1alpha1.DatabaseSpec{URL: "postgres://app@pg.data.svc/orders"},
	}
	if err := c.Create(ctx, orders); err != nil {
		t.Fatal(err)
	}
	waitForClaim(t, c, ns, "orders", conditions.ReasonClaimed)

	// When billing names the same database, spelled another way
	billing := &v1alpha1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "billing"},
		Spec:       v1alpha1.DatabaseSpec{URL: "postgresql://PG.data.svc:5432/orders?sslmode=require"},
	}
	if err := c.Create(ctx, billing); err != nil {
		t.Fatal(err)
	}

	// Then billing is parked, naming orders, and its Ready says why
	got := waitForClaim(t, c, ns, "billing", conditions.ReasonParked)
	ready := meta.FindStatusCondition(got.Status.Conditions, string(conditions.Ready))
	if ready == nil || ready.Status != metav1.ConditionFalse {
		t.Fatalf("billing's Ready = %+v, want False", ready)
	}
	want := `Key "postgres://pg.data.svc:5432/orders" is held by Database ` + ns + "/orders."
	if claimed := meta.FindStatusCondition(got.Status.Conditions, string(conditions.Claimed)); claimed.Message != want {
		t.Errorf("billing's claim message = %q, want %q", claimed.Message, want)
	}

	// When orders is deleted
	if err := c.Delete(ctx, orders); err != nil {
		t.Fatal(err)
	}

	// Then billing takes the database over and becomes Ready
	waitForClaim(t, c, ns, "billing", conditions.ReasonClaimed)
	eventuallyReady(t, c, ns, "billing")
}

// eventuallyReady waits until Database ns/name is Ready.
func eventuallyReady(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	eventuallyDatabase(t, c, ns, name, 20*time.Second, 50*time.Millisecond, func(db *v1alpha1.Database) (bool, string) {
		return meta.IsStatusConditionTrue(db.Status.Conditions, string(conditions.Ready)),
			fmt.Sprintf("Database %s/%s is not Ready: %+v", ns, name, db.Status.Conditions)
	})
}
