package controller_test

import (
	"errors"
	"fmt"
	"log"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/ocf-claim/claim/examples/database/api/v1alpha1"
	"github.com/ocf-claim/claim/examples/database/controller"
)

// The operator's main: a manager whose cache holds only the claim Leases and
// the operator's ConfigMaps, and the wrapped reconciler registered with it.
func ExampleReconciler_SetupWithManager() {
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), v1alpha1.AddToScheme(scheme)); err != nil {
		log.Fatal(err)
	}
	const claimNamespace = "database-system" // where the claim Leases live
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme: scheme,
		Cache:  controller.CacheOptions(claimNamespace), // lease.CacheByObject inside
	})
	if err != nil {
		log.Fatal(err)
	}
	r := &controller.Reconciler{ClaimNamespace: claimNamespace}
	if err := r.SetupWithManager(mgr); err != nil {
		log.Fatal(err) // every configuration problem of the middleware, joined
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Fatal(err)
	}
}

// Two spellings of one database are one key; credentials and options are
// not part of it.
func ExampleNormalizeURL() {
	for _, url := range []string{
		"postgres://app:s3cret@pg.data.svc/orders",
		"postgresql://PG.data.svc:5432/orders?sslmode=require",
	} {
		key, err := controller.NormalizeURL(url)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(key)
	}
	// Output:
	// postgres://pg.data.svc:5432/orders
	// postgres://pg.data.svc:5432/orders
}
