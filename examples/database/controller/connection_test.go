package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/examples/database/api/v1alpha1"
	"github.com/ocf-claim/claim/examples/database/controller"
	"github.com/ocf-claim/claim/pkg/conditions"
)

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
