package claim_test

import (
	"context"
	"testing"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
)

// TestCraftedLabelCollisionsNeverReleaseAnotherHoldersClaims: a label only
// selects; the protocol narrows every selection by UID. backends.LabelValue
// cannot keep every input distinct: it returns a valid value unchanged, and
// the label it makes of an invalid value ("team-a/alpha" becomes "team-a-
// alpha-606950aa54") is itself a valid value, so a second holder whose label
// value is exactly that string gets the same selector label. Given two
// holders whose HolderLabels values collide that way, each holding a key,
// When one releases everything and lists its holdings, Then the other's claim
// is neither released nor listed as the first one's.
func TestCraftedLabelCollisionsNeverReleaseAnotherHoldersClaims(t *testing.T) {
	ctx := context.Background()
	alpha := claim.Holder{Kind: "Worker", Namespace: "team-a", Name: "alpha", UID: "uid-alpha"}
	crafted := backends.LabelValue("team-a/alpha")
	bravo := claim.Holder{Kind: "Worker", Namespace: "team-b", Name: crafted, UID: "uid-bravo"}
	byName := func(h claim.Holder) map[string]string {
		if h.Namespace == "team-a" {
			return map[string]string{"example.com/holder": h.Namespace + "/" + h.Name}
		}
		return map[string]string{"example.com/holder": h.Name}
	}
	store := memory.New()
	c, err := memory.NewClaimer(store, claim.Config{Namespace: "ns", HolderLabels: byName})
	if err != nil {
		t.Fatal(err)
	}
	storage := c.Config().Storage()
	if a, b := storage.SelectorLabels(alpha), storage.SelectorLabels(bravo); a["example.com/holder"] != b["example.com/holder"] {
		t.Fatalf("the case needs colliding selector labels, got %v and %v", a, b)
	}
	for _, g := range []struct {
		key  string
		self claim.Holder
	}{{"k-alpha", alpha}, {"k-bravo", bravo}} {
		if _, o, err := c.Acquire(ctx, g.key, g.self); err != nil || !o.Granted() {
			t.Fatalf("Acquire(%s) = %s, %v", g.key, o.Reason, err)
		}
	}

	held, err := c.Holdings(ctx, alpha)
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 || held[0].Key != "k-alpha" {
		t.Fatalf("alpha's holdings = %v, want only k-alpha", held)
	}
	if err := c.Release(ctx, alpha); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Holds(ctx, "k-bravo", bravo); err != nil || !ok {
		t.Fatalf("after alpha's release, bravo holds k-bravo: %v, %v; want true", ok, err)
	}
}
