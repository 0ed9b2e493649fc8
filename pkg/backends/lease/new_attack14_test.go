package lease_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/expiry"
)

// TestAttack14_NewRefusesANameFuncThatMakesInvalidLeaseNames (issue 14, item
// 1: New validates configuration once, at construction): Given a Config whose
// NameFunc returns names no Lease can have (upper case, '_'), When claim.New
// is called with the default Lease backend, Then it refuses the config naming
// NameFunc, as it refuses a HolderLabels function by probing it. It accepts
// it; the problem surfaces only at the first Acquire, as an API error of the
// first write.
func TestAttack14_NewRefusesANameFuncThatMakesInvalidLeaseNames(t *testing.T) {
	ns := env.Namespace(t)
	cfg := claim.Config{Namespace: ns, NameFunc: func(key string) string { return "Claim_" + key }}
	c, err := claim.New(env.APIReader, env.Client, cfg)
	if err != nil {
		if !strings.Contains(err.Error(), "NameFunc") {
			t.Fatalf("New() refused the config but does not name NameFunc: %v", err)
		}
		return
	}
	a := holder(t, ns, "a")
	_, _, acqErr := c.Acquire(context.Background(), "orders", a)
	t.Fatalf("claim.New accepted a NameFunc that makes invalid Lease names; the first Acquire then failed with: %v", acqErr)
}

// TestAttack14_TheLeaseOfAGrantIsTheOneDocsBackendsShows (docs/backends.md,
// "What each one stores", the Lease YAML): Given the seed constructor with
// defaults, When a holder acquires a key, Then the Lease carries the
// annotations and spec fields the document shows for it, and no others. It
// carries two more: the claim set annotation (claim.ocf.io/set, written on
// every write since sets exist) and spec.renewTime (every grant writes the
// renew marker); the document, and the "acquired" golden file it matches,
// show neither, so a reader porting or inspecting records is told a wire
// shape no grant produces.
func TestAttack14_TheLeaseOfAGrantIsTheOneDocsBackendsShows(t *testing.T) {
	ns := env.Namespace(t)
	c, err := claim.New(env.APIReader, env.Client, claim.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	a := holder(t, ns, "a")
	if _, o, err := c.Acquire(context.Background(), "elasticsearch|https://es.search.svc:9200", a); err != nil || o.Reason != claim.ReasonAcquired {
		t.Fatalf("Acquire = %s, %v", o.Reason, err)
	}
	l := leaseOf(t, c, "elasticsearch|https://es.search.svc:9200")
	documented := []string{ // docs/backends.md, the Lease example
		"claim.ocf.io/key", "claim.ocf.io/holder-api-version", "claim.ocf.io/holder-kind",
		"claim.ocf.io/holder-namespace", "claim.ocf.io/holder-name", "claim.ocf.io/holder-uid",
	}
	var extra []string
	for k := range l.Annotations {
		if !slices.Contains(documented, k) {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		t.Errorf("the granted Lease carries annotations docs/backends.md does not show: %v", extra)
	}
	if l.Spec.RenewTime != nil {
		t.Errorf("the granted Lease carries spec.renewTime %v, which docs/backends.md does not show", l.Spec.RenewTime)
	}
}

// TestAttack14_RenewKeepsTheGrantsTokenAfterALabelEdit (issue 14, item 3:
// "expiry.Renew(ctx, claimer, key, self) writes a new renew marker keeping
// the grant and token"; docs/backends.md: the Lease's token is "the Lease's
// resourceVersion at the grant"): Given a key granted on the Lease backend
// with token T, When someone edits a label of the Lease (an unrelated write)
// and the holder renews, Then the renewal reports, and stores, T. It reports
// and stores the version of the label edit instead: the grant wrote no token
// annotation, so the token is read back as whatever the Lease's version is,
// and Renew then freezes that later version as the grant's token.
func TestAttack14_RenewKeepsTheGrantsTokenAfterALabelEdit(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	c, err := claim.New(env.APIReader, env.Client, claim.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	a := holder(t, ns, "a")
	_, granted, err := c.Acquire(ctx, "orders", a)
	if err != nil || granted.Reason != claim.ReasonAcquired {
		t.Fatalf("Acquire = %s, %v", granted.Reason, err)
	}
	// an unrelated write: someone labels the Lease
	l := leaseOf(t, c, "orders")
	l.Labels["team"] = "ops"
	if err := env.Client.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	renewed, err := expiry.Renew(ctx, c, "orders", a)
	if err != nil {
		t.Fatal(err)
	}
	if renewed.Token != granted.Token {
		t.Errorf("Renew after a label edit reports token %s, the grant's token was %s", renewed.Token, granted.Token)
	}
	if got := leaseOf(t, c, "orders").Annotations[backends.DefaultTokenAnnotation]; got != granted.Token.String() {
		t.Errorf("the Lease stores token %q after the renewal, the grant's token was %s", got, granted.Token)
	}
}
