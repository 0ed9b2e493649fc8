package generation

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// maxNameLen bounds claim names, generation IDs and OperationIDs. The
// Kubernetes backend stores a claim's record and its RememberedOutcomes in
// one annotation, and the API server refuses an object whose annotations
// exceed 256 KiB: at this bound, with every character escaped six-fold by
// JSON (control characters, '<'), the record and its outcomes stay near
// 93 KiB, so a claim of accepted names is always writable (outcomes keep a
// digest of their request, not its fields).
const maxNameLen = 253

// StoredClaim is a claim record as a backend keeps it: the record callers
// see, and what the backend needs to decide the next request.
type StoredClaim struct {
	Record ClaimRecord
	// TTL is the owner's last requested TTL: how long a contender must
	// observe the record unchanged before it may take the claim over.
	TTL time.Duration
	// Outcomes are the outcomes of the last identified mutations, oldest
	// first, at most RememberedOutcomes.
	Outcomes []RememberedOutcome
}

// RememberedOutcome is the outcome of one mutation that carried an
// OperationID.
type RememberedOutcome struct {
	ID OperationID
	// Request identifies the request (its kind and a hash of its fields),
	// so that an OperationID reused for another request is refused rather
	// than answered wrongly.
	Request string
	// Record is the record the mutation returned.
	Record ClaimRecord
}

// AssignToken sets the token of a record whose storing write decides it
// (FencingToken zero after a create, see [Decide]) on the record and on the
// outcomes that returned it.
func (s *StoredClaim) AssignToken(t FencingToken) {
	if s.Record.FencingToken == 0 && s.Record.Phase.Owned() {
		s.Record.FencingToken = t
	}
	for i := range s.Outcomes {
		o := &s.Outcomes[i]
		if o.Record.FencingToken == 0 && o.Record.Phase.Owned() {
			o.Record.FencingToken = t
		}
	}
}

// Request is one of the claim mutation requests: AcquireRequest,
// RenewRequest, TransferRequest, CommitRequest, AbortRequest and
// ReleaseRequest.
type Request interface {
	claimName() string
	operationID() OperationID
	// named is the generation the request needs registered (acquirer or
	// successor), empty for none.
	named() string
	validate() error
	fingerprint() string
	decide(cur *StoredClaim, f Facts) (ClaimRecord, error)
}

// Facts are what a backend observed for a decision.
type Facts struct {
	// Now is the deciding backend's clock.
	Now time.Time
	// Expired: this backend has observed the current owner's record
	// unchanged for at least its TTL (see [Observer]).
	Expired bool
	// Generation is the generation [NamedGeneration] names, nil when it is
	// not registered.
	Generation *Generation
}

// Decision is what a request does to a claim.
type Decision struct {
	// Next is the claim to store by one conditional write, nil when the
	// request writes nothing (a replay, or a request already in effect).
	// Its token is zero when the write creates the claim: the backend then
	// assigns a token greater than every earlier grant of the claim's name
	// ([StoredClaim.AssignToken]).
	Next *StoredClaim
	// Result is the record to return: Next's, or the remembered one.
	Result ClaimRecord
}

// ClaimName is the claim a request names.
func ClaimName(req Request) string { return req.claimName() }

// NamedGeneration is the generation a request needs registered: the
// acquirer or the successor. Empty for none.
func NamedGeneration(req Request) string { return req.named() }

// Validate checks a request's fields; the error wraps ErrInvalidRequest and
// names the field and value.
func Validate(req Request) error { return req.validate() }

// Decide decides req against cur (nil when the claim has no record) and the
// facts a backend observed. It is pure: both backends call it between
// their read and their one conditional write, so they behave alike.
//
// An OperationID the record remembers returns the remembered outcome and
// writes nothing; otherwise the request is decided and, when it changes the
// claim and carries an OperationID, its outcome is remembered on Next.
func Decide(cur *StoredClaim, req Request, f Facts) (Decision, error) {
	if err := req.validate(); err != nil {
		return Decision{}, err
	}
	if id := req.operationID(); id != "" && cur != nil {
		for _, o := range cur.Outcomes {
			if o.ID != id {
				continue
			}
			if o.Request != digest(req) {
				return Decision{}, fmt.Errorf("%w: operation ID %q was used for another request (%s), not for %s", ErrInvalidRequest, id, o.Request, digest(req))
			}
			return Decision{Result: o.Record}, nil
		}
	}
	rec, err := req.decide(cur, f)
	if err != nil {
		return Decision{}, err
	}
	if cur != nil && rec == cur.Record {
		return Decision{Result: rec}, nil
	}
	next := &StoredClaim{Record: rec}
	if cur != nil {
		next.TTL = cur.TTL
		next.Outcomes = append([]RememberedOutcome(nil), cur.Outcomes...)
	}
	switch r := req.(type) {
	case AcquireRequest:
		next.TTL = r.TTL
	case RenewRequest:
		next.TTL = r.TTL
	case TransferRequest:
		next.TTL = r.TTL
	case CommitRequest:
		next.TTL = r.TTL
	case ReleaseRequest:
		next.TTL = 0
	}
	if id := req.operationID(); id != "" {
		// A replay returns the record as this write stored it; its Version
		// is unknown before the write and is left zero.
		remembered := rec
		remembered.Version = 0
		next.Outcomes = append(next.Outcomes, RememberedOutcome{ID: id, Request: digest(req), Record: remembered})
		if n := len(next.Outcomes) - RememberedOutcomes; n > 0 {
			next.Outcomes = next.Outcomes[n:]
		}
	}
	return Decision{Next: next, Result: rec}, nil
}

// ValidateClaimName checks a claim name as every request does: not empty,
// at most 253 bytes, valid UTF-8. The error wraps ErrInvalidRequest.
func ValidateClaimName(name string) error { return checkName("claim name", name) }

// ValidateGenerationID checks a generation ID as every request does: not
// empty, at most 253 bytes, valid UTF-8. The error wraps ErrInvalidRequest.
func ValidateGenerationID(id string) error { return checkName("generation ID", id) }

// digest is what a remembered outcome keeps of its request: the kind of
// mutation and a hash of every field but the OperationID, so that its size
// does not grow with the names.
func digest(req Request) string {
	desc := req.fingerprint()
	kind, _, _ := strings.Cut(desc, " ")
	sum := sha256.Sum256([]byte(desc))
	return kind + ":" + hex.EncodeToString(sum[:16])
}

// checkName refuses an empty, oversized or non-UTF-8 name.
func checkName(field, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalidRequest, field)
	case len(v) > maxNameLen:
		return fmt.Errorf("%w: %s %.40q... is longer than %d bytes", ErrInvalidRequest, field, v, maxNameLen)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalidRequest, field, v)
	}
	return nil
}

func checkTTL(ttl time.Duration) error {
	if ttl <= 0 {
		return fmt.Errorf("%w: TTL %v is not positive", ErrInvalidRequest, ttl)
	}
	return nil
}

// checkOp refuses an oversized or non-UTF-8 OperationID: the Kubernetes
// backend remembers it in a JSON annotation, which would replace invalid
// bytes, and a retry would no longer find its outcome.
func checkOp(id OperationID) error {
	switch {
	case len(id) > maxNameLen:
		return fmt.Errorf("%w: OperationID %.40q... is longer than %d bytes", ErrInvalidRequest, id, maxNameLen)
	case !utf8.ValidString(string(id)):
		return fmt.Errorf("%w: OperationID %q is not valid UTF-8", ErrInvalidRequest, id)
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// checkOwner refuses a request of gen with token against the current record:
// ErrStaleToken when the token is not the current one, ErrNotOwner when gen
// does not own the claim, both when both hold.
func checkOwner(rec ClaimRecord, gen string, token FencingToken) error {
	stale := token != rec.FencingToken
	notOwner := !rec.Phase.Owned() || rec.OwnerGeneration != gen
	switch {
	case stale && notOwner:
		return fmt.Errorf("claim %q is owned by %q with token %d, not by %q with token %d: %w: %w", rec.Name, rec.OwnerGeneration, rec.FencingToken, gen, token, ErrNotOwner, ErrStaleToken)
	case stale:
		return fmt.Errorf("claim %q: token %d is not the current token %d: %w", rec.Name, token, rec.FencingToken, ErrStaleToken)
	case notOwner:
		return fmt.Errorf("claim %q is not owned by %q (owner %q, phase %s): %w", rec.Name, gen, rec.OwnerGeneration, rec.Phase, ErrNotOwner)
	}
	return nil
}

// ownedBy returns cur's record when gen owns it under token: what every
// request of the current owner (renew, prepare, commit, abort) first
// requires. A claim with no record is ErrClaimNotFound; otherwise the
// refusal is checkOwner's.
func ownedBy(cur *StoredClaim, claimName, gen string, token FencingToken) (ClaimRecord, error) {
	if cur == nil {
		return ClaimRecord{}, notFound(claimName)
	}
	if err := checkOwner(cur.Record, gen, token); err != nil {
		return ClaimRecord{}, err
	}
	return cur.Record, nil
}

func nextToken(rec ClaimRecord) (FencingToken, error) {
	if rec.FencingToken == math.MaxUint64 {
		return 0, fmt.Errorf("claim %q: token %d: %w", rec.Name, rec.FencingToken, ErrTokenOverflow)
	}
	return rec.FencingToken + 1, nil
}

func notFound(name string) error { return fmt.Errorf("claim %q: %w", name, ErrClaimNotFound) }

// checkGeneration refuses a named generation that is not registered or
// that may acquire nothing more.
func checkGeneration(id string, g *Generation) error {
	switch {
	case g == nil:
		return fmt.Errorf("generation %q: %w", id, ErrGenerationNotFound)
	case g.State.Final():
		return fmt.Errorf("generation %q is %s and may not own claims: %w", id, g.State, ErrInvalidTransition)
	}
	return nil
}

// beat is the heartbeat a write at now records: now, or just after the
// record's last heartbeat when the writer's clock is behind it, so that
// every renewal changes what an Observer watches even on a clock that has
// not moved.
func beat(rec ClaimRecord, now time.Time) time.Time {
	if now.After(rec.LastHeartbeat) {
		return now
	}
	return rec.LastHeartbeat.Add(time.Microsecond)
}

// granted returns rec granted to gen at now with token, clearing any
// transfer.
func granted(rec ClaimRecord, gen string, token FencingToken, ttl time.Duration, now time.Time, reason TransitionReason) ClaimRecord {
	prev := rec.OwnerGeneration
	if !rec.Phase.Owned() {
		prev = rec.PreviousOwner
	}
	return ClaimRecord{
		Name:            rec.Name,
		OwnerGeneration: gen,
		FencingToken:    token,
		Phase:           PhaseOwned,
		AcquiredAt:      now,
		ExpiresAt:       now.Add(ttl),
		PreviousOwner:   prev,
		LastHeartbeat:   beat(rec, now),
		Reason:          reason,
		Version:         rec.Version,
	}
}

func (r AcquireRequest) claimName() string        { return r.ClaimName }
func (r AcquireRequest) operationID() OperationID { return r.OperationID }
func (r AcquireRequest) named() string            { return r.GenerationID }
func (r AcquireRequest) validate() error {
	return firstErr(checkName("ClaimName", r.ClaimName), checkName("GenerationID", r.GenerationID), checkTTL(r.TTL), checkOp(r.OperationID))
}
func (r AcquireRequest) fingerprint() string {
	return fmt.Sprintf("acquire claim=%q generation=%q ttl=%v emptyOnly=%t", r.ClaimName, r.GenerationID, r.TTL, r.AllowEmptyOnly)
}

func (r AcquireRequest) decide(cur *StoredClaim, f Facts) (ClaimRecord, error) {
	if err := checkGeneration(r.GenerationID, f.Generation); err != nil {
		return ClaimRecord{}, err
	}
	if cur == nil {
		// The storing write assigns the first token.
		return granted(ClaimRecord{Name: r.ClaimName}, r.GenerationID, 0, r.TTL, f.Now, ReasonAcquired), nil
	}
	rec := cur.Record
	switch {
	case rec.Phase.Owned() && rec.OwnerGeneration == r.GenerationID:
		// Re-entry renews and keeps the token and any transfer.
		rec.LastHeartbeat, rec.ExpiresAt, rec.Reason = beat(rec, f.Now), f.Now.Add(r.TTL), ReasonReacquired
		return rec, nil
	case !rec.Phase.Owned():
		t, err := nextToken(rec)
		if err != nil {
			return ClaimRecord{}, err
		}
		return granted(rec, r.GenerationID, t, r.TTL, f.Now, ReasonAcquired), nil
	case r.AllowEmptyOnly || !f.Expired:
		return ClaimRecord{}, fmt.Errorf("claim %q is owned by %q (token %d, phase %s): %w", r.ClaimName, rec.OwnerGeneration, rec.FencingToken, rec.Phase, ErrClaimHeld)
	}
	t, err := nextToken(rec)
	if err != nil {
		return ClaimRecord{}, err
	}
	return granted(rec, r.GenerationID, t, r.TTL, f.Now, ReasonExpiredTakeover), nil
}

func (r RenewRequest) claimName() string        { return r.ClaimName }
func (r RenewRequest) operationID() OperationID { return r.OperationID }
func (r RenewRequest) named() string            { return "" }
func (r RenewRequest) validate() error {
	return firstErr(checkName("ClaimName", r.ClaimName), checkName("GenerationID", r.GenerationID), checkTTL(r.TTL), checkOp(r.OperationID))
}
func (r RenewRequest) fingerprint() string {
	return fmt.Sprintf("renew claim=%q generation=%q token=%d ttl=%v", r.ClaimName, r.GenerationID, r.Token, r.TTL)
}

func (r RenewRequest) decide(cur *StoredClaim, f Facts) (ClaimRecord, error) {
	rec, err := ownedBy(cur, r.ClaimName, r.GenerationID, r.Token)
	if err != nil {
		return ClaimRecord{}, err
	}
	rec.LastHeartbeat, rec.ExpiresAt, rec.Reason = beat(rec, f.Now), f.Now.Add(r.TTL), ReasonRenewed
	if rec.Phase == PhaseReserved {
		// An owner renewing with a transfer prepared is finishing its work.
		rec.Phase, rec.DrainStatus = PhaseDraining, DrainInProgress
	}
	return rec, nil
}

func (r TransferRequest) claimName() string        { return r.ClaimName }
func (r TransferRequest) operationID() OperationID { return r.OperationID }
func (r TransferRequest) named() string            { return r.ToGeneration }
func (r TransferRequest) validate() error {
	return firstErr(checkTransfer(r.ClaimName, r.FromGeneration, r.ToGeneration), checkTTL(r.TTL), checkOp(r.OperationID))
}
func (r TransferRequest) fingerprint() string {
	return fmt.Sprintf("prepare claim=%q from=%q to=%q token=%d ttl=%v", r.ClaimName, r.FromGeneration, r.ToGeneration, r.Token, r.TTL)
}

// checkTransfer checks the names every transfer request (prepare, commit,
// abort) carries: the claim, and two generations that are not one.
func checkTransfer(claimName, from, to string) error {
	if err := firstErr(checkName("ClaimName", claimName), checkName("FromGeneration", from), checkName("ToGeneration", to)); err != nil {
		return err
	}
	if from == to {
		return fmt.Errorf("%w: ToGeneration %q is FromGeneration", ErrInvalidRequest, to)
	}
	return nil
}

func (r TransferRequest) decide(cur *StoredClaim, f Facts) (ClaimRecord, error) {
	rec, err := ownedBy(cur, r.ClaimName, r.FromGeneration, r.Token)
	if err != nil {
		return ClaimRecord{}, err
	}
	if rec.Phase.transferring() {
		if rec.PendingSuccessor == r.ToGeneration {
			return rec, nil
		}
		return ClaimRecord{}, fmt.Errorf("claim %q: a transfer to %q is prepared: %w", r.ClaimName, rec.PendingSuccessor, ErrConcurrentTransfer)
	}
	if err := checkGeneration(r.ToGeneration, f.Generation); err != nil {
		return ClaimRecord{}, err
	}
	rec.Phase, rec.PendingSuccessor, rec.TransferStatus, rec.DrainStatus = PhaseReserved, r.ToGeneration, TransferPrepared, ""
	rec.LastHeartbeat, rec.ExpiresAt, rec.Reason = beat(rec, f.Now), f.Now.Add(r.TTL), ReasonTransferPrepared
	return rec, nil
}

func (r CommitRequest) claimName() string        { return r.ClaimName }
func (r CommitRequest) operationID() OperationID { return r.OperationID }
func (r CommitRequest) named() string            { return r.ToGeneration }
func (r CommitRequest) validate() error {
	return firstErr(checkTransfer(r.ClaimName, r.FromGeneration, r.ToGeneration), checkTTL(r.TTL), checkOp(r.OperationID))
}
func (r CommitRequest) fingerprint() string {
	return fmt.Sprintf("commit claim=%q from=%q to=%q token=%d ttl=%v", r.ClaimName, r.FromGeneration, r.ToGeneration, r.ExpectedToken, r.TTL)
}

func (r CommitRequest) decide(cur *StoredClaim, f Facts) (ClaimRecord, error) {
	rec, err := ownedBy(cur, r.ClaimName, r.FromGeneration, r.ExpectedToken)
	if err != nil {
		return ClaimRecord{}, err
	}
	switch {
	case !rec.Phase.transferring():
		return ClaimRecord{}, fmt.Errorf("claim %q (phase %s): %w", r.ClaimName, rec.Phase, ErrNoTransfer)
	case rec.PendingSuccessor != r.ToGeneration:
		return ClaimRecord{}, fmt.Errorf("claim %q: the prepared transfer is to %q, not %q: %w", r.ClaimName, rec.PendingSuccessor, r.ToGeneration, ErrConcurrentTransfer)
	}
	if err := checkGeneration(r.ToGeneration, f.Generation); err != nil {
		return ClaimRecord{}, err
	}
	t, err := nextToken(rec)
	if err != nil {
		return ClaimRecord{}, err
	}
	next := granted(rec, r.ToGeneration, t, r.TTL, f.Now, ReasonTransferCommitted)
	next.TransferStatus = TransferCommitted
	return next, nil
}

func (r AbortRequest) claimName() string        { return r.ClaimName }
func (r AbortRequest) operationID() OperationID { return r.OperationID }
func (r AbortRequest) named() string            { return "" }
func (r AbortRequest) validate() error {
	return firstErr(checkTransfer(r.ClaimName, r.FromGeneration, r.ToGeneration), checkOp(r.OperationID))
}
func (r AbortRequest) fingerprint() string {
	return fmt.Sprintf("abort claim=%q from=%q to=%q token=%d", r.ClaimName, r.FromGeneration, r.ToGeneration, r.ExpectedToken)
}

func (r AbortRequest) decide(cur *StoredClaim, _ Facts) (ClaimRecord, error) {
	rec, err := ownedBy(cur, r.ClaimName, r.FromGeneration, r.ExpectedToken)
	if err != nil {
		return ClaimRecord{}, err
	}
	if !rec.Phase.transferring() || rec.PendingSuccessor != r.ToGeneration {
		return ClaimRecord{}, fmt.Errorf("claim %q (phase %s, successor %q): no transfer to %q: %w", r.ClaimName, rec.Phase, rec.PendingSuccessor, r.ToGeneration, ErrNoTransfer)
	}
	// The owner keeps the claim, its token and its heartbeat.
	rec.Phase, rec.PendingSuccessor, rec.TransferStatus, rec.DrainStatus, rec.Reason = PhaseOwned, "", TransferAborted, "", ReasonTransferAborted
	return rec, nil
}

func (r ReleaseRequest) claimName() string        { return r.ClaimName }
func (r ReleaseRequest) operationID() OperationID { return r.OperationID }
func (r ReleaseRequest) named() string            { return "" }
func (r ReleaseRequest) validate() error {
	return firstErr(checkName("ClaimName", r.ClaimName), checkName("GenerationID", r.GenerationID), checkOp(r.OperationID))
}
func (r ReleaseRequest) fingerprint() string {
	return fmt.Sprintf("release claim=%q generation=%q token=%d", r.ClaimName, r.GenerationID, r.Token)
}

func (r ReleaseRequest) decide(cur *StoredClaim, _ Facts) (ClaimRecord, error) {
	if cur == nil {
		return ClaimRecord{}, notFound(r.ClaimName)
	}
	rec := cur.Record
	if !rec.Phase.Owned() && rec.FencingToken == r.Token && rec.PreviousOwner == r.GenerationID {
		// Released already: a retry whose first answer was lost.
		return rec, nil
	}
	if err := checkOwner(rec, r.GenerationID, r.Token); err != nil {
		return ClaimRecord{}, err
	}
	// The token stays on the record, so that the next grant's is greater.
	return ClaimRecord{
		Name:          rec.Name,
		FencingToken:  rec.FencingToken,
		Phase:         PhaseUnowned,
		AcquiredAt:    rec.AcquiredAt,
		PreviousOwner: r.GenerationID,
		LastHeartbeat: rec.LastHeartbeat,
		Reason:        ReasonReleased,
		Version:       rec.Version,
	}, nil
}
