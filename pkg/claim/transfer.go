package claim

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors of a planned handover.
var (
	// ErrNotHolder marks a transfer step asked of a holder that does not
	// hold the key.
	ErrNotHolder = errors.New("not the holder of the claim")
	// ErrNotPrepared marks a Commit whose record is not as Prepare left it:
	// another successor, none at all, or another holder.
	ErrNotPrepared = errors.New("claim handover not prepared")
)

// Prepare records successor as the pending successor of key, which self
// holds. The holder does not change and no token is issued; Acquire by the
// successor reports ReasonWaitingForHandover until Commit. Prepare again with
// the same successor writes nothing; with another successor it replaces the
// first. It fails with ErrNotHolder when self does not hold key.
func (c *Claimer) Prepare(ctx context.Context, key string, self, successor Holder) (Outcome, error) {
	key, rec, err := c.readHeld(ctx, "preparing handover of", key, self)
	if err != nil {
		return Outcome{}, err
	}
	if err := validateHolder(successor); err != nil {
		return Outcome{}, fmt.Errorf("preparing handover of claim %q: successor: %w", key, err)
	}
	if successor.Is(self) {
		return Outcome{}, fmt.Errorf("preparing handover of claim %q: %w: successor %s is the holder itself", key, ErrInvalidHolder, successor)
	}
	held := Outcome{Reason: ReasonHeld, Key: key, Holder: self, Token: rec.Token, Record: rec}
	if rec.Successor != nil && rec.Successor.Is(successor) {
		return c.outcome(held), nil
	}
	next := claimFields(rec)
	next.Successor = &successor
	got, err := c.write(ctx, rec, next)
	if err != nil {
		return Outcome{}, fmt.Errorf("preparing handover of claim %q to %s: %w", key, successor, err)
	}
	held.Record = got
	return c.outcome(held), nil
}

// Commit makes the successor prepared for key the holder, with a new token
// greater than self's, provided the record is still as Prepare left it. A
// Commit retried after a lost response finds the successor holding the key
// and reports the same grant again without a write. The returned Outcome is
// the successor's grant (ReasonTakenOver, Previous self).
//
// It fails with ErrNotPrepared when no successor (or another holder) is
// recorded, or when successor is self (Prepare never records self), and with an error wrapping backends.ErrConflict when the record changed
// between the read and the write; re-reading decides.
func (c *Claimer) Commit(ctx context.Context, key string, self, successor Holder) (Outcome, error) {
	key, err := c.NormalizeKey(key)
	if err != nil {
		return Outcome{}, fmt.Errorf("committing handover: %w", err)
	}
	if successor.Is(self) {
		// Prepare refuses self as successor, so nothing can be prepared for
		// it; without this check a holder committing to itself would match
		// "our earlier Commit landed" below and be told it took over.
		return Outcome{}, fmt.Errorf("committing handover of claim %q to %s: %w: the successor is the holder itself", key, successor, ErrNotPrepared)
	}
	rec, err := c.backend.Get(ctx, key)
	if err != nil {
		return Outcome{}, fmt.Errorf("committing handover of claim %q: reading record: %w", key, err)
	}
	switch {
	case rec.Ours() && rec.Holder.Is(successor) && rec.Successor == nil && rec.HandedOverBy == self.UID && self.UID != "" && (rec.Set == "" || rec.Set == c.cfg.Set):
		// Our earlier Commit landed and its answer was lost: the record
		// says self handed it over.
		return c.outcome(Outcome{Reason: ReasonTakenOver, Key: key, Holder: successor, Previous: self, Token: rec.Token, Record: rec}), nil
	case !c.mine(rec, self):
		return Outcome{}, fmt.Errorf("committing handover of claim %q: %w: it is held by %s", key, ErrNotHolder, describeHolder(rec))
	case rec.Successor == nil || !rec.Successor.Is(successor):
		return Outcome{}, fmt.Errorf("committing handover of claim %q to %s: %w: pending successor is %s", key, successor, ErrNotPrepared, describeSuccessor(rec))
	}
	next := granting(key, *rec.Successor, c.clock.Now())
	next.Transitions = rec.Transitions + 1
	next.HandedOverBy = self.UID
	next.RenewTime = nextRenewTime(rec.RenewTime, next.RenewTime)
	got, err := c.write(ctx, rec, next)
	if err != nil {
		return Outcome{}, fmt.Errorf("committing handover of claim %q to %s: %w", key, successor, err)
	}
	return c.outcome(Outcome{Reason: ReasonTakenOver, Key: key, Holder: next.Holder, Previous: self, Token: got.Token, Sent: next.AcquireTime, Record: got}), nil
}

// Abort clears the pending successor of key, which self holds. Aborting when
// nothing is pending writes nothing. After a Commit it fails with
// ErrNotHolder: the successor holds the key and the handover cannot be
// undone.
func (c *Claimer) Abort(ctx context.Context, key string, self Holder) error {
	key, err := c.NormalizeKey(key)
	if err != nil {
		return fmt.Errorf("aborting handover: %w", err)
	}
	rec, err := c.backend.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("aborting handover of claim %q: reading record: %w", key, err)
	}
	if !c.mine(rec, self) {
		return fmt.Errorf("aborting handover of claim %q: %w: it is held by %s", key, ErrNotHolder, describeHolder(rec))
	}
	if rec.Successor == nil {
		return nil
	}
	next := claimFields(rec)
	next.Successor = nil
	if _, err := c.write(ctx, rec, next); err != nil {
		return fmt.Errorf("aborting handover of claim %q: %w", key, err)
	}
	return nil
}

// readHeld reads key's record and checks self holds it.
func (c *Claimer) readHeld(ctx context.Context, verb, key string, self Holder) (string, Record, error) {
	key, err := c.NormalizeKey(key)
	if err != nil {
		return "", Record{}, fmt.Errorf("%s claim: %w", verb, err)
	}
	rec, err := c.readHeldNormalized(ctx, verb, key, self)
	return key, rec, err
}

// readHeldNormalized is readHeld of a key already normalized.
func (c *Claimer) readHeldNormalized(ctx context.Context, verb, key string, self Holder) (Record, error) {
	if err := validateHolder(self); err != nil {
		return Record{}, fmt.Errorf("%s claim %q: %w", verb, key, err)
	}
	rec, err := c.backend.Get(ctx, key)
	if err != nil {
		return Record{}, fmt.Errorf("%s claim %q: reading record: %w", verb, key, err)
	}
	if !c.mine(rec, self) {
		return Record{}, fmt.Errorf("%s claim %q: %w: it is held by %s", verb, key, ErrNotHolder, describeHolder(rec))
	}
	return rec, nil
}

// granting returns the claim fields of a write that grants key to holder at
// now. A grant is the holder's first renewal: it sets the renew marker
// (RenewTime), so that a contender judging by expiry (pkg/expiry) sees a new grant even
// to the same holder, and the annotation backend, which stores no acquire
// time, records one.
func granting(key string, holder Holder, now time.Time) Record {
	return Record{Key: key, Holder: holder, AcquireTime: now, RenewTime: now}
}

// claimFields returns the claim fields of rec, for a write that keeps the
// grant: the token is passed on so the grant keeps it.
func claimFields(r Record) Record {
	return Record{
		Key: r.Key, Holder: r.Holder, Successor: r.Successor, Token: r.Token, HandedOverBy: r.HandedOverBy,
		AcquireTime: r.AcquireTime, RenewTime: r.RenewTime, Transitions: r.Transitions, Set: r.Set,
	}
}

func describeHolder(rec Record) string {
	switch {
	case !rec.Exists:
		return "nobody"
	case rec.Foreign != "":
		return "a foreign record (" + rec.Foreign + ")"
	}
	return rec.Holder.String()
}

func describeSuccessor(rec Record) string {
	if rec.Successor == nil {
		return "none"
	}
	return rec.Successor.String()
}
