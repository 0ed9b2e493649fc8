package claim_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/expiry"
)

// TestAttack14cNewNeverPanicsOnANameFuncThatOnlyKnowsNormalizedKeys:
// promise 6: New never panics on odd NameFunc/HolderLabels/Normalize. A
// NameFunc is documented to name "the record object of a normalized key",
// and a Claimer only ever hands it keys Normalize made. Here Normalize puts
// every key in the form "db#<key>" and NameFunc relies on the '#'. New
// probes NameFunc with a raw key of its own ("probe|https://...") that never
// went through Normalize, and the operator's process panics inside New.
func TestAttack14cNewNeverPanicsOnANameFuncThatOnlyKnowsNormalizedKeys(t *testing.T) {
	cfg := claim.Config{
		Namespace: "ns",
		Normalize: func(key string) (string, error) { return "db#" + strings.ToLower(key), nil },
		NameFunc: func(key string) string {
			return backends.HashName("db-", strings.SplitN(key, "#", 2)[1])
		},
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("claim.New panicked on a NameFunc that is valid for every normalized key: %v", r)
		}
	}()
	c, err := memory.NewClaimer(memory.New(), cfg)
	if err != nil {
		t.Logf("New: %v", err)
		return
	}
	self := claim.Holder{Kind: "Worker", Namespace: "ns", Name: "w", UID: "uid-w"}
	if _, _, err := c.Acquire(context.Background(), "Orders", self); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
}

// TestAttack14cNewRefusesANilLiveness: promise 6: New validates everything
// once and never panics. expiry.New returns a nil *Liveness with its error;
// a caller that passes it on (claim.WithLiveness(l)) gets a Claimer from New
// without complaint, and the first Acquire that finds the key held by
// someone else panics in Liveness.Alive.
func TestAttack14cNewRefusesANilLiveness(t *testing.T) {
	l, lerr := expiry.New(0, nil) // a misconfigured duration: l is nil
	if lerr == nil || l != nil {
		t.Fatalf("expiry.New(0) = %v, %v; the case needs a nil Liveness", l, lerr)
	}
	store := memory.New()
	c, err := memory.NewClaimer(store, claim.Config{Namespace: "ns"}, claim.WithLiveness(l))
	if err != nil {
		return // refused at construction: fine
	}
	a := claim.Holder{Kind: "Worker", Namespace: "ns", Name: "a", UID: "uid-a"}
	b := claim.Holder{Kind: "Worker", Namespace: "ns", Name: "b", UID: "uid-b"}
	ctx := context.Background()
	if _, _, err := c.Acquire(ctx, "k", a); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("New accepted a nil *expiry.Liveness and Acquire panicked: %v", r)
		}
	}()
	_, _, _ = c.Acquire(ctx, "k", b)
}
