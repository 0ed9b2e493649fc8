package controller_test

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/examples/camundacluster/api/v1alpha1"
	"github.com/ocf-claim/claim/examples/camundacluster/controller"
	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
)

// Two spellings of one backend are one key; credentials never enter a key.
func ExampleKeys() {
	cc := &v1alpha1.CamundaCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "orders"},
		Spec: v1alpha1.CamundaClusterSpec{
			SecondaryStorage: "ElasticSearch|https://elastic:changeme@ES.data.svc",
			KeycloakRealm:    "https://keycloak.auth.svc:443/realms/camunda/",
		},
	}
	keys, err := controller.Keys(cc)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, k := range keys {
		fmt.Println(k)
	}
	// Output:
	// elasticsearch|https://es.data.svc:9200
	// keycloak|https://keycloak.auth.svc/realms/camunda
}

// The claim primitive without the middleware: the first holder of a key is
// granted it with a fencing token; a second holder is told who holds it.
// (The in-memory backend stands in for the Lease backend here.)
func Example_acquire() {
	ctx := context.Background()
	claimer, err := memory.NewClaimer(memory.New(), claim.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	orders := claim.Holder{APIVersion: "camunda.example.com/v1alpha1", Kind: "CamundaCluster", Namespace: "team-a", Name: "orders", UID: "uid-1"}
	billing := claim.Holder{APIVersion: "camunda.example.com/v1alpha1", Kind: "CamundaCluster", Namespace: "team-b", Name: "billing", UID: "uid-2"}
	key := "elasticsearch|https://es.data.svc:9200"

	_, first, err := claimer.Acquire(ctx, key, orders)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(first.Reason, first.Granted(), !first.Token.IsZero())

	_, second, err := claimer.Acquire(ctx, key, billing)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(second.Reason, second.Granted())
	fmt.Println(second.Message)
	// Output:
	// Acquired true true
	// HeldElsewhere false
	// Key "elasticsearch|https://es.data.svc:9200" is held by CamundaCluster team-a/orders.
}
