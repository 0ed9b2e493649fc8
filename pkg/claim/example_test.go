package claim_test

import (
	"context"
	"fmt"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
)

// The examples run on the in-memory backend so that they run anywhere; an
// operator builds its Claimer the same way with claim.New(mgr.GetAPIReader(),
// mgr.GetClient(), cfg, opts...).

// ExampleNew is the constructor as an operator calls it: records are Leases
// in the claim namespace, the default backend. It runs on a fake client here;
// an operator passes its manager's uncached API reader and its client.
func ExampleNew() {
	ctx := context.Background()
	reader := fake.NewClientBuilder().Build()
	writer := reader
	normalizeStorageURL := func(key string) (string, error) { return strings.ToLower(key), nil }

	// In an operator: reader, writer := mgr.GetAPIReader(), mgr.GetClient()
	c, err := claim.New(reader, writer, claim.Config{
		Namespace: "camunda-system",
		Normalize: normalizeStorageURL,
		Prefix:    "camunda-storage-",
		Labels:    map[string]string{"app.kubernetes.io/managed-by": "camunda-operator"},
	})
	if err != nil {
		panic(err)
	}
	alpha := claim.Holder{Kind: "CamundaCluster", Namespace: "team-a", Name: "alpha", UID: "uid-alpha"}
	_, o, err := c.Acquire(ctx, "Elasticsearch|https://ES.data.svc:9200", alpha)
	if err != nil {
		panic(err)
	}
	var leases coordinationv1.LeaseList
	if err := reader.List(ctx, &leases, client.InNamespace("camunda-system")); err != nil {
		panic(err)
	}
	fmt.Println(o.Reason, o.Key)
	fmt.Println(len(leases.Items), "Lease", strings.HasPrefix(leases.Items[0].Name, "camunda-storage-"))
	// Output:
	// Acquired elasticsearch|https://es.data.svc:9200
	// 1 Lease true
}

func Example() {
	ctx := context.Background()
	store := memory.New()
	c, err := memory.NewClaimer(store, claim.Config{Namespace: "camunda-system"})
	if err != nil {
		panic(err)
	}
	alpha := claim.Holder{Kind: "CamundaCluster", Namespace: "team-a", Name: "alpha", UID: "uid-alpha"}
	bravo := claim.Holder{Kind: "CamundaCluster", Namespace: "team-b", Name: "bravo", UID: "uid-bravo"}
	const key = "elasticsearch|https://es.data.svc:9200"

	_, first, _ := c.Acquire(ctx, key, alpha)
	fmt.Println(first.Reason, first.Granted())

	holder, second, _ := c.Acquire(ctx, key, bravo)
	fmt.Println(second.Reason, second.Granted(), "holder:", holder)
	fmt.Println(second.Message)

	// Output:
	// Acquired true
	// HeldElsewhere false holder: CamundaCluster team-a/alpha
	// Key "elasticsearch|https://es.data.svc:9200" is held by CamundaCluster team-a/alpha.
}

func ExampleClaimer_Acquire_takeover() {
	ctx := context.Background()
	store := memory.New()
	c, _ := memory.NewClaimer(store, claim.Config{Namespace: "camunda-system"})
	alpha := claim.Holder{Namespace: "team-a", Name: "alpha", UID: "uid-alpha"}
	bravo := claim.Holder{Namespace: "team-b", Name: "bravo", UID: "uid-bravo"}

	_, before, _ := c.Acquire(ctx, "rdbms|db:5432/orders", alpha)
	// The holder is deleted: the store's Liveness now judges it gone.
	store.Kill(alpha)
	_, after, _ := c.Acquire(ctx, "rdbms|db:5432/orders", bravo)

	newer, _ := after.Token.Compare(before.Token)
	fmt.Println(after.Reason, "from", after.Previous.Name, "token newer:", newer > 0)
	// Output:
	// TakenOver from alpha token newer: true
}

func ExampleClaimer_Release() {
	ctx := context.Background()
	store := memory.New()
	c, _ := memory.NewClaimer(store, claim.Config{Namespace: "camunda-system"})
	alpha := claim.Holder{Namespace: "team-a", Name: "alpha", UID: "uid-alpha"}
	for _, k := range []string{"realm/a", "realm/b", "realm/c"} {
		_, _, _ = c.Acquire(ctx, k, alpha)
	}

	// A finalizer sweeps every claim of alpha except the one it still uses.
	if err := c.Release(ctx, alpha, "realm/b"); err != nil {
		panic(err)
	}
	for _, k := range []string{"realm/a", "realm/b", "realm/c"} {
		held, _ := c.Holds(ctx, k, alpha)
		fmt.Println(k, held)
	}
	// Output:
	// realm/a false
	// realm/b true
	// realm/c false
}

func ExampleClaimer_Prepare() {
	ctx := context.Background()
	c, _ := memory.NewClaimer(memory.New(), claim.Config{Namespace: "camunda-system"})
	bravo := claim.Holder{Namespace: "team-b", Name: "bravo", UID: "uid-bravo"}
	charlie := claim.Holder{Namespace: "team-c", Name: "charlie", UID: "uid-charlie"}
	const key = "elasticsearch|https://es.data.svc:9200"
	_, _, _ = c.Acquire(ctx, key, bravo)

	// Bravo hands the backend to charlie in two steps.
	_, _ = c.Prepare(ctx, key, bravo, charlie)
	_, waiting, _ := c.Acquire(ctx, key, charlie)
	fmt.Println("charlie before commit:", waiting.Reason)

	committed, _ := c.Commit(ctx, key, bravo, charlie)
	fmt.Println("after commit:", committed.Holder.Name, committed.Reason)
	// Output:
	// charlie before commit: WaitingForHandover
	// after commit: charlie TakenOver
}
