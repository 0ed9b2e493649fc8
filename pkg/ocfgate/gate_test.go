package ocfgate_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
	"github.com/ocf-claim/claim/pkg/ocfgate"
)

const schema conditions.Type = "SchemaReady"

func granted(gen int64) claimmw.State {
	return claimmw.State{Granted: true, Grants: []claimmw.Grant{{Key: "k", Token: "7"}},
		Condition: conditions.ForKeys(conditions.Claimed, []string{"k"}, gen)}
}

func parked(gen int64) claimmw.State {
	return claimmw.State{Condition: conditions.New(conditions.Claimed, conditions.ReasonParked, `Key "k" is held by Database ns/b.`, gen)}
}

func want(r ocfgate.Reason, msg string, gen int64) ocfgate.Pass {
	return ocfgate.Pass{Condition: metav1.Condition{Type: string(schema), Status: metav1.ConditionFalse, Reason: string(r), Message: msg, ObservedGeneration: gen}}
}

func TestDecideOpensOnlyOnAGrantForTheReconciledGeneration(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state claimmw.State
		gen   int64
		want  ocfgate.Pass
	}{
		{"given a grant for this generation then open", granted(3), 3, ocfgate.Pass{Open: true}},
		{"given a grant for an older generation then closed until the claim is judged again", granted(2), 3,
			want(ocfgate.ReasonPrerequisiteNotMet, "Waits for its claim to be judged for generation 3.", 3)},
		{"given a parked owner then closed with PrerequisiteNotMet and the claim's message", parked(3), 3,
			want(ocfgate.ReasonPrerequisiteNotMet, `Waits for its claim: Key "k" is held by Database ns/b.`, 3)},
		{"given the pass that tells a former holder it lost its key then closed", claimmw.State{
			Releasing: []claimmw.Grant{{Key: "k", Token: "7"}},
			Condition: conditions.New(conditions.Claimed, conditions.ReasonParked, "Lost it.", 3)}, 3,
			want(ocfgate.ReasonPrerequisiteNotMet, "Waits for its claim: Lost it.", 3)},
		{"given an invalid key then closed waiting, the claim's InvalidKey left to Ready", claimmw.State{
			Condition: conditions.New(conditions.Claimed, conditions.ReasonInvalidKey, "spec.url: not a URL.", 3)}, 3,
			want(ocfgate.ReasonPrerequisiteNotMet, "Waits for its claim: spec.url: not a URL.", 3)},
		{"given a claim error then closed waiting", claimmw.State{
			Condition: conditions.New(conditions.Claimed, conditions.ReasonClaimError, "timeout.", 3)}, 3,
			want(ocfgate.ReasonPrerequisiteNotMet, "Waits for its claim: timeout.", 3)},
		{"given the deletion path, keys still held, then closed", claimmw.State{Deleting: true, Grants: []claimmw.Grant{{Key: "k", Token: "7"}}}, 3,
			want(ocfgate.ReasonPrerequisiteNotMet, "The owner is being deleted; it applies nothing.", 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ocfgate.Decide(tc.state, schema, tc.gen)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTheGateClosesEveryPassAndReopens: unlike an ocf Prerequisite, which is
// evaluated only until a component first becomes healthy, the gate answers
// every pass: granted, lost, granted again.
func TestTheGateClosesEveryPassAndReopens(t *testing.T) {
	passes := []struct {
		state claimmw.State
		open  bool
	}{
		{granted(1), true}, {granted(1), true}, {parked(1), false}, {parked(1), false}, {granted(1), true},
	}
	for i, p := range passes {
		got := ocfgate.Decide(p.state, schema, 1)
		if got.Open != p.open {
			t.Errorf("pass %d: open %t, want %t (%+v)", i, got.Open, p.open, got.Condition)
		}
		if !got.Open && got.Condition.Status != metav1.ConditionFalse {
			t.Errorf("pass %d: a closed gate staged %s", i, got.Condition.Status)
		}
	}
}

func TestCheckWithoutTheMiddlewareIsClosed(t *testing.T) {
	got := ocfgate.Check(context.Background(), schema, 4)
	if diff := cmp.Diff(want(ocfgate.ReasonError, "Not reconciled through the claim middleware; it may not act.", 4), got); diff != "" {
		t.Errorf("Check without the middleware (-want +got):\n%s", diff)
	}
}

// TestDecideClosesInThePassThatHandsTheKeyOver: with claimmw.WithHandover,
// the pass that sees a key in State.Handovers is the one that must move the
// workloads off it, and the middleware commits the handover as soon as that
// pass succeeds. A component whose gate is open applies its resources again
// in that very pass, so the successor starts while the predecessor's
// resources were just re-applied: the gate must close.
func TestDecideClosesInThePassThatHandsTheKeyOver(t *testing.T) {
	state := granted(3)
	state.Handovers = []claimmw.Handover{{Key: "k"}}
	got := ocfgate.Decide(state, schema, 3)
	if got.Open {
		t.Fatalf("Decide in a handover pass = open; want closed, staging False")
	}
	if got.Condition.Status != metav1.ConditionFalse || got.Condition.Type != string(schema) || got.Condition.ObservedGeneration != 3 {
		t.Errorf("closed gate staged %+v, want %s False at generation 3", got.Condition, schema)
	}
}
