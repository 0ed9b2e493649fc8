package claim_test

import (
	"context"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/expiry"
)

// TestNewWithANilOptionReturnsAnErrorNotAPanic: New validates its
// configuration once and never panics. Given an option list that holds a nil
// Option (an option built conditionally, left nil), When New is called, Then
// it returns (an error or a Claimer) instead of panicking with a nil function
// call.
func TestNewWithANilOptionReturnsAnErrorNotAPanic(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	var conditional claim.Option // e.g. only set when a flag is on
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("claim.New(..., nil Option) panicked: %v", r)
		}
	}()
	_, _ = claim.New(c, c, claim.Config{Namespace: "ns"}, conditional)
}

// TestNewNeverPanicsOnANameFuncThatOnlyKnowsNormalizedKeys: New never panics
// on an odd NameFunc, HolderLabels or Normalize. A NameFunc is documented to
// name "the record object of a normalized key", and a Claimer only ever hands
// it keys Normalize made. Given a Normalize that puts every key in the form
// "db#<key>" and a NameFunc that relies on the '#', When New is built (and
// probes NameFunc) and a key acquired, Then nothing panics.
func TestNewNeverPanicsOnANameFuncThatOnlyKnowsNormalizedKeys(t *testing.T) {
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

// TestNewRefusesANilLiveness: New validates everything once and never panics.
// Given the nil *Liveness that expiry.New returns with its error, passed on
// through claim.WithLiveness, When New is called and a second holder acquires
// a held key, Then New refuses it, or at least Acquire does not panic in
// Liveness.Alive.
func TestNewRefusesANilLiveness(t *testing.T) {
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
