package generation

import (
	"errors"
	"strconv"
	"time"
)

// Generation is one version of a service taking part in claims: the Pods of
// one ReplicaSet of a rollout, or one side of a blue/green cutover.
type Generation struct {
	// ID names the generation; claims record it as their owner. Required.
	ID string
	// Service is what the generation is a version of. Required, and fixed
	// once registered.
	Service string
	// Instance says which deployment of the service this is (a Pod
	// template hash, a release name). Fixed once registered.
	Instance string
	// State is where the generation is in its life; see [GenerationState].
	State GenerationState
	// StartedAt is when the generation registered, by the registering
	// backend's clock unless the caller set it.
	StartedAt time.Time
	// UpdatedAt is when the state was last written, by the writing
	// backend's clock.
	UpdatedAt time.Time
	// Reason says why the generation is in its state, for people.
	Reason string
}

// GenerationState is the life stage of a generation.
type GenerationState string

// The states of a generation. A generation registers joining, becomes
// active, drains and retires; it may fail from any state but retired.
// Retired and failed are final.
const (
	// GenerationJoining (also called standby) is registered, not yet
	// serving: it may acquire claims or be handed them.
	GenerationJoining GenerationState = "joining"
	// GenerationActive serves.
	GenerationActive GenerationState = "active"
	// GenerationDraining finishes its work before handing its claims over;
	// it may become active again when the handover is called off.
	GenerationDraining GenerationState = "draining"
	// GenerationRetired stepped down; it acquires nothing more.
	GenerationRetired GenerationState = "retired"
	// GenerationFailed broke; it acquires nothing more.
	GenerationFailed GenerationState = "failed"
)

// transitions lists the states each state may move to (besides itself).
var transitions = map[GenerationState][]GenerationState{
	GenerationJoining:  {GenerationActive, GenerationDraining, GenerationRetired, GenerationFailed},
	GenerationActive:   {GenerationDraining, GenerationRetired, GenerationFailed},
	GenerationDraining: {GenerationActive, GenerationRetired, GenerationFailed},
	GenerationRetired:  nil,
	GenerationFailed:   nil,
}

// Valid reports whether s is one of the defined states.
func (s GenerationState) Valid() bool {
	_, ok := transitions[s]
	return ok
}

// Final reports whether s is retired or failed.
func (s GenerationState) Final() bool { return s == GenerationRetired || s == GenerationFailed }

// CanBecome reports whether a generation in state s may move to next.
// Staying in the same state is allowed (a retried write).
func (s GenerationState) CanBecome(next GenerationState) bool {
	if s == next {
		return s.Valid()
	}
	for _, to := range transitions[s] {
		if to == next {
			return true
		}
	}
	return false
}

// ClaimPhase is where a claim is between owners.
type ClaimPhase string

// The phases of a claim.
const (
	// PhaseUnowned: nobody owns the claim; it was released (a claim that
	// was never acquired has no record at all).
	PhaseUnowned ClaimPhase = "unowned"
	// PhaseOwned: OwnerGeneration owns the claim.
	PhaseOwned ClaimPhase = "owned"
	// PhaseReserved: the owner prepared a transfer to PendingSuccessor; it
	// still owns the claim and its token.
	PhaseReserved ClaimPhase = "reserved"
	// PhaseDraining: the owner renewed while a transfer was prepared: it is
	// finishing its work before the commit. It still owns the claim.
	PhaseDraining ClaimPhase = "draining"
)

// Owned reports whether the phase has an owner.
func (p ClaimPhase) Owned() bool { return p == PhaseOwned || p == PhaseReserved || p == PhaseDraining }

// transferring reports whether a transfer is prepared.
func (p ClaimPhase) transferring() bool { return p == PhaseReserved || p == PhaseDraining }

// TransitionReason says which mutation wrote a claim record last.
type TransitionReason string

// The reasons a claim record carries.
const (
	ReasonAcquired          TransitionReason = "Acquired"
	ReasonReacquired        TransitionReason = "Reacquired"
	ReasonExpiredTakeover   TransitionReason = "ExpiredTakeover"
	ReasonRenewed           TransitionReason = "Renewed"
	ReasonTransferPrepared  TransitionReason = "TransferPrepared"
	ReasonTransferCommitted TransitionReason = "TransferCommitted"
	ReasonTransferAborted   TransitionReason = "TransferAborted"
	ReasonReleased          TransitionReason = "Released"
	// ReasonDeleted is the reason of a watch event for a claim record that
	// was deleted out of band (someone deleted the Lease).
	ReasonDeleted TransitionReason = "Deleted"
)

// Transfer and drain statuses a claim record carries.
const (
	TransferPrepared  = "prepared"
	TransferCommitted = "committed"
	TransferAborted   = "aborted"
	DrainInProgress   = "draining"
)

// FencingToken orders the grants of one claim: every grant (acquire,
// takeover, committed transfer) carries a token greater than every earlier
// grant's, across releases and across deletion of the record. Renewals,
// prepared and aborted transfers keep the token. The zero token means "no
// grant". Tokens of different claims mean nothing together.
type FencingToken uint64

// String returns the token in decimal, as handed to an external system.
func (t FencingToken) String() string { return strconv.FormatUint(uint64(t), 10) }

// OperationID names one logical mutation of one claim. A mutation retried
// with the same OperationID, after a lost response, a timeout or a restart
// of the caller, returns the first outcome and has no second effect, as long
// as fewer than [RememberedOutcomes] other identified mutations of the claim
// came between. Outcomes are remembered per claim: the same OperationID on
// another claim is another mutation. Use a fresh ID for every logical
// mutation (a UUID, or the caller's generation and a counter); the same ID
// with a different request is refused with ErrInvalidRequest. Empty means
// "not idempotent": the backend remembers nothing.
type OperationID string

// RememberedOutcomes bounds the outcomes a claim record remembers; the
// oldest is dropped first.
const RememberedOutcomes = 16

// Ownership is a public snapshot of who owns a claim.
type Ownership struct {
	ClaimName        string
	OwnerGeneration  string
	FencingToken     FencingToken
	Phase            ClaimPhase
	AcquiredAt       time.Time
	ExpiresAt        time.Time
	PreviousOwner    string
	PendingSuccessor string
	DrainStatus      string
	TransferStatus   string
	LastHeartbeat    time.Time
	Reason           TransitionReason
}

// Errors the backends report, for callers to test with errors.Is. An error
// may match more than one (a renewal by a generation that lost the claim to
// a newer grant is both ErrNotOwner and ErrStaleToken).
var (
	// ErrClaimHeld: another generation owns the claim and has not expired,
	// or AllowEmptyOnly was set and the claim has an owner.
	ErrClaimHeld = errors.New("claim held by another generation")
	// ErrNotOwner: the request names a generation that does not own the
	// claim.
	ErrNotOwner = errors.New("generation does not own the claim")
	// ErrStaleToken: the request's token is not the claim's current token.
	ErrStaleToken = errors.New("fencing token is not the claim's current token")
	// ErrNoTransfer: commit or abort of a transfer that is not prepared.
	ErrNoTransfer = errors.New("no transfer prepared")
	// ErrConcurrentTransfer: a transfer to another successor is prepared.
	ErrConcurrentTransfer = errors.New("another transfer is prepared")
	// ErrTokenOverflow: the claim's token cannot grow any further.
	ErrTokenOverflow = errors.New("fencing token overflow")
	// ErrClaimNotFound: the claim has no record.
	ErrClaimNotFound = errors.New("claim not found")
	// ErrGenerationNotFound: the named generation was never registered.
	ErrGenerationNotFound = errors.New("generation not found")
	// ErrAmbiguousOutcome: the write was sent but its answer was lost; it
	// may or may not have been applied. Retry with the same OperationID to
	// learn the outcome.
	ErrAmbiguousOutcome = errors.New("outcome of the write is unknown")
	// ErrBackend: the store failed or refused (unreachable, forbidden,
	// closed); nothing was written, unless ErrAmbiguousOutcome says so too.
	ErrBackend = errors.New("generation backend failed")
	// ErrInvalidRequest: a field of the request is missing or malformed, or
	// an OperationID was reused for a different request. The message names
	// the field and its value.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrInvalidTransition: a generation state change the life cycle does
	// not allow, or a claim acquired for a retired or failed generation.
	ErrInvalidTransition = errors.New("invalid generation state transition")
)
