package claim

import (
	"fmt"
	"time"
)

// Reason says why an Acquire ended the way it did. The values are stable and
// may be used as condition reasons.
type Reason string

// The reasons an Acquire reports.
const (
	// ReasonAcquired: the key was free and self created its record.
	ReasonAcquired Reason = "Acquired"
	// ReasonHeld: self already held the key; nothing was written.
	ReasonHeld Reason = "Held"
	// ReasonTakenOver: the previous holder was gone and self took its place.
	ReasonTakenOver Reason = "TakenOver"
	// ReasonHeldElsewhere: another live holder holds the key.
	ReasonHeldElsewhere Reason = "HeldElsewhere"
	// ReasonForeign: a record not written by a Claimer for this key blocks it.
	ReasonForeign Reason = "Foreign"
	// ReasonNotFirst: the key is free but an older sibling claimant goes first.
	ReasonNotFirst Reason = "NotFirst"
	// ReasonWaitingForHandover: the previous holder is gone but the handover
	// gate is still closed (its workloads are draining), or a planned handover
	// to self is prepared but not yet committed.
	ReasonWaitingForHandover Reason = "WaitingForHandover"
)

// Granted reports whether the reason means self holds the key.
func (r Reason) Granted() bool {
	return r == ReasonAcquired || r == ReasonHeld || r == ReasonTakenOver
}

// Outcome is how an Acquire ended when it did not fail.
type Outcome struct {
	Reason Reason
	// Key is the claim key, as normalized by Config.Normalize.
	Key string
	// Holder is the current holder of the key: self when granted, the other
	// holder otherwise. It is zero for ReasonForeign and ReasonNotFirst.
	Holder Holder
	// Previous is the holder that was taken over, or is awaited, for
	// ReasonTakenOver and ReasonWaitingForHandover.
	Previous Holder
	// Other is the older sibling for ReasonNotFirst.
	Other Holder
	// Token is the fencing token of the grant; zero unless Granted.
	Token Token
	// Sent is the Claimer's clock reading taken just before it sent the
	// write that granted or renewed the key (Acquired, TakenOver, a Commit,
	// a Renew). Contenders saw that write no earlier, so a holder counts its
	// renew deadline from here ([Keeper.Hold]). It is zero when nothing was
	// written, as for a re-entry (Held) or a Prepare.
	Sent time.Time
	// Record is the record as last read or written.
	Record Record
	// Detail is extra words from a HandoverGate or the foreign record check.
	Detail string
	// Message is one sentence for a condition message, naming the key and
	// the current holder, worded by the Claimer's MessageFunc.
	Message string
}

// Granted reports whether self holds the key now.
func (o Outcome) Granted() bool { return o.Reason.Granted() }

// MessageFunc words an Outcome as one sentence for a condition message.
// Consumers porting a hand-written claim pass their own to keep the wording
// their users know; see [WithMessages].
type MessageFunc func(Outcome) string

// DefaultMessage is the MessageFunc a Claimer uses unless told otherwise.
func DefaultMessage(o Outcome) string {
	switch o.Reason {
	case ReasonAcquired:
		return fmt.Sprintf("Key %q acquired by %s.", o.Key, o.Holder)
	case ReasonHeld:
		return fmt.Sprintf("Key %q is held by %s.", o.Key, o.Holder)
	case ReasonTakenOver:
		return fmt.Sprintf("Key %q taken over by %s from %s, which is gone.", o.Key, o.Holder, o.Previous)
	case ReasonHeldElsewhere:
		return fmt.Sprintf("Key %q is held by %s.", o.Key, o.Holder)
	case ReasonForeign:
		return fmt.Sprintf("Key %q is blocked by %s, which was not written by this claim (%s).", o.Key, o.Record.Ref, o.Detail)
	case ReasonNotFirst:
		return fmt.Sprintf("Key %q is free, but %s, created earlier, also names it and goes first.", o.Key, o.Other)
	case ReasonWaitingForHandover:
		if o.Detail != "" {
			return fmt.Sprintf("Key %q waits for %s to hand over: %s.", o.Key, o.Previous, o.Detail)
		}
		return fmt.Sprintf("Key %q waits for %s to hand over.", o.Key, o.Previous)
	}
	return fmt.Sprintf("Key %q: %s.", o.Key, o.Reason)
}
