// Package conditions is the claim's vocabulary on a custom resource's status:
// the condition type a middleware writes, the reasons a user reads on
// `kubectl get`, and the helpers that write a condition only when it changed
// and fold it into a consumer's Ready condition.
//
// The conditions follow the rules of the operator-component-framework (ocf):
// status True or False, never Unknown; typed reasons; and a [Priority] per
// reason on ocf's scale, so that [FoldReady] aggregates the claim into a
// consumer's Ready the way ocf aggregates components: truth by unanimity,
// reason by priority. Nothing here performs I/O; writing status is the
// caller's job, and [Set] tells it whether there is anything to write.
package conditions

import (
	"crypto/sha256"
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
	// ReasonStopping: the object lost a key it may still be acting for (its
	// record was deleted, taken over or handed over), or could not judge a
	// claim it held; its reconciler is told to stop in every pass until one
	// returns success, and the reason then becomes what blocks the object.
	// While an object is Stopping, a key it may act for is granted to no
	// other object.
	ReasonStopping Reason = "Stopping"
	// ReasonReleased: the object is being deleted; its deletion pass
	// succeeded, it acts for no key any more, and its records are released
	// (or are being released).
	ReasonReleased Reason = "Released"
)

// Priority ranks reasons when several conditions are folded into one:
// higher wins. The scale is ocf's status priority (Status.Priority() in
// ocf), so that a claim condition ranks among an ocf operator's component
// conditions as the framework expects. Every ocf status has its constant
// below; anything unrecognised ranks [PriorityUnknown], as in ocf.
type Priority int

// ocf's status priorities, one per ocf status name. The claim's reasons use
// the Operational, Blocked and Error tiers (see [Reason.Priority]).
const (
	// PriorityUnknown is ocf's Unknown ("not reconciled yet") and the rank of
	// every reason ocf does not know.
	PriorityUnknown          Priority = 0
	PriorityCompleted        Priority = 1
	PriorityOperational      Priority = 2
	PriorityHealthy          Priority = 3
	PriorityTaskPending      Priority = 4
	PriorityOperationPending Priority = 5
	PriorityCreating         Priority = 6
	PriorityUpdating         Priority = 7
	PriorityTaskRunning      Priority = 8
	PriorityScaling          Priority = 9
	// PriorityBlocked is the tier of a condition that waits on something
	// outside its control and resolves by itself (ocf's Blocked and
	// PrerequisiteNotMet): a key held by another object.
	PriorityBlocked           Priority = 10
	PriorityTaskFailing       Priority = 11
	PriorityOperationFailing  Priority = 12
	PriorityFailing           Priority = 13
	PriorityDisabled          Priority = 14
	PrioritySuspended         Priority = 15
	PrioritySuspending        Priority = 16
	PriorityPendingSuspension Priority = 17
	PriorityDegraded          Priority = 18
	PriorityDown              Priority = 19
	// PriorityError is the tier of a fault, and of what a person must fix
	// (ocf's Error and FeatureGateError).
	PriorityError Priority = 20
)

// ocfPriorities are ocf's status names with their priorities, so that a
// consumer's own conditions, reasoned the ocf way, rank against the claim's.
// A test compares it with a golden copy of ocf's list and with the table in
// docs/ocf.md.
var ocfPriorities = map[string]Priority{
	"Error": PriorityError, "FeatureGateError": PriorityError,
	"Down": PriorityDown, "Degraded": PriorityDegraded,
	"PendingSuspension": PriorityPendingSuspension, "Suspending": PrioritySuspending,
	"Suspended": PrioritySuspended, "Disabled": PriorityDisabled,
	"Failing": PriorityFailing, "OperationFailing": PriorityOperationFailing, "TaskFailing": PriorityTaskFailing,
	"Blocked": PriorityBlocked, "PrerequisiteNotMet": PriorityBlocked,
	"Scaling": PriorityScaling, "TaskRunning": PriorityTaskRunning, "Updating": PriorityUpdating,
	"Creating": PriorityCreating, "OperationPending": PriorityOperationPending, "TaskPending": PriorityTaskPending,
	"Healthy": PriorityHealthy, "Operational": PriorityOperational, "Completed": PriorityCompleted,
	"Unknown": PriorityUnknown,
}

// Priority ranks r on ocf's scale:
//
//	Claimed, NoKeys                      Operational (2)
//	NotFirst, Parked, WaitingForHandover,
//	Stopping                             Blocked / PrerequisiteNotMet (10)
//	ClaimError                           Error (20): a fault, retried
//	Foreign, InvalidKey                  Error (20): a person must act
//
// Any other reason ranks as [PriorityOf] says.
func (r Reason) Priority() Priority {
	switch r {
	case ReasonClaimed, ReasonNoKeys, ReasonReleased:
		return PriorityOperational
	case ReasonNotFirst, ReasonParked, ReasonWaitingForHandover, ReasonStopping:
		return PriorityBlocked
	case ReasonClaimError, ReasonForeign, ReasonInvalidKey:
		return PriorityError
	}
	return ocfPriorities[string(r)]
}

// PriorityOf ranks any condition reason: the claim's reasons as
// [Reason.Priority] says, every ocf status name at its ocf priority, and
// anything else at [PriorityUnknown].
//
// The claim's tiers exist only here and in [FoldReady]: ocf's own
// aggregation (component.Aggregate) does not know the claim's reasons and
// ranks them 0. A condition that ocf aggregates must carry an ocf status
// name as its reason to rank there (the gate in package ocfgate stages
// PrerequisiteNotMet).
func PriorityOf(reason string) Priority { return Reason(reason).Priority() }

// Status is the condition status a reason carries: True for the granted
// reasons, False otherwise. A claim that could not be judged
// ([ReasonClaimError]) is False with its own reason, never Unknown: ocf
// never writes Unknown.
func (r Reason) Status() metav1.ConditionStatus {
	switch r {
	case ReasonClaimed, ReasonNoKeys:
		return metav1.ConditionTrue
	}
	return metav1.ConditionFalse
}

// New returns a condition of type t with reason r, its status, message
// (bounded to [MaxMessageLength]) and the generation it was computed for. LastTransitionTime is left zero for
// [Set] to fill when the status changes.
func New(t Type, r Reason, message string, generation int64) metav1.Condition {
	return metav1.Condition{
		Type:               string(t),
		Status:             r.Status(),
		Reason:             string(r),
		Message:            BoundMessage(message),
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
	return New(t, ReasonClaimed, fmt.Sprintf("Holds %s %s%s.", word, QuoteKeys(keys, MaxQuotedKeys), keySetSuffix(keys)), generation)
}

// keySetSuffix names the whole key set by a digest when the quoted keys do
// not show all of it (more than MaxQuotedKeys keys, or one cut short), so
// that two Claimed conditions for different key sets never read alike: a
// reader decides from the message whether the condition speaks of the keys
// an object names now.
func keySetSuffix(keys []string) string {
	whole := len(keys) <= MaxQuotedKeys
	for _, k := range keys {
		if len(k) > MaxQuotedKeyLength {
			whole = false
		}
	}
	if whole {
		return ""
	}
	sum := sha256.Sum256([]byte(strings.Join(keys, "\x00")))
	return fmt.Sprintf(" (key set %x)", sum[:8])
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

// FoldReady folds the claim condition into the summary condition a
// consumer computed itself (ready), as ocf aggregates components into Ready:
// the result is True only when both are True (truth by unanimity);
// otherwise it is False with the reason of whichever of the two that is not
// True ranks higher ([PriorityOf]; ready wins ties), so a consumer's Error
// outranks a Parked claim and a claim's InvalidKey outranks a consumer's
// Scaling. When both are True and ready's reason is an ocf status, the
// reason is the higher-ranked of the two, as ocf's Aggregate takes it (ready
// wins ties): a True ready reasoned Completed (1) takes the claim's Claimed
// (Operational, 2), one reasoned Healthy (3) keeps its own. A True ready
// whose reason is not an ocf status (a consumer's own, such as "Running")
// keeps it: it is no ocf component's reason, and the claim adds nothing to
// a True summary. The claim's message is prefixed with its
// type, as ocf prefixes a component's. The type of ready is kept (Ready when empty), and the highest
// ObservedGeneration of the two. The result is never Unknown, and a zero
// claimed (no claim condition yet) leaves ready as it is. When the status
// changes, LastTransitionTime is cleared for [Set] to fill. FoldReady never
// writes; set the result with [Set] in your own status write.
func FoldReady(ready, claimed metav1.Condition) metav1.Condition {
	if claimed.Type == "" {
		// No claim condition to fold (none written yet): nothing to say.
		return ready
	}
	out := fold(ready, claimed)
	if out.Status != ready.Status {
		// The status changes here: let Set date the transition now, not
		// when ready last changed.
		out.LastTransitionTime = metav1.Time{}
	}
	return out
}

func fold(ready, claimed metav1.Condition) metav1.Condition {
	out := ready
	if out.Type == "" {
		out.Type = string(Ready)
	}
	out.ObservedGeneration = max(ready.ObservedGeneration, claimed.ObservedGeneration)
	readyTrue := ready.Status == metav1.ConditionTrue
	claimedTrue := claimed.Status == metav1.ConditionTrue
	var takeClaimed bool
	switch {
	case claimedTrue && readyTrue:
		// All True: the reason of the highest priority among them, when
		// ready speaks ocf's vocabulary. A reason ocf does not know is the
		// consumer's own (it is no ocf component's) and stands.
		_, ocf := ocfPriorities[ready.Reason]
		takeClaimed = ocf && PriorityOf(claimed.Reason) > PriorityOf(ready.Reason)
	case claimedTrue:
		// ready is not True: its reason is the highest non-True one.
		out.Status = metav1.ConditionFalse
	default:
		out.Status = metav1.ConditionFalse
		takeClaimed = readyTrue || PriorityOf(claimed.Reason) > PriorityOf(ready.Reason)
	}
	if takeClaimed {
		out.Reason = claimed.Reason
		out.Message = BoundMessage(claimed.Type + ": " + claimed.Message)
	}
	return out
}
