// Package ocfgate is the claim's gate for the components of an
// operator-component-framework (ocf) operator: asked at the top of a
// component's pass, it says whether the component may apply anything, and
// when not, which condition the component stages instead.
//
// ocf has no per-pass "may act" switch a claim can drive. A Prerequisite is
// an initialization barrier: it is evaluated only until the component first
// becomes healthy, so a holder that loses its key keeps a True component
// that goes on applying in the very pass that tells it to stop. Suspend
// reports Suspended (True-ish by design) and a disabled feature gate deletes
// the component's resources. The gate is asked in every pass instead, and
// closes in every pass in which the owner does not hold every key it names:
// it keeps no state, so it re-opens in the first pass that is granted
// again.
//
// The gate imports nothing of ocf: its reasons are ocf's status names, as
// typed constants, so that ocf's own aggregation ranks a closed component
// (PrerequisiteNotMet, 10) where it ranks its own. How grave the claim's
// state is (InvalidKey, Foreign and ClaimError rank as Error) shows on Ready
// when the controller folds the claim condition in with
// conditions.FoldReady; a closed component only says that it waits.
package ocfgate

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// Reason is the reason a closed gate stages on a component's condition: one
// of ocf's status names.
type Reason string

// The reasons of a closed gate.
const (
	// ReasonPrerequisiteNotMet: the owner does not hold every key it names
	// (held elsewhere, an older object goes first, a handover drains, the
	// keys are invalid, the claim failed), hands a key over in this pass,
	// is being deleted, or its grants belong to an older generation of its
	// spec. ocf priority 10.
	ReasonPrerequisiteNotMet Reason = "PrerequisiteNotMet"
	// ReasonError: the component ran without the claim middleware, a
	// wiring fault. ocf priority 20.
	ReasonError Reason = "Error"
)

// Pass is the gate's answer for one component in one pass.
type Pass struct {
	// Open is true when the owner holds every key it names in this pass,
	// for the generation the component reconciles, and hands none of them
	// over in this pass: the component may
	// apply its resources (through claimmw.FencedClient for what the keys
	// protect).
	Open bool
	// Condition is what a closed gate makes the component stage: status
	// False, a [Reason], the claim condition's message saying why, the
	// owner's generation. Zero when Open: the component stages its own.
	Condition metav1.Condition
}

// Check is [Decide] on the claim middleware's State of ctx. A ctx that did
// not come from the middleware closes the gate with [ReasonError]: a
// component must not act on a claim nobody judged.
func Check(ctx context.Context, t conditions.Type, generation int64) Pass {
	state, ok := claimmw.StateFrom(ctx)
	if !ok {
		return closed(t, ReasonError, "Not reconciled through the claim middleware; it may not act.", generation)
	}
	return Decide(state, t, generation)
}

// Decide is the gate for a component whose condition type is t, in a pass
// the middleware decided as state, over an owner at generation. It is open
// only when state is Granted, hands no key over, and the claim was judged
// for generation; it closes on the deletion path (the component's cleanup
// is the owner's deletion pass, not an apply), in a pass that hands a key
// over (State.Handovers: the pass that moves the workloads off it), while
// the owner waits for a key, and when the claim failed or its keys are
// invalid. It is a pure function of its arguments: every pass
// decides afresh.
func Decide(state claimmw.State, t conditions.Type, generation int64) Pass {
	switch {
	case state.Deleting:
		return closed(t, ReasonPrerequisiteNotMet, "The owner is being deleted; it applies nothing.", generation)
	case state.Granted && state.Condition.ObservedGeneration != generation:
		// The spec changed after the middleware judged its keys: these
		// grants belong to the older spec. The change brings another pass.
		return closed(t, ReasonPrerequisiteNotMet, fmt.Sprintf("Waits for its claim to be judged for generation %d.", generation), generation)
	case state.Granted && len(state.Handovers) > 0:
		// This pass moves the workloads off the keys, and the middleware
		// commits the handover as soon as it succeeds: an apply now would
		// re-create what the successor is about to take over.
		h := state.Handovers[0]
		return closed(t, ReasonPrerequisiteNotMet, fmt.Sprintf("Hands key %q over to %s; it applies nothing.", h.Key, h.Successor), generation)
	case state.Granted:
		return Pass{Open: true}
	}
	msg := state.Condition.Message
	if msg == "" {
		msg = "The owner does not hold its keys."
	}
	return closed(t, ReasonPrerequisiteNotMet, "Waits for its claim: "+msg, generation)
}

func closed(t conditions.Type, r Reason, message string, generation int64) Pass {
	return Pass{Condition: metav1.Condition{
		Type:               string(t),
		Status:             metav1.ConditionFalse,
		Reason:             string(r),
		Message:            conditions.BoundMessage(message),
		ObservedGeneration: generation,
	}}
}
