package lease_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/yaml"

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
// defaults, When a holder acquires a key, Then the Lease carries exactly the
// annotations the document shows, and the spec times it shows. (The
// document once showed neither the claim set annotation nor
// spec.renewTime, which every grant writes.)
func TestAttack14_TheLeaseOfAGrantIsTheOneDocsBackendsShows(t *testing.T) {
	documented := documentedLease(t)
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
	keys := func(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
	if diff := cmp.Diff(keys(documented.Annotations), keys(l.Annotations)); diff != "" {
		t.Errorf("the granted Lease's annotations differ from docs/backends.md (-documented +granted):\n%s", diff)
	}
	if (l.Spec.RenewTime == nil) != (documented.Spec.RenewTime == nil) || (l.Spec.AcquireTime == nil) != (documented.Spec.AcquireTime == nil) {
		t.Errorf("the granted Lease's spec times (acquire %v, renew %v) differ from docs/backends.md's (acquire %v, renew %v)",
			l.Spec.AcquireTime, l.Spec.RenewTime, documented.Spec.AcquireTime, documented.Spec.RenewTime)
	}
}

// documentedLease parses the Lease YAML block of docs/backends.md.
func documentedLease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "backends.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		body, _, _ := strings.Cut(block, "```")
		if !strings.Contains(body, "kind: Lease\n") {
			continue
		}
		var l coordinationv1.Lease
		if err := yaml.Unmarshal([]byte(body), &l); err != nil {
			t.Fatalf("parsing the Lease of docs/backends.md: %v", err)
		}
		return &l
	}
	t.Fatal("docs/backends.md shows no Lease")
	return nil
}

// TestAttack14_RenewAfterALabelEditKeepsTheTokenBelowTheNextGrant: Given a
// key granted on the Lease backend with token T, When someone edits a label
// of the Lease (an unrelated write) and the holder renews, Then the token the
// renewal reports and stores is at least T, and every later grant of the key
// (a takeover once the holder is gone) gets a greater one.
//
// The attack first asked for T itself. A grant is one Create and the token is
// the version of that write, so the Lease carries no token annotation until
// the protocol writes the record again; a write by someone else in between
// raises the version the token is read from. claim.Token documents exactly
// this (within one grant the reported token may rise, never to the next
// grant's), and fencing needs no more; keeping T would cost a second write
// per grant. So this test pins the documented bound, which the attack's
// scenario also exercises.
func TestAttack14_RenewAfterALabelEditKeepsTheTokenBelowTheNextGrant(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	c, err := claim.New(env.APIReader, env.Client, claim.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
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
	if cmp, err := renewed.Token.Compare(granted.Token); err != nil || cmp < 0 {
		t.Errorf("Renew after a label edit reports token %s, older than the grant's %s (%v)", renewed.Token, granted.Token, err)
	}
	stored := backends.Token(leaseOf(t, c, "orders").Annotations[backends.DefaultTokenAnnotation])
	if stored != renewed.Token {
		t.Errorf("the Lease stores token %q, the renewal reported %s", stored, renewed.Token)
	}
	// And the next grant's token is newer than anything the first grant reported
	deleteHolder(t, a)
	_, next, err := c.Acquire(ctx, "orders", b)
	if err != nil || next.Reason != claim.ReasonTakenOver {
		t.Fatalf("Acquire by b = %s, %v", next.Reason, err)
	}
	if cmp, err := next.Token.Compare(renewed.Token); err != nil || cmp <= 0 {
		t.Errorf("the next grant's token %s is not newer than the first grant's reported %s (%v)", next.Token, renewed.Token, err)
	}
}
