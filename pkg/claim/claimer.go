package claim

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ocf-claim/claim/internal/mutant"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/lease"
)

// maxRounds bounds how often one Acquire reads a record again after a
// conditional write lost to a concurrent writer.
const maxRounds = 3

// Claimer acquires, checks and releases claims on keys. It is safe for
// concurrent use and keeps no per-key state: every call reads the backend.
type Claimer struct {
	cfg     Config
	backend backends.Backend
	// cached lists Holdings through the reader of [WithCachedReader]; it
	// is backend when none was given.
	cached   backends.Backend
	writer   client.Client
	liveness Liveness
	// defaultLiveness: liveness is HolderExists, not one of WithLiveness.
	defaultLiveness bool
	// inCache finds holders alive without a request (WithCachedLiveness
	// with the default liveness); nil otherwise.
	inCache  *cachedHolders
	gate     HandoverGate
	siblings Siblings
	// predecessor reports an earlier holder of a free key that may still be
	// acting for it; nil when none was configured.
	predecessor PredecessorFunc
	clock       clock.PassiveClock
	message     MessageFunc
}

// Option configures a Claimer. The zero set of options is valid: records are
// Leases, judged by [HolderExists].
type Option func(*options)

type options struct {
	backend     backends.Factory
	liveness    Liveness
	gate        HandoverGate
	siblings    Siblings
	predecessor PredecessorFunc
	clock       clock.PassiveClock
	message     MessageFunc
	server      discovery.ServerVersionInterface
	cached      client.Reader
	// cachedKinds are the holder types the default liveness may find
	// alive through cached.
	cachedKinds []client.Object
}

// WithBackend names where records are stored, for example annotation.Backend
// or memory's. Default: lease.Backend, one coordination.k8s.io/v1 Lease per
// key in Config.Namespace.
func WithBackend(f backends.Factory) Option { return func(o *options) { o.backend = f } }

// WithLiveness replaces the default liveness, [HolderExists] on the reader
// given to New.
func WithLiveness(l Liveness) Option { return func(o *options) { o.liveness = l } }

// WithHandoverGate sets the gate a takeover waits for. Default: always open.
func WithHandoverGate(g HandoverGate) Option { return func(o *options) { o.gate = g } }

// WithSiblings enables the fairness pre-filter; see [Siblings]. Default: off.
func WithSiblings(s Siblings) Option { return func(o *options) { o.siblings = s } }

// PredecessorFunc names an earlier holder of key, other than self and than
// recorded, that may still be acting for it although the key's record does
// not say so: its record was deleted, erased, or overwritten by someone other
// than that holder, and the holder has not yet been told to stop (or its
// stopping pass has not yet succeeded). recorded is the holder the record
// names now, which the liveness judged gone (zero for a key without a
// record): it is not asked about. ok is false when there is none. detail
// says why in words. An error means "cannot judge": the key is not granted
// and Acquire returns the error.
type PredecessorFunc func(ctx context.Context, key string, self, recorded Holder) (previous Holder, detail string, ok bool, err error)

// WithPredecessors makes Acquire ask f before it creates the record of a free
// key, and before it takes a key over from a holder judged gone: while f
// names a predecessor, the key is not granted, and the Outcome is
// [ReasonWaitingForHandover] with the predecessor as Previous. pkg/claimmw
// sets it, so that a key freed from outside (its record deleted, or
// overwritten with a holder that is gone) goes to a waiter only once its
// last holder stopped acting for it. Default: none.
func WithPredecessors(f PredecessorFunc) Option { return func(o *options) { o.predecessor = f } }

// WithClock sets the clock that stamps acquire times. Default: the real one.
func WithClock(c clock.PassiveClock) Option { return func(o *options) { o.clock = c } }

// WithCachedReader lets [Claimer.CachedHoldings] list a holder's records through r,
// typically the manager's cached client, so that a reconcile that only needs
// to know whether a holder has records outside its keys makes no API
// request. Nothing that grants or deletes reads through r, and nothing
// judges a holder gone from it (see [WithCachedLiveness]).
func WithCachedReader(r client.Reader) Option { return func(o *options) { o.cached = r } }

// WithCachedLiveness lets the default liveness, [HolderExists], find a holder
// alive without an API request: a holder of the type of one of prototypes
// that the reader of [WithCachedReader] shows with the recorded UID is alive.
// Every other verdict, and every "gone", is HolderExists's on the reader
// given to New. A cache that lags behind a holder's deletion only delays a
// takeover until it delivers that deletion; it never lets one happen early.
// Give only types the cached reader already watches: a cached reader that
// starts an informer for any type it is asked about would start one per
// holder type. Without WithCachedReader, or with [WithLiveness], it has no
// effect. Default: none.
func WithCachedLiveness(prototypes ...client.Object) Option {
	return func(o *options) { o.cachedKinds = append(o.cachedKinds, prototypes...) }
}

// WithMessages words outcomes. Default: [DefaultMessage].
func WithMessages(f MessageFunc) Option { return func(o *options) { o.message = f } }

// New returns a Claimer that reads records through reader and writes them
// through writer. Records are Leases in cfg.Namespace unless [WithBackend]
// names another backend:
//
//	c, err := claim.New(mgr.GetAPIReader(), mgr.GetClient(), claim.Config{
//		Namespace: "camunda-system",
//		Normalize: normalizeStorageURL,
//	})
//
// reader must not be served from an informer cache: pass the manager's
// GetAPIReader(). A cache that has not yet seen another holder's record
// makes a taken key look free; Create still refuses the second holder, but
// every such Acquire then ends in ErrRaced instead of naming the holder, and
// a takeover judged on a stale record is refused only by its version
// precondition.
//
// New validates cfg and the options once and reports every problem at once;
// no call re-validates them.
func New(reader client.Reader, writer client.Client, cfg Config, opts ...Option) (*Claimer, error) {
	var o options
	var errs []error
	for i, opt := range opts {
		if opt == nil {
			errs = append(errs, fmt.Errorf("options[%d]: nil", i))
			continue
		}
		opt(&o)
	}
	for _, opt := range []struct {
		name  string
		value any
	}{
		{"WithLiveness", o.liveness}, {"WithHandoverGate", o.gate}, {"WithSiblings", o.siblings},
		{"WithClock", o.clock}, {"WithServerVersion", o.server}, {"WithCachedReader", o.cached},
	} {
		// A typed nil (a *T that is nil, as a constructor returns beside its
		// error) is not nil as an interface and would panic on first use.
		if opt.value != nil && isNil(opt.value) {
			errs = append(errs, fmt.Errorf("%s: a nil %T", opt.name, opt.value))
		}
	}
	if o.liveness != nil && !isNil(o.liveness) {
		if err := livenessProblem(o.liveness); err != nil {
			errs = append(errs, fmt.Errorf("WithLiveness: %w", err))
		}
	}
	if reader == nil || isNil(reader) {
		errs = append(errs, errors.New("reader: nil; pass the manager's API reader"))
	}
	if writer == nil || isNil(writer) {
		errs = append(errs, errors.New("writer: nil"))
	}
	if o.backend == nil {
		o.backend = lease.Backend
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		errs = append(errs, err)
	}
	if o.server != nil {
		info, err := o.server.ServerVersion()
		if err != nil {
			errs = append(errs, fmt.Errorf("asking the API server its version: %w", err))
		} else if err := checkComparableVersions(info); err != nil {
			errs = append(errs, err)
		}
	}
	// The backend is asked even when cfg has problems, so that one error
	// names them all; only without clients is there nothing to build it on.
	var backend, cached backends.Backend
	if reader != nil && writer != nil {
		backend = buildBackend(o.backend, reader, writer, cfg, "backend", &errs)
		cached = backend
		if o.cached != nil && !isNil(o.cached) {
			cached = buildBackend(o.backend, o.cached, writer, cfg, "backend on the cached reader", &errs)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("configuring claimer: %w", errors.Join(errs...))
	}
	c := &Claimer{
		cfg:      cfg,
		backend:  backend,
		cached:   cached,
		writer:   writer,
		liveness: o.liveness,
		gate:     o.gate,
		siblings: o.siblings,
		clock:    o.clock,
		message:  o.message,

		predecessor: o.predecessor,
	}
	if c.liveness == nil {
		c.liveness = HolderExists(reader)
		c.defaultLiveness = true
		if o.cached != nil && !isNil(o.cached) && len(o.cachedKinds) > 0 {
			c.inCache = newCachedHolders(o.cached, writer.Scheme(), o.cachedKinds)
			c.liveness = c.inCache.orNext(c.liveness)
		}
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	if c.message == nil {
		c.message = DefaultMessage
	}
	return c, nil
}

// isNil reports whether v, a non-nil interface, holds a nil pointer, map,
// func, channel, slice or interface.
func isNil(v any) bool {
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return r.IsNil()
	}
	return false
}

// buildBackend calls factory and adds its problem, or the lack of a
// backend, to errs under name.
func buildBackend(factory backends.Factory, reader client.Reader, writer client.Client, cfg Config, name string, errs *[]error) backends.Backend {
	var b backends.Backend
	// A factory may be handed a Config that validation already refused:
	// its panic is one more problem to name, not a crash.
	err := probing(name, func() error {
		var err error
		b, err = factory(reader, writer, cfg.Storage())
		return err
	})
	switch {
	case err != nil:
		*errs = append(*errs, fmt.Errorf("%s: %w", name, err))
	case b == nil || isNil(b):
		*errs = append(*errs, fmt.Errorf("%s: the factory returned no backend and no error", name))
	}
	return b
}

// Config returns the Claimer's configuration with every default filled in.
func (c *Claimer) Config() Config { return c.cfg }

// HolderOf builds obj's Holder, filling APIVersion and Kind from the
// writer's scheme when obj carries no TypeMeta.
func (c *Claimer) HolderOf(obj client.Object) (Holder, error) {
	h := HolderOf(obj)
	if h.Kind == "" {
		gvk, err := apiutil.GVKForObject(obj, c.writer.Scheme())
		if err != nil {
			return h, fmt.Errorf("finding the kind of holder %s: %w", h, err)
		}
		h.APIVersion, h.Kind = gvk.GroupVersion().String(), gvk.Kind
	}
	return h, nil
}

// NormalizeKey applies Config.Normalize to key, puts the result in Unicode
// normalization form C (so that "ü" as one code point and as "u" with a
// combining diaeresis are one key), and validates it with [ValidateKey].
// Only the result must be a valid key: the normalizer may shorten or clean what it
// is given (cut a long key, strip the user info of a URL). The raw key must
// be non-empty valid UTF-8, because string functions a normalizer uses
// (strings.ToLower, url.Parse) replace invalid bytes, which would make
// different raw keys one claim. Errors never quote the raw key, which may
// carry credentials. Every method that takes a key normalizes it exactly
// once; pass the key as the caller has it, never a normalized one.
func (c *Claimer) NormalizeKey(key string) (string, error) {
	switch {
	case key == "":
		return "", fmt.Errorf("%w: key is empty", ErrInvalidKey)
	case !utf8.ValidString(key):
		return "", fmt.Errorf("%w: a key of %d bytes is not valid UTF-8", ErrInvalidKey, len(key))
	}
	normalized, err := c.cfg.Normalize(key)
	if err != nil {
		return "", fmt.Errorf("%w: normalizing a key of %d bytes: %w", ErrInvalidKey, len(key), redactedError{err})
	}
	normalized = norm.NFC.String(normalized)
	if err := ValidateKey(normalized); err != nil {
		return "", fmt.Errorf("normalized key: %w", err)
	}
	return normalized, nil
}

// Acquire tries to make self the holder of key and reports the holder of key
// afterwards, self when granted. Contention is reported in the Outcome, never
// as an error; errors are API failures, bad input (wrapping ErrInvalidKey or
// ErrInvalidHolder), a Liveness or HandoverGate error (the current holder
// keeps the key), a takeover that found its record changed by someone other
// than a new holder (wrapping backends.ErrConflict), or a record that kept changing
// (ErrRaced). Each of these is safe to retry.
//
// A holder that already holds key gets ReasonHeld and no write is made.
func (c *Claimer) Acquire(ctx context.Context, key string, self Holder) (Holder, Outcome, error) {
	key, err := c.NormalizeKey(key)
	if err != nil {
		return Holder{}, Outcome{}, fmt.Errorf("acquiring claim: %w", err)
	}
	if err := validateHolder(self); err != nil {
		return Holder{}, Outcome{}, fmt.Errorf("acquiring claim %q: %w", key, err)
	}
	logger := log.FromContext(ctx).WithValues("claimKey", key, "self", self.String())

	if o, ok := c.parkedInCache(ctx, key, self); ok {
		return o.Holder, o, nil
	}
	var last Record
	for range maxRounds {
		rec, err := c.backend.Get(ctx, key)
		if err != nil {
			return Holder{}, Outcome{}, fmt.Errorf("acquiring claim %q: reading record: %w", key, err)
		}
		mutant.Do(mutant.CachedHeldTrusted, func() { c.trustCachedHeld(ctx, key, self, &rec) })
		last = rec
		v := judge(rec, self, c.cfg.sets()...)
		logger.V(1).Info("judged claim record", "verdict", v.String(), "record", rec.Ref.String(), "version", rec.Version)
		switch v {
		case verdictHeld:
			if got, err := c.restamp(ctx, rec); err == nil {
				rec = got
			} else {
				return Holder{}, Outcome{}, fmt.Errorf("acquiring claim %q: %w", key, err)
			}
			return self, c.outcome(Outcome{Reason: ReasonHeld, Key: key, Holder: self, Token: rec.Token, Record: rec}), nil
		case verdictForeign:
			return Holder{}, c.outcome(Outcome{Reason: ReasonForeign, Key: key, Record: rec, Detail: rec.Foreign}), nil
		case verdictFree:
			o, done, err := c.create(ctx, key, self, rec)
			if err != nil || done {
				return o.Holder, o, err
			}
		case verdictOther:
			o, done, err := c.takeOver(ctx, key, self, rec)
			if err != nil || done {
				return o.Holder, o, err
			}
		}
		logger.V(1).Info("claim record changed under a conditional write; reading again")
	}
	return last.Holder, Outcome{}, fmt.Errorf("acquiring claim %q: %w: %d conditional writes on %s lost to concurrent writers", key, ErrRaced, maxRounds, last.Ref)
}

// pendingDetail is the Detail of an Outcome that waits for a handover
// prepared for it.
const pendingDetail = "a planned handover to it is prepared and waits for the commit"

// parkedInCache answers Acquire without a request when the cache shows key
// held by another holder that the cache shows alive: the answer is to wait,
// which a lagging cache can only make longer (the record's deletion, or its
// holder's, reaches the cache and wakes the waiter), never grant early.
// Anything else (no record, self, a foreign record, a holder the cache does
// not show) is decided by Acquire's uncached read.
func (c *Claimer) parkedInCache(ctx context.Context, key string, self Holder) (Outcome, bool) {
	if c.inCache == nil {
		return Outcome{}, false
	}
	rec, err := c.cached.Get(ctx, key)
	if err != nil || judge(rec, self, c.cfg.sets()...) != verdictOther || !c.inCache.alive(ctx, rec.Holder) {
		return Outcome{}, false
	}
	pending := rec.Successor != nil && rec.Successor.Is(self)
	if afterLiveness(true, true, pending) == stepWait {
		return c.outcome(Outcome{Reason: ReasonWaitingForHandover, Key: key, Holder: rec.Holder, Previous: rec.Holder, Record: rec, Detail: pendingDetail}), true
	}
	return c.outcome(Outcome{Reason: ReasonHeldElsewhere, Key: key, Holder: rec.Holder, Record: rec}), true
}

// create grants a free key by creating its record. done is false when the
// create lost and the record must be read again.
func (c *Claimer) create(ctx context.Context, key string, self Holder, rec Record) (Outcome, bool, error) {
	if c.siblings != nil {
		siblings, err := c.siblings.Siblings(ctx, key, self)
		if err != nil {
			return Outcome{}, true, fmt.Errorf("acquiring claim %q: listing sibling claimants: %w", key, err)
		}
		if first, ok := firstClaimant(self, siblings); ok {
			return c.outcome(Outcome{Reason: ReasonNotFirst, Key: key, Other: first, Record: rec}), true, nil
		}
	}
	if o, wait, err := c.predecessorOf(ctx, key, self, Holder{}, rec); wait || err != nil {
		return o, true, err
	}
	next := granting(key, self, c.clock.Now())
	sent := next.AcquireTime
	got, err := c.write(ctx, rec, next)
	switch {
	case errors.Is(err, backends.ErrConflict):
		return Outcome{}, false, nil
	case err != nil:
		return Outcome{}, true, fmt.Errorf("acquiring claim %q: creating record: %w", key, err)
	}
	return c.outcome(Outcome{Reason: ReasonAcquired, Key: key, Holder: self, Token: got.Token, Sent: sent, Record: got}), true, nil
}

// takeOver handles a key recorded for another holder: park, wait, or take it
// over with one write fenced on rec's UID and version.
func (c *Claimer) takeOver(ctx context.Context, key string, self Holder, rec Record) (Outcome, bool, error) {
	current := rec.Holder
	alive, err := c.liveness.Alive(ctx, rec)
	if err != nil {
		return Outcome{Holder: current}, true, fmt.Errorf("acquiring claim %q: judging liveness of holder %s (it keeps the claim): %w", key, current, err)
	}
	open, detail := true, ""
	if !alive && c.gate != nil {
		open, detail, err = c.gate.Open(ctx, key, current)
		if err != nil {
			return Outcome{Holder: current}, true, fmt.Errorf("acquiring claim %q: asking the handover gate about %s (it keeps the claim): %w", key, current, err)
		}
	}
	pending := rec.Successor != nil && rec.Successor.Is(self)
	if alive && pending {
		detail = pendingDetail
	}
	switch afterLiveness(alive, open, pending) {
	case stepPark:
		return c.outcome(Outcome{Reason: ReasonHeldElsewhere, Key: key, Holder: current, Record: rec}), true, nil
	case stepWait:
		return c.outcome(Outcome{Reason: ReasonWaitingForHandover, Key: key, Holder: current, Previous: current, Record: rec, Detail: detail}), true, nil
	}

	// The record names a holder that is gone, but someone other than that
	// holder may have written it (a saved manifest applied again over the
	// record of a live holder): ask, as for a free key.
	if o, wait, err := c.predecessorOf(ctx, key, self, current, rec); wait || err != nil {
		return o, true, err
	}
	next := granting(key, self, c.clock.Now())
	next.Transitions = rec.Transitions + 1
	// A takeover replaces a record it read: its marker must differ from that
	// record's even on a clock that has not moved.
	next.RenewTime = nextRenewTime(rec.RenewTime, next.RenewTime)
	sent := next.AcquireTime
	got, err := c.write(ctx, rec, next)
	if err == nil {
		log.FromContext(ctx).Info("took over claim from a holder that is gone", "claimKey", key, "previous", current.String(), "holder", self.String())
		return c.outcome(Outcome{Reason: ReasonTakenOver, Key: key, Holder: self, Previous: current, Token: got.Token, Sent: sent, Record: got}), true, nil
	}
	if !errors.Is(err, backends.ErrConflict) {
		return Outcome{Holder: current}, true, fmt.Errorf("acquiring claim %q: taking over from %s: %w", key, current, err)
	}

	// The record changed since the read that judged current gone. That says
	// nothing about current's liveness; read again and see who is there.
	reread, err := c.backend.Get(ctx, key)
	if err != nil {
		return Outcome{Holder: current}, true, fmt.Errorf("acquiring claim %q: reading record after a lost takeover: %w", key, err)
	}
	switch afterTakeoverConflict(reread, current, self, c.cfg.sets()...) {
	case raceFreed:
		return Outcome{}, false, nil
	case raceSelf:
		return c.outcome(Outcome{Reason: ReasonHeld, Key: key, Holder: self, Token: reread.Token, Record: reread}), true, nil
	case raceForeign:
		return c.outcome(Outcome{Reason: ReasonForeign, Key: key, Record: reread, Detail: reread.Foreign}), true, nil
	case raceWinner:
		return c.outcome(Outcome{Reason: ReasonHeldElsewhere, Key: key, Holder: reread.Holder, Record: reread}), true, nil
	}
	return Outcome{Holder: current}, true, fmt.Errorf("acquiring claim %q: taking over from %s: %w (it keeps the claim until a later attempt)", key, current, backends.ErrConflict)
}

// Predecessor asks the PredecessorFunc again about the key granted is an
// Outcome of, once self holds its record and before self acts for it. A
// check made only before the record was written leaves a window: an object
// may become the holder and act after that check, lose its record to an
// outside deletion, and the write then succeeds. Asked after the write and
// before self says it acts (its holder writes that after this call, and
// reads its record again after that write), one of two such objects always
// sees the other. When a predecessor may still act, wait is true and o is
// the [ReasonWaitingForHandover] Outcome to report; self still holds the
// record, which it has not acted for and may release. Not asked about: the
// holder a takeover replaced (granted.Previous), which its liveness judged
// gone. The holder that handed the record over by [Claimer.Commit] is asked
// about like any other: a record naming it as such may be a saved copy
// applied again long after, while it acts for the key once more; after a
// real handover its next pass, told it lost the key, says so. Without a
// PredecessorFunc, wait is false.
func (c *Claimer) Predecessor(ctx context.Context, granted Outcome, self Holder) (o Outcome, wait bool, err error) {
	if !granted.Granted() {
		return granted, false, nil
	}
	return c.predecessorOf(ctx, granted.Key, self, granted.Previous, granted.Record)
}

// predecessorOf asks the PredecessorFunc, if any, about key before it is
// granted to self; wait reports a predecessor, and o is the outcome to return.
func (c *Claimer) predecessorOf(ctx context.Context, key string, self, recorded Holder, rec Record) (o Outcome, wait bool, err error) {
	if c.predecessor == nil {
		return Outcome{}, false, nil
	}
	prev, detail, ok, err := c.predecessor(ctx, key, self, recorded)
	if err != nil {
		return Outcome{}, false, fmt.Errorf("acquiring claim %q: asking whether an earlier holder still acts for it: %w", key, err)
	}
	if !ok || prev.Is(self) || prev.Is(recorded) {
		return Outcome{}, false, nil
	}
	return c.outcome(Outcome{Reason: ReasonWaitingForHandover, Key: key, Previous: prev, Record: rec, Detail: detail}), true, nil
}

func (c *Claimer) outcome(o Outcome) Outcome {
	o.Message = c.message(o)
	return o
}

// restamp rewrites rec, a record of the Claimer's holder, when it lacks what
// a record of this Claimer carries: the holder's selector labels, or
// Config.Labels (which a manager's cache restricted by them needs to see it
// at all), or its claim set in place of a former one (Config.FormerSets).
// One write, fenced on rec's version, keeps the grant and its token. A
// record without any set (an older version's, or a ported operator's) that
// carries its labels is left as it is: re-entry must not rewrite what a
// rollback reads. A conflict only means someone wrote the record since: rec
// is returned as it is and the next call tries again.
func (c *Claimer) restamp(ctx context.Context, rec Record) (Record, error) {
	if !rec.Unlabelled && (rec.Set == "" || rec.Set == c.cfg.Set) {
		return rec, nil
	}
	got, err := c.write(ctx, rec, claimFields(rec))
	switch {
	case err == nil:
		log.FromContext(ctx).V(1).Info("stamped claim record with its set and labels", "claimKey", rec.Key, "formerSet", rec.Set)
		return got, nil
	case errors.Is(err, backends.ErrConflict):
		return rec, nil
	}
	return rec, fmt.Errorf("stamping record %s with its set and labels: %w", rec.Ref, err)
}

// Restamp makes rec, a record self holds (as [Claimer.Holdings] returned it),
// a record of this Claimer as it writes them: stamped with its claim set, and
// carrying the holder's selector labels and Config.Labels. A record that
// carries them is returned unchanged, without a write; otherwise one write
// fenced on the record as read again now. It fails with an error wrapping
// ErrNotHolder when self no longer holds the key. Use it on records found
// by an uncached listing that a cache restricted by labels cannot see.
func (c *Claimer) Restamp(ctx context.Context, self Holder, rec Record) (Record, error) {
	if err := validateHolder(self); err != nil {
		return Record{}, fmt.Errorf("stamping claim: %w", err)
	}
	cur, err := c.backend.Get(ctx, rec.Key)
	if err != nil {
		return Record{}, fmt.Errorf("stamping claim %q: reading record: %w", rec.Key, err)
	}
	if !c.mine(cur, self) {
		return Record{}, fmt.Errorf("stamping claim %q: %w: it is held by %s", rec.Key, ErrNotHolder, describeHolder(cur))
	}
	got, err := c.restamp(ctx, cur)
	if err != nil {
		return Record{}, fmt.Errorf("stamping claim %q: %w", rec.Key, err)
	}
	return got, nil
}

// Gate returns the HandoverGate of [WithHandoverGate], nil when none was
// set, for a caller that frees a key it holds and must wait, as a takeover
// does, until its own workloads of the key are gone.
func (c *Claimer) Gate() HandoverGate { return c.gate }

// Yields reports whether self would yield key to an older sibling now
// ([WithSiblings]): the Outcome is [ReasonNotFirst] when the key is free and
// a sibling goes first. It asks the siblings first and reads the record
// (uncached) only when one of them goes before self, so a caller may ask it
// about every key before acquiring any, and yield without writing. Without
// WithSiblings it never yields.
func (c *Claimer) Yields(ctx context.Context, key string, self Holder) (Outcome, bool, error) {
	if c.siblings == nil {
		return Outcome{}, false, nil
	}
	key, err := c.NormalizeKey(key)
	if err != nil {
		return Outcome{}, false, fmt.Errorf("asking whether to yield claim: %w", err)
	}
	if err := validateHolder(self); err != nil {
		return Outcome{}, false, fmt.Errorf("asking whether to yield claim %q: %w", key, err)
	}
	siblings, err := c.siblings.Siblings(ctx, key, self)
	if err != nil {
		return Outcome{}, false, fmt.Errorf("asking whether to yield claim %q: listing sibling claimants: %w", key, err)
	}
	first, ok := firstClaimant(self, siblings)
	if !ok {
		return Outcome{}, false, nil
	}
	rec, err := c.backend.Get(ctx, key)
	if err != nil {
		return Outcome{}, false, fmt.Errorf("asking whether to yield claim %q: reading record: %w", key, err)
	}
	if judge(rec, self, c.cfg.sets()...) != verdictFree {
		return Outcome{}, false, nil
	}
	return c.outcome(Outcome{Reason: ReasonNotFirst, Key: key, Other: first, Record: rec}), true, nil
}

// Holds reports whether self holds key now, by one uncached read. Foreign
// records are never held.
func (c *Claimer) Holds(ctx context.Context, key string, self Holder) (bool, error) {
	rec, err := c.Current(ctx, key)
	if err != nil {
		return false, err
	}
	return c.mine(rec, self), nil
}

// JudgesDeletingHoldersAlive reports whether the Claimer judges a holder
// whose object is being deleted alive until the object is gone, so that
// only a record's own change can free its key before then: true with the
// default liveness, [HolderExists]; false with one given by [WithLiveness],
// which may judge otherwise.
func (c *Claimer) JudgesDeletingHoldersAlive() bool { return c.defaultLiveness }

// Current returns key's record as the backend has it now, for code that only
// needs to know who holds a key. Check Exists and Foreign before trusting
// Holder.
func (c *Claimer) Current(ctx context.Context, key string) (Record, error) {
	key, err := c.NormalizeKey(key)
	if err != nil {
		return Record{}, fmt.Errorf("reading claim: %w", err)
	}
	rec, err := c.backend.Get(ctx, key)
	if err != nil {
		return Record{}, fmt.Errorf("reading claim %q: %w", key, err)
	}
	return rec, nil
}

// Release frees every key self holds except those in keep: one listing of
// self's records, then one Delete per record, fenced on the UID and version
// of that List. Records of other holders and foreign records are never
// touched. A record that is already gone counts as released; a record that
// changed since the List is an error, so a finalizer that calls Release keeps
// its place and tries again. Errors of several records are joined.
//
// Only records of the Claimer's set (Config.Set) and records without a set
// are released.
func (c *Claimer) Release(ctx context.Context, self Holder, keep ...string) error {
	if err := validateHolder(self); err != nil {
		return fmt.Errorf("releasing claims: %w", err)
	}
	kept := make(map[string]bool, len(keep))
	for _, k := range keep {
		norm, err := c.NormalizeKey(k)
		if err != nil {
			// Releasing more than asked would free a key in use; refuse.
			return fmt.Errorf("releasing claims of %s: kept key: %w", self, err)
		}
		kept[norm] = true
	}
	recs, err := c.backend.List(ctx, self)
	if err != nil {
		return fmt.Errorf("releasing claims of %s: listing records: %w", self, err)
	}
	var errs []error
	for _, rec := range recs {
		if !c.mine(rec, self) || kept[rec.Key] {
			continue
		}
		if err := c.backend.Delete(ctx, rec); err != nil {
			errs = append(errs, fmt.Errorf("releasing claim %q of %s: %w", rec.Key, self, err))
			continue
		}
		log.FromContext(ctx).V(1).Info("released claim", "claimKey", rec.Key, "holder", self.String())
	}
	return errors.Join(errs...)
}

// mine reports whether rec is a record of self in the Claimer's set.
// Mine reports whether rec, as read, is self's record in this Claimer's
// claim set (or a former one, or none): the ownership rule Acquire, Holds
// and releases decide by.
func (c *Claimer) Mine(rec Record, self Holder) bool { return c.mine(rec, self) }

func (c *Claimer) mine(rec Record, self Holder) bool {
	return rec.Ours() && rec.Holder.Is(self) && ownSet(rec.Set, c.cfg.sets())
}

// write stores next in place of prev (Create when prev does not exist,
// Update fenced on prev's UID and version otherwise), stamped with the
// Claimer's set so that a record written before sets existed joins it.
func (c *Claimer) write(ctx context.Context, prev, next Record) (Record, error) {
	next.Set = c.cfg.Set
	if prev.Exists {
		return c.backend.Update(ctx, prev, next)
	}
	return c.backend.Create(ctx, prev, next)
}

// Holdings returns the records self holds in the Claimer's set, sorted by
// key, read uncached. It finds a record that lacks self's selector labels
// and names self in its annotations too (see [backends.Backend]'s List),
// with Unlabelled set: stamp it with [Claimer.Restamp].
func (c *Claimer) Holdings(ctx context.Context, self Holder) ([]Record, error) {
	return c.holdings(ctx, c.backend, self)
}

// HoldingsNotOlderThan is [Claimer.Holdings] from a listing that includes
// every record written at or before resourceVersion (the resourceVersion of
// any object in the same API server: etcd's revisions are global), which the
// API server answers from its watch cache without waiting for it to catch up
// with later writes of other resources; "0" asks for any listing, however
// old. Records written after resourceVersion may be missing. A backend that
// cannot list so ([backends.FreshLister]) lists as Holdings does.
func (c *Claimer) HoldingsNotOlderThan(ctx context.Context, self Holder, resourceVersion string) ([]Record, error) {
	fl, ok := c.backend.(backends.FreshLister)
	if !ok {
		return c.Holdings(ctx, self)
	}
	return c.holdings(ctx, listerFunc(func(ctx context.Context, h Holder) ([]Record, error) {
		return fl.ListNotOlderThan(ctx, h, resourceVersion)
	}), self)
}

// listerFunc lists records like a backend's List.
type listerFunc func(ctx context.Context, holder Holder) ([]Record, error)

// CachedHoldings is [Claimer.Holdings] through the reader of
// [WithCachedReader] (uncached without one). Its answer may lag the API
// server: a record written moments ago may be missing, a Version may be old.
// Use it to find out cheaply whether anything needs releasing, never as
// proof of holding. A record that lacks self's selector labels is found
// only while the cache holds it: a cache restricted by Config.Labels does
// not hold a record without them.
func (c *Claimer) CachedHoldings(ctx context.Context, self Holder) ([]Record, error) {
	return c.holdings(ctx, c.cached, self)
}

// RecordsByHolder returns, by holder UID and sorted by key, every record of
// the Claimer's set, whatever labels it carries: those the reader of
// [WithCachedReader] shows (uncached without one), and, read uncached,
// those a cache restricted by Config.Labels does not hold
// ([Claimer.UnlabelledHoldings]). A record whose labels differ from what
// the Claimer writes has Unlabelled set: stamp it with [Claimer.Restamp].
// ok is false, with nothing listed, when the backend cannot list the
// records of every holder at once ([backends.AllLister]): list each
// holder's with [Claimer.CachedHoldings] then. When only the uncached
// listing fails, it returns what the cache shows with the error.
func (c *Claimer) RecordsByHolder(ctx context.Context) (byHolder map[types.UID][]Record, ok bool, err error) {
	al, ok := c.cached.(backends.AllLister)
	if !ok {
		return nil, false, nil
	}
	recs, err := al.ListAll(ctx)
	if err != nil {
		return nil, true, fmt.Errorf("listing claims: %w", err)
	}
	var unlabelled []Record
	if ul, ok := c.backend.(backends.UnlabelledLister); ok && len(c.cfg.Labels) > 0 {
		if unlabelled, err = ul.ListUnlabelled(ctx); err != nil {
			err = fmt.Errorf("listing claims without the claim labels: %w", err)
		}
	}
	// A record the cache shows is the one kept; the uncached listing adds
	// only what the cache cannot hold.
	for _, rec := range unlabelled {
		if !slices.ContainsFunc(recs, func(r Record) bool { return r.Key == rec.Key }) {
			recs = append(recs, rec)
		}
	}
	return c.byHolder(recs), true, err
}

// byHolder groups the records of recs that are the Claimer set's by holder
// UID, each holder's sorted by key.
func (c *Claimer) byHolder(recs []Record) map[types.UID][]Record {
	out := map[types.UID][]Record{}
	for _, rec := range recs {
		if rec.Ours() && rec.Holder.UID != "" && ownSet(rec.Set, c.cfg.sets()) {
			out[rec.Holder.UID] = append(out[rec.Holder.UID], rec)
		}
	}
	for _, held := range out {
		slices.SortFunc(held, func(a, b Record) int { return strings.Compare(a.Key, b.Key) })
	}
	return out
}

// UnlabelledHoldings returns, by holder UID and sorted by key, the records
// of the Claimer's set that a cache restricted by Config.Labels
// (lease.CacheByObject) does not hold: those written before the labels were
// configured, or whose labels someone changed. It reads uncached, once for
// all holders. It returns nothing when Config.Labels is empty or the backend
// cannot list so ([backends.UnlabelledLister]): [Claimer.CachedHoldings]
// then sees every record the cache is given. A record of another set is
// left out.
func (c *Claimer) UnlabelledHoldings(ctx context.Context) (map[types.UID][]Record, error) {
	ul, ok := c.backend.(backends.UnlabelledLister)
	if !ok || len(c.cfg.Labels) == 0 {
		return nil, nil
	}
	recs, err := ul.ListUnlabelled(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing claims without the claim labels: %w", err)
	}
	return c.byHolder(recs), nil
}

// lister is the part of a backend holdings needs.
type lister interface {
	List(ctx context.Context, holder Holder) ([]Record, error)
}

func (f listerFunc) List(ctx context.Context, holder Holder) ([]Record, error) { return f(ctx, holder) }

func (c *Claimer) holdings(ctx context.Context, b lister, self Holder) ([]Record, error) {
	if err := validateHolder(self); err != nil {
		return nil, fmt.Errorf("listing claims: %w", err)
	}
	recs, err := b.List(ctx, self)
	if err != nil {
		return nil, fmt.Errorf("listing claims of %s: %w", self, err)
	}
	out := recs[:0]
	for _, rec := range recs {
		if c.mine(rec, self) {
			out = append(out, rec)
		}
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// ReleaseRecords releases the claims of self on the keys of recs (as
// [Claimer.Holdings] returned them), and nothing else: each key's record is
// deleted, fenced on the UID and version of the record as given when it is
// self's in the Claimer's set, else (or when it changed since) of a record
// read again uncached, and only while that read says it is self's. A record
// already gone or held by someone else counts as released. It returns the
// keys whose record it deleted, or found gone when it deleted the record as
// given; errors of several keys are joined.
func (c *Claimer) ReleaseRecords(ctx context.Context, self Holder, recs ...Record) ([]string, error) {
	if err := validateHolder(self); err != nil {
		return nil, fmt.Errorf("releasing claims: %w", err)
	}
	var released []string
	var errs []error
	for _, r := range recs {
		deleted, err := c.releaseRecord(ctx, self, r)
		if err != nil {
			errs = append(errs, fmt.Errorf("releasing claim %q of %s: %w", r.Key, self, err))
			continue
		}
		if deleted {
			released = append(released, r.Key)
			log.FromContext(ctx).V(1).Info("released claim", "claimKey", r.Key, "holder", self.String())
		}
	}
	return released, errors.Join(errs...)
}

// releaseRecord deletes the record of r's key while it is self's, and
// reports whether it did. The delete is fenced on r itself when r says it is
// self's: the API server refuses it unless the record is still exactly r,
// so no read is needed to know it deletes self's. Only a record changed
// since r (or an r that is not self's, or carries no version) is read again.
func (c *Claimer) releaseRecord(ctx context.Context, self Holder, r Record) (bool, error) {
	if r.Version != "" && c.mine(r, self) {
		err := c.backend.Delete(ctx, r)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, backends.ErrConflict) {
			return false, err
		}
	}
	rec, err := c.backend.Get(ctx, r.Key)
	if err != nil {
		return false, fmt.Errorf("reading record: %w", err)
	}
	mutant.Do(mutant.ReleaseWhateverRecord, func() { rec.Holder = self })
	if !c.mine(rec, self) {
		return false, nil
	}
	if err := c.backend.Delete(ctx, rec); err != nil {
		return false, err
	}
	return true, nil
}

// RecordRef names the object of [Claimer.RecordType] that stores the record
// of key, normalized (as Outcome.Key and Record.Key carry it), without
// reading it; ok is false when the backend does not say (it stores records
// elsewhere) or cannot map the key. Two Claimers exclude each other on a
// key exactly when they store its record in one object.
func (c *Claimer) RecordRef(key string) (ref types.NamespacedName, ok bool) {
	r, is := c.backend.(interface {
		RecordRef(key string) (types.NamespacedName, error)
	})
	if !is {
		return ref, false
	}
	ref, err := r.RecordRef(key)
	return ref, err == nil
}

// RecordType returns an empty object of the type the backend stores records
// in, for a controller that watches records (see pkg/claimmw), or nil when
// the backend stores them elsewhere.
func (c *Claimer) RecordType() client.Object {
	if t, ok := c.backend.(interface{ RecordType() client.Object }); ok {
		return t.RecordType()
	}
	return nil
}
