package claim_test

// What a Claimer offers a caller that frees or yields keys without writing
// more than it must: the predecessor check before a free key is created,
// yielding without a write, stamping records written by an older release
// or a former set, and the gate a release goes through.

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
)

var (
	alphaH = claim.Holder{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "ns", Name: "alpha", UID: "uid-alpha", Created: time.Unix(100, 0)}
	bravoH = claim.Holder{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "ns", Name: "bravo", UID: "uid-bravo", Created: time.Unix(200, 0)}
)

func TestAFreeKeyIsNotGrantedWhileAPredecessorMayStillActForIt(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	acting := true
	asked := 0
	pred := claim.PredecessorFunc(func(_ context.Context, key string, self, _ claim.Holder) (claim.Holder, string, bool, error) {
		asked++
		return alphaH, "it has not stopped yet", acting, nil
	})
	c, err := memory.NewClaimer(store, claim.Config{Namespace: "ns"}, claim.WithPredecessors(pred))
	if err != nil {
		t.Fatal(err)
	}
	// Given k is free, but alpha may still act for it
	_, o, err := c.Acquire(ctx, "k", bravoH)
	if err != nil {
		t.Fatal(err)
	}
	// Then bravo waits for alpha, and no record is written
	if o.Reason != claim.ReasonWaitingForHandover || !o.Previous.Is(alphaH) || o.Granted() {
		t.Fatalf("Acquire while alpha may act: %+v, want WaitingForHandover on alpha", o)
	}
	if rec, _ := c.Current(ctx, "k"); rec.Exists {
		t.Fatalf("a record was written while the predecessor may act: %+v", rec)
	}
	// And the predecessor itself is granted the key: it is the one acting
	if _, o, err := c.Acquire(ctx, "k2", alphaH); err != nil || o.Reason != claim.ReasonAcquired {
		t.Fatalf("Acquire by the predecessor itself: %+v, %v", o, err)
	}
	// When alpha stopped, bravo is granted k
	acting = false
	if _, o, err := c.Acquire(ctx, "k", bravoH); err != nil || o.Reason != claim.ReasonAcquired {
		t.Fatalf("Acquire once alpha stopped: %+v, %v", o, err)
	}
	// And a held key never asks: the check costs nothing in steady state
	n := asked
	if _, o, err := c.Acquire(ctx, "k", bravoH); err != nil || o.Reason != claim.ReasonHeld {
		t.Fatalf("re-entry: %+v, %v", o, err)
	}
	if asked != n {
		t.Errorf("a re-entry asked for predecessors %d times", asked-n)
	}
}

func TestAPredecessorErrorKeepsTheKeyUngranted(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("cannot read")
	pred := claim.PredecessorFunc(func(context.Context, string, claim.Holder, claim.Holder) (claim.Holder, string, bool, error) {
		return claim.Holder{}, "", false, boom
	})
	c := memClaimer(t, claim.WithPredecessors(pred))
	_, o, err := c.Acquire(ctx, "k", bravoH)
	if !errors.Is(err, boom) || o.Granted() {
		t.Fatalf("Acquire with a failing predecessor check: %+v, %v; want the error, not granted", o, err)
	}
	if rec, _ := c.Current(ctx, "k"); rec.Exists {
		t.Fatalf("a record was written: %+v", rec)
	}
}

func TestYieldsAsksTheSiblingsFirstAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	siblings := claim.SiblingsFunc(func(_ context.Context, key string, _ claim.Holder) ([]claim.Holder, error) {
		if key == "wanted" {
			return []claim.Holder{alphaH}, nil
		}
		return nil, nil
	})
	store := memory.New()
	c, err := memory.NewClaimer(store, claim.Config{Namespace: "ns"}, claim.WithSiblings(siblings))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		key   string
		self  claim.Holder
		yield bool
	}{
		{"given an older sibling and a free key then the younger yields", "wanted", bravoH, true},
		{"given no older sibling then nobody yields", "alone", bravoH, false},
		{"given self is the oldest then it does not yield", "wanted", alphaH, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, yield, err := c.Yields(ctx, tc.key, tc.self)
			if err != nil || yield != tc.yield {
				t.Fatalf("Yields = %+v, %t, %v; want %t", o, yield, err, tc.yield)
			}
			if yield && (o.Reason != claim.ReasonNotFirst || !o.Other.Is(alphaH)) {
				t.Errorf("outcome %+v, want NotFirst naming alpha", o)
			}
		})
	}
	// Given the wanted key is held, nobody yields it: the record decides
	if _, o, err := c.Acquire(ctx, "wanted", alphaH); err != nil || !o.Granted() {
		t.Fatal(o, err)
	}
	if _, yield, err := c.Yields(ctx, "wanted", bravoH); err != nil || yield {
		t.Errorf("Yields of a held key = %t, %v; want false", yield, err)
	}
	if n := len(store.Objects()); n != 1 {
		t.Errorf("%d records after Yields, want only the acquired one", n)
	}
}

func TestAFormerSetIsAdoptedAndStampedWithTheNewSet(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	old, err := memory.NewClaimer(store, claim.Config{Namespace: "ns", Set: "old-name"})
	if err != nil {
		t.Fatal(err)
	}
	_, grant, err := old.Acquire(ctx, "k", alphaH)
	if err != nil || !grant.Granted() {
		t.Fatal(grant, err)
	}
	// Given a Claimer renamed without FormerSets, the old record is another
	// claim of the same holder: it waits for it
	renamed, err := memory.NewClaimer(store, claim.Config{Namespace: "ns", Set: "new-name"}, claim.WithLiveness(store))
	if err != nil {
		t.Fatal(err)
	}
	if _, o, err := renamed.Acquire(ctx, "k", alphaH); err != nil || o.Granted() {
		t.Fatalf("renamed without FormerSets: %+v, %v; want not granted", o, err)
	}
	// When the renamed Claimer names the old set as former
	adopting, err := memory.NewClaimer(store, claim.Config{Namespace: "ns", Set: "new-name", FormerSets: []string{"old-name"}})
	if err != nil {
		t.Fatal(err)
	}
	_, o, err := adopting.Acquire(ctx, "k", alphaH)
	if err != nil || o.Reason != claim.ReasonHeld {
		t.Fatalf("Acquire with the former set adopted: %+v, %v; want Held", o, err)
	}
	// Then the record is stamped with the new set, with the grant's token
	rec, err := adopting.Current(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Set != "new-name" {
		t.Errorf("set after re-entry = %q, want new-name", rec.Set)
	}
	if rec.Token != grant.Token || o.Token != grant.Token {
		t.Errorf("tokens after stamping: stored %s, reported %s; want the grant's %s", rec.Token, o.Token, grant.Token)
	}
	holdings, err := adopting.Holdings(ctx, alphaH)
	if err != nil || len(holdings) != 1 {
		t.Errorf("Holdings = %v, %v; want the adopted record", holdings, err)
	}
}

func TestFormerSetsAreValidated(t *testing.T) {
	_, err := memory.NewClaimer(memory.New(), claim.Config{Namespace: "ns", Set: "same", FormerSets: []string{"same", ""}})
	if err == nil {
		t.Fatal("claim.New accepted FormerSets naming Set itself and an empty set")
	}
	for _, want := range []string{`config.FormerSets[0] "same"`, `config.FormerSets[1] ""`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}
