// Package conditions is the claim's vocabulary on a custom resource's status:
// the condition type a middleware writes, the reasons a user reads on
// `kubectl get`, and the helpers that write a condition only when it changed
// and fold it into a consumer's Ready condition.
//
// Every reason carries a [Reason.Priority] so that a consumer aggregating
// several conditions into one can rank them: the higher priority is the one
// a user most needs to see. Nothing here performs I/O; writing status is the
// caller's job, and [Set] tells it whether there is anything to write.
package conditions

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/claim"
)

// Type is a condition type.
type Type string

const (
	// Claimed is the default type of the claim condition: True when the
	// object holds every key it names.
	Claimed Type = "Claimed"
	// Ready is the conventional summary condition of a consumer's object.
	// This package never writes it; see [FoldReady].
	Ready Type = "Ready"
)

// Reason is the reason of a claim condition. The values are stable: users
// and alerting rules match on them.
type Reason string

// The reasons of a claim condition.
const (
	// ReasonClaimed: the object holds every key it names (status True).
	ReasonClaimed Reason = "Claimed"
	// ReasonNoKeys: the object names no key, so there is nothing to hold
	// (status True).
	ReasonNoKeys Reason = "NoKeys"
	// ReasonNotFirst: a key is free but an older object wants it and goes
	// first.
	ReasonNotFirst Reason = "NotFirst"
	// ReasonParked: another live object holds a key.
	ReasonParked Reason = "Parked"
	// ReasonWaitingForHandover: the previous holder of a key is gone but its
	// workloads are still draining.
	ReasonWaitingForHandover Reason = "WaitingForHandover"
	// ReasonForeign: an object the claim did not write blocks a key; a
	// person has to remove it.
	ReasonForeign Reason = "Foreign"
	// ReasonClaimError: the claim could not be judged (an API failure, a
	// liveness or handover check that failed); the object is retried.
	ReasonClaimError Reason = "ClaimError"
	// ReasonInvalidKey: the keys of the object could not be computed, or a
	// key is not acceptable; the object's spec needs fixing.
	ReasonInvalidKey Reason = "InvalidKey"
)

// Priority ranks reasons for aggregation: higher wins. Granted reasons rank
// lowest; a reason only a person can fix (an invalid key, a foreign record)
// ranks above one that resolves by itself (waiting, parked). Unknown reasons
// rank 0.
func (r Reason) Priority() int {
	switch r {
	case ReasonClaimed, ReasonNoKeys:
		return 0
	case ReasonNotFirst:
		return 10
	case ReasonParked:
		return 20
	case ReasonWaitingForHandover:
		return 30
	case ReasonClaimError:
		return 40
	case ReasonForeign:
		return 50
	case ReasonInvalidKey:
		return 60
	}
	return 0
}

// Status is the condition status a reason carries: True for the granted
// reasons, Unknown for [ReasonClaimError] (the claim could not be judged),
// False otherwise.
func (r Reason) Status() metav1.ConditionStatus {
	switch r {
	case ReasonClaimed, ReasonNoKeys:
		return metav1.ConditionTrue
	case ReasonClaimError:
		return metav1.ConditionUnknown
	}
	return metav1.ConditionFalse
}

// ReasonFor maps an Acquire outcome to the reason a user reads.
func ReasonFor(o claim.Outcome) Reason {
	switch o.Reason {
	case claim.ReasonAcquired, claim.ReasonHeld, claim.ReasonTakenOver:
		return ReasonClaimed
	case claim.ReasonHeldElsewhere:
		return ReasonParked
	case claim.ReasonWaitingForHandover:
		return ReasonWaitingForHandover
	case claim.ReasonForeign:
		return ReasonForeign
	case claim.ReasonNotFirst:
		return ReasonNotFirst
	}
	return ReasonClaimError
}

// New returns a condition of type t with reason r, its status, message and
// the generation it was computed for. LastTransitionTime is left zero for
// [Set] to fill when the status changes.
func New(t Type, r Reason, message string, generation int64) metav1.Condition {
	return metav1.Condition{
		Type:               string(t),
		Status:             r.Status(),
		Reason:             string(r),
		Message:            message,
		ObservedGeneration: generation,
	}
}

// ForOutcome returns the condition of type t for one key's outcome. A
// granted outcome gets a message that does not depend on how the key was
// granted, so that the condition stays the same from the pass that acquired
// the key to every later pass that finds it held.
func ForOutcome(t Type, o claim.Outcome, generation int64) metav1.Condition {
	r := ReasonFor(o)
	if r == ReasonClaimed {
		return ForKeys(t, []string{o.Key}, generation)
	}
	return New(t, r, o.Message, generation)
}

// ForKeys returns the True condition of type t for an object that holds
// every one of keys (none: [ReasonNoKeys]).
func ForKeys(t Type, keys []string, generation int64) metav1.Condition {
	if len(keys) == 0 {
		return New(t, ReasonNoKeys, "Names no key to claim.", generation)
	}
	word := "key"
	if len(keys) > 1 {
		word = "keys"
	}
	return New(t, ReasonClaimed, fmt.Sprintf("Holds %s %s.", word, QuoteKeys(keys, MaxQuotedKeys)), generation)
}

// MaxQuotedKeys is how many keys [ForKeys] quotes before it counts the rest.
const MaxQuotedKeys = 5

// MaxMessageLength bounds the message of every condition the middleware
// writes, in bytes, far below the 32 KiB a CRD allows for
// conditions[].message, so that no set of keys can make a status write fail.
const MaxMessageLength = 4096

// MaxQuotedKeyLength bounds each key [QuoteKeys] quotes, in bytes.
const MaxQuotedKeyLength = 256

// QuoteKeys quotes the first n keys, each cut to [MaxQuotedKeyLength] bytes,
// separated by commas, and counts the keys left out ("..., and 3 more").
func QuoteKeys(keys []string, n int) string {
	shown := keys
	if len(shown) > n {
		shown = shown[:n]
	}
	quoted := make([]string, len(shown))
	for i, k := range shown {
		quoted[i] = fmt.Sprintf("%q", Truncate(k, MaxQuotedKeyLength))
	}
	out := strings.Join(quoted, ", ")
	if rest := len(keys) - len(shown); rest > 0 {
		out += fmt.Sprintf(", and %d more", rest)
	}
	return out
}

// truncatedMark ends a text that [Truncate] cut.
const truncatedMark = " [truncated]"

// Truncate returns s unchanged when it fits in limit bytes, and otherwise cuts
// it, never inside a UTF-8 sequence, and marks the cut, within limit bytes.
func Truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := max(limit-len(truncatedMark), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + truncatedMark
}

// BoundMessage bounds a condition message to [MaxMessageLength].
func BoundMessage(s string) string { return Truncate(s, MaxMessageLength) }

// Set puts c into conds with meta.SetStatusCondition semantics and reports
// whether anything changed: status, reason, message or observed generation.
// LastTransitionTime moves only when the status changes, so a pass that
// computes the same condition changes nothing and needs no status write.
func Set(conds *[]metav1.Condition, c metav1.Condition) bool {
	return meta.SetStatusCondition(conds, c)
}

// FoldReady returns the Ready condition a consumer should set, given the
// Ready it computed itself and its claim condition. A claim that is not
// True overrides Ready with the claim's status, reason and message: an
// object that does not hold its keys is not ready, whatever else it did.
// A True claim leaves ready as it is. The type of ready is kept (Ready when
// empty), so the helper folds into any summary condition. FoldReady never writes; the consumer
// sets the result with [Set] in its own status write.
func FoldReady(ready, claimed metav1.Condition) metav1.Condition {
	if claimed.Status == metav1.ConditionTrue {
		return ready
	}
	out := ready
	if out.Type == "" {
		out.Type = string(Ready)
	}
	out.Status = claimed.Status
	out.Reason = claimed.Reason
	out.Message = claimed.Message
	if claimed.ObservedGeneration > out.ObservedGeneration {
		out.ObservedGeneration = claimed.ObservedGeneration
	}
	return out
}
