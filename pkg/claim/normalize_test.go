package claim_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
)

// A KeyFunc that is deterministic but not idempotent: applying it twice
// gives another key. Every method must apply it exactly once.
func tenantKey(key string) (string, error) { return "tenant-a/" + key, nil }

func TestKeysAreNormalizedExactlyOnce(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	c, err := memory.NewClaimer(store, claim.Config{Namespace: "claims", KeyFunc: tenantKey})
	if err != nil {
		t.Fatal(err)
	}
	self := claim.Holder{Kind: "Database", Namespace: "a", Name: "db", UID: "uid-db"}

	// Given a key acquired through a non-idempotent KeyFunc
	_, o, err := c.Acquire(ctx, "orders", self)
	if err != nil || !o.Granted() {
		t.Fatalf("acquiring: %v, %+v", err, o)
	}
	// Then the record is written for KeyFunc(key), not KeyFunc(KeyFunc(key))
	if o.Key != "tenant-a/orders" {
		t.Errorf("outcome key %q, want %q", o.Key, "tenant-a/orders")
	}
	// And Holds, Renew and a second Acquire of the raw key find it held
	if held, err := c.Holds(ctx, "orders", self); err != nil || !held {
		t.Errorf("Holds(raw key) = %t, %v; want true", held, err)
	}
	if _, err := c.Renew(ctx, "orders", self); err != nil {
		t.Errorf("Renew(raw key): %v", err)
	}
	if _, again, err := c.Acquire(ctx, "orders", self); err != nil || again.Reason != claim.ReasonHeld {
		t.Errorf("second Acquire: %v, %s; want Held", err, again.Reason)
	}
	// And Holdings reports the normalized key, which ReleaseRecords frees
	recs, err := c.Holdings(ctx, self)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range recs {
		keys = append(keys, r.Key)
	}
	if diff := cmp.Diff([]string{"tenant-a/orders"}, keys); diff != "" {
		t.Errorf("holdings (-want +got):\n%s", diff)
	}
	released, err := c.ReleaseRecords(ctx, self, recs...)
	if err != nil || len(released) != 1 {
		t.Fatalf("ReleaseRecords: %q, %v", released, err)
	}
	if held, _ := c.Holds(ctx, "orders", self); held {
		t.Error("key still held after ReleaseRecords")
	}
}

func TestOnlyTheNormalizedKeyIsValidated(t *testing.T) {
	// Given a KeyFunc that keeps only the part after the last '#'
	short := func(key string) (string, error) { return key[strings.LastIndex(key, "#")+1:], nil }
	c, err := memory.NewClaimer(memory.New(), claim.Config{Namespace: "claims", KeyFunc: short})
	if err != nil {
		t.Fatal(err)
	}
	// When the raw key is longer than MaxKeyLength but normalizes to a short one
	raw := strings.Repeat("x", claim.MaxKeyLength+100) + "#orders"
	norm, err := c.NormalizeKey(raw)
	// Then it is accepted
	if err != nil || norm != "orders" {
		t.Fatalf("NormalizeKey = %q, %v; want %q", norm, err, "orders")
	}
	// And a key that normalizes to an invalid one is refused without echoing the raw key
	_, err = c.NormalizeKey(strings.Repeat("y", 40) + "#")
	if err == nil || strings.Contains(err.Error(), "yyyy") {
		t.Fatalf("NormalizeKey of a key normalizing to empty: %v; want an error not echoing the raw key", err)
	}
}
