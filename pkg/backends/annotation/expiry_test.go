package annotation_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/backends/annotation"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/expiry"
)

// TestTimeBasedLivenessIgnoresTheOperatorsWritesToTheClaimedObject: Given a
// holder judged by Expiry on the annotation backend, When the operator
// writes the claimed object (its data, then its labels) within the duration,
// Then the holder still expires a duration after the contender first saw
// it: only the claim's own renewals count; And a renewal does count.
func TestTimeBasedLivenessIgnoresTheOperatorsWritesToTheClaimedObject(t *testing.T) {
	ctx, ns := context.Background(), env.Namespace(t)
	const key = "elasticsearch|https://es.data.svc:9200"
	cm := createTarget(t, env.Client, ns, key, nil)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	build := func(opts ...claim.Option) *claim.Claimer {
		t.Helper()
		writer := env.TestClient(t)
		base := []claim.Option{claim.WithBackend(annotation.Backend(configMapTargets(ns))), claim.WithClock(clk)}
		c, err := claim.New(env.APIReader, writer, claim.Config{Namespace: ns}, append(base, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	expiring := func() *claim.Claimer {
		t.Helper()
		e, err := expiry.New(30*time.Second, clk)
		if err != nil {
			t.Fatal(err)
		}
		return build(claim.WithLiveness(e))
	}
	acquire := func(c *claim.Claimer, h claim.Holder, want claim.Reason) {
		t.Helper()
		_, o, err := c.Acquire(ctx, key, h)
		if err != nil || o.Reason != want {
			t.Fatalf("Acquire(%s) = %s (%q), %v; want %s", h.Name, o.Reason, o.Message, err, want)
		}
	}
	operatorWrites := func(change func(*corev1.ConfigMap)) {
		t.Helper()
		var obj corev1.ConfigMap
		if err := env.APIReader.Get(ctx, client.ObjectKeyFromObject(cm), &obj); err != nil {
			t.Fatal(err)
		}
		change(&obj)
		if err := env.Client.Update(ctx, &obj); err != nil {
			t.Fatalf("operator write: %v", err)
		}
	}
	a := claim.Holder{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "a", UID: "u-a"}
	b := claim.Holder{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "b", UID: "u-b"}
	c := claim.Holder{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "c", UID: "u-c"}
	ca := build()
	acquire(ca, a, claim.ReasonAcquired)
	cb := expiring()
	acquire(cb, b, claim.ReasonHeldElsewhere)

	// When the operator writes the object's data and then its labels
	clk.Step(10 * time.Second)
	operatorWrites(func(o *corev1.ConfigMap) { o.Data["url"] = "https://es-2.data.svc:9200" })
	acquire(cb, b, claim.ReasonHeldElsewhere)
	clk.Step(10 * time.Second)
	operatorWrites(func(o *corev1.ConfigMap) { o.Labels["tier"] = "hot" })
	acquire(cb, b, claim.ReasonHeldElsewhere)
	// Then a is dead a duration after b first saw it
	clk.Step(10 * time.Second)
	acquire(cb, b, claim.ReasonTakenOver)

	// And a renewal of b restarts a contender's count
	cc := expiring()
	acquire(cc, c, claim.ReasonHeldElsewhere)
	clk.Step(20 * time.Second)
	if _, err := expiry.Renew(ctx, cb, key, b); err != nil {
		t.Fatal(err)
	}
	acquire(cc, c, claim.ReasonHeldElsewhere)
	clk.Step(20 * time.Second)
	acquire(cc, c, claim.ReasonHeldElsewhere)
	clk.Step(10 * time.Second)
	acquire(cc, c, claim.ReasonTakenOver)
}
