package claimmw

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/internal/mutant"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
	"github.com/ocf-claim/claim/pkg/finalizer"
)

// EventReason is the reason of an event the middleware records on the
// object. Parked states are recorded under their condition reason
// (conditions.ReasonParked and the others) when the condition changes to
// them; the grant events ([EventClaimed], [EventTakenOver]) are those
// [conditions.GrantEvent] names, from the one reason table.
type EventReason string

// The event reasons of the middleware.
const (
	// EventClaimed: the object acquired a free key.
	EventClaimed EventReason = "Claimed"
	// EventTakenOver: the object took a key over from a holder that is gone.
	EventTakenOver EventReason = "TakenOver"
	// EventLost: the object held every key it names at its last pass and
	// does not any more: a key's record was deleted, taken over or handed
	// over, or its key set changed to a key held elsewhere.
	EventLost EventReason = "Lost"
	// EventReleased: the object released keys it may no longer use (keys it
	// no longer names, or keys it gave up while parked), or every key
	// before its deletion.
	EventReleased EventReason = "Released"
	// EventHandoverPrepared: the object prepared the handover of a key to
	// the successor its HandoverFunc names.
	EventHandoverPrepared EventReason = "HandoverPrepared"
	// EventHandoverAborted: the object names no successor any more and
	// cleared the prepared handover.
	EventHandoverAborted EventReason = "HandoverAborted"
	// EventHandedOver: the object committed a handover; the successor
	// holds the key.
	EventHandedOver EventReason = "HandedOver"
)

// EventAction is the action of an event the middleware records: a verb,
// as the events API asks for.
type EventAction string

// The event actions of the middleware.
const (
	ActionAcquire  EventAction = "Acquire"
	ActionRelease  EventAction = "Release"
	ActionPark     EventAction = "Park"
	ActionHandover EventAction = "Handover"
)

// staleReadRequeue is how soon an object whose status write met a newer
// version is read again.
const staleReadRequeue = 50 * time.Millisecond

// Middleware is a reconcile.Reconciler that acquires an object's claim keys
// before it calls the inner reconciler. Build it with [Wrap] and register it
// with [Middleware.SetupWithManager]. It is safe for concurrent use by a
// controller's workers.
type Middleware struct {
	inner   reconcile.Reconciler
	cfg     config
	claimer *claim.Claimer
	fin     *finalizer.Finalizer
	metrics *recorder
	renew   *renewals
	// indexed is set once the key index is registered on a manager's cache.
	indexed bool
	// kind identifies the middleware's kind in its manager, once set up.
	kind kindKey
}

var _ reconcile.Reconciler = (*Middleware)(nil)

// Wrap returns a Middleware around inner configured by opts. It validates
// every option once and reports every problem at once (errors.Join); no
// reconcile re-validates them.
func Wrap(inner reconcile.Reconciler, opts ...Option) (*Middleware, error) {
	c := config{metrics: true}
	for _, opt := range opts {
		opt(&c)
	}
	var errs []error
	if inner == nil {
		errs = append(errs, errors.New("inner reconciler: nil"))
	}
	if err := c.validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("configuring claim middleware: %w", errors.Join(errs...))
	}
	m := &Middleware{inner: inner, cfg: c, claimer: c.claimer}
	if m.claimer == nil {
		cfg := *c.claimCfg
		if cfg.Set == "" {
			// Two middlewares for one kind have different names (their key
			// indexes would collide otherwise), so the name keeps their
			// records apart.
			cfg.Set = backends.LabelValue(c.name)
		}
		opts := slices.Clip(c.claimOpts)
		if c.fairness {
			opts = append(opts, claim.WithSiblings(claim.SiblingsFunc(m.siblings)))
		}
		if c.manager != nil {
			dc, err := discovery.NewDiscoveryClientForConfig(c.manager.GetConfig())
			if err != nil {
				return nil, fmt.Errorf("configuring claim middleware: building a discovery client: %w", err)
			}
			opts = append(opts, claim.WithServerVersion(dc), claim.WithCachedReader(c.manager.GetClient()))
		}
		cl, err := claim.New(c.apiReader, c.client, cfg, opts...)
		if err != nil {
			return nil, fmt.Errorf("configuring claim middleware: %w", err)
		}
		m.claimer = cl
	}
	if c.renewal != nil {
		r, err := newRenewals(m.claimer, *c.renewal)
		if err != nil {
			return nil, fmt.Errorf("configuring claim middleware: %w", err)
		}
		m.renew = r
		if c.manager != nil {
			if err := c.manager.Add(manager.RunnableFunc(m.Start)); err != nil {
				return nil, fmt.Errorf("configuring claim middleware: adding the renewals to the manager: %w", err)
			}
		}
	}
	fin, err := finalizer.New(c.finalizer, c.client, c.apiReader)
	if err != nil {
		return nil, fmt.Errorf("configuring claim middleware: %w", err)
	}
	m.fin = fin
	if c.metrics {
		m.metrics = newRecorder(c.name)
	}
	return m, nil
}

// Start blocks until ctx ends, then stops every renewal of [WithRenewal] and
// refuses new ones. [FromManager] adds it to the manager; a middleware built
// without one runs it itself, or its renewals end only with their claims.
func (m *Middleware) Start(ctx context.Context) error {
	<-ctx.Done()
	m.renew.close()
	return nil
}

// Claimer returns the Claimer the middleware acquires with, for code that
// needs to read who holds a key.
func (m *Middleware) Claimer() *claim.Claimer { return m.claimer }

// errStaleRead marks a status write refused because the object changed since
// it was read, most often because the cache has not yet seen the
// middleware's own last write.
var errStaleRead = errors.New("object changed since it was read")

// Reconcile acquires the object's keys and calls the inner reconciler as
// the package documentation describes.
func (m *Middleware) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx).WithName("claim")
	res, err := m.reconcile(log.IntoContext(ctx, logger), ctx, req)
	if errors.Is(err, errStaleRead) {
		// Not a failure: read again once the cache caught up, without the
		// error backoff and its log line.
		logger.V(1).Info("status write refused by its optimistic lock; reading again", "error", err.Error())
		return reconcile.Result{RequeueAfter: staleReadRequeue}, nil
	}
	return res, err
}

// namedKey is one key an object names: as its keys function gave it, and
// normalized. Only raw is ever handed to the Claimer, which normalizes once.
type namedKey struct{ raw, norm string }

// pass is what one reconcile decided, from what the API server said.
type pass struct {
	obj  client.Object
	self claim.Holder
	keys []namedKey
	// granted are the keys acquired, in key order: all of them, or the
	// prefix before blocked.
	granted []heldKey
	// blocked is the outcome of the first key not granted, nil when every
	// key is.
	blocked *claim.Outcome
	// giveUp are records of the object it may not use in this pass: keys
	// it no longer names, and while parked the keys after the blocked one.
	// They are released after an inner pass that was told of them succeeds.
	giveUp []claim.Record
	// was is what the claim condition said when the pass began.
	was previous
}

type heldKey struct {
	raw string
	o   claim.Outcome
}

// reconcile is one pass: keys → finalizer → acquire → condition → inner →
// release. Every decision comes from what the API server says now; nothing
// kept in memory between passes decides anything. userCtx is the caller's
// context, with its logger, for the inner reconciler.
func (m *Middleware) reconcile(ctx, userCtx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := newObject(m.cfg.prototype)
	if err := m.cfg.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			m.forget(req)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading %s: %w", req.NamespacedName, err)
	}
	self, err := m.claimer.HolderOf(obj)
	if err != nil {
		return reconcile.Result{}, err
	}
	if obj.GetDeletionTimestamp() != nil {
		return m.finalize(ctx, userCtx, req, obj, self)
	}
	p := &pass{obj: obj, self: self, was: m.previous(obj)}
	mutant.Do(mutant.MustTellInMemory, func() { p.was = m.rememberedPrevious(req, p.was) })
	gen := obj.GetGeneration()

	p.keys, err = m.keysOf(ctx, obj)
	if status := apierrors.APIStatus(nil); errors.As(err, &status) {
		// The keys function could not read what it needed: a fault of the API
		// server's or the operator's, not of the spec. Retry.
		return m.claimError(ctx, userCtx, req, p, err)
	}
	if err != nil {
		// What the object names is unknown: keep what it holds, act on
		// nothing, and wait for the spec to be fixed.
		return m.parked(ctx, userCtx, req, p, conditions.New(m.cfg.condType, conditions.ReasonInvalidKey, m.invalidMessage(err), gen))
	}
	if len(p.keys) > 0 {
		// Before the first claim write: a claim written for an object without
		// the finalizer would leak when the object is deleted.
		if _, err := m.fin.Add(ctx, obj); err != nil {
			return reconcile.Result{}, err
		}
		if obj.GetGeneration() != gen {
			// The finalizer write met a newer spec and read it: the keys
			// were computed from the old one. Decide again from the new.
			return reconcile.Result{RequeueAfter: staleReadRequeue}, nil
		}
	}
	holdings, err := m.claimer.CachedHoldings(ctx, self)
	if err != nil {
		return m.claimError(ctx, userCtx, req, p, fmt.Errorf("listing the claims %s holds: %w", req.NamespacedName, err))
	}
	for _, k := range p.keys {
		o, err := m.acquire(ctx, k.raw, self)
		if err != nil {
			m.metrics.setHeld(req.NamespacedName, len(p.granted))
			if errors.Is(err, claim.ErrInvalidKey) {
				return m.parked(ctx, userCtx, req, p, conditions.New(m.cfg.condType, conditions.ReasonInvalidKey, m.invalidMessage(err), gen))
			}
			return m.claimError(ctx, userCtx, req, p, err)
		}
		o = redact(m.cfg.disclosure, o, self)
		if !o.Granted() {
			p.blocked = &o
			break
		}
		p.granted = append(p.granted, heldKey{raw: k.raw, o: o})
	}
	if p.blocked != nil && p.blocked.Reason == claim.ReasonNotFirst {
		// The object yields a free key to an older one, which may be
		// waiting for a key this object holds: yielding while holding
		// would deadlock, so it yields everything.
		for _, h := range p.granted {
			if !slices.ContainsFunc(holdings, func(r claim.Record) bool { return r.Key == h.o.Key }) {
				holdings = append(holdings, h.o.Record)
			}
		}
		p.granted = nil
	}
	m.metrics.setHeld(req.NamespacedName, len(p.granted))
	p.giveUp = giveUp(holdings, p.granted, m.sharesKind())
	if p.blocked != nil {
		return m.parked(ctx, userCtx, req, p, conditions.ForOutcome(m.cfg.condType, *p.blocked, gen))
	}
	return m.granted(ctx, userCtx, req, p)
}

// giveUp returns the holdings that are not among the keys granted in this
// pass: keys no longer named, and keys after the one a parked object waits
// for. Keeping only a prefix of the sorted keys while waiting is what makes
// waiting deadlock-free whatever the key sets were before: an object never
// holds a key while it waits for a smaller one.
//
// A record without a claim set (written before sets existed) is given up
// only when keepSetless is false: when another middleware reconciles the
// same kind in this manager, it may be that middleware's. The deletion path
// releases it either way.
func giveUp(holdings []claim.Record, granted []heldKey, keepSetless bool) []claim.Record {
	var out []claim.Record
	for _, rec := range holdings {
		if rec.Set == "" && keepSetless {
			continue
		}
		if !slices.ContainsFunc(granted, func(h heldKey) bool { return h.o.Key == rec.Key }) {
			out = append(out, rec)
		}
	}
	return out
}

// granted runs a pass in which the object holds every key it names.
func (m *Middleware) granted(ctx, userCtx context.Context, req reconcile.Request, p *pass) (reconcile.Result, error) {
	norms := make([]string, len(p.keys))
	for i, k := range p.keys {
		norms[i] = k.norm
	}
	cond := conditions.ForKeys(m.cfg.condType, norms, p.obj.GetGeneration())
	if _, err := m.setCondition(ctx, p.obj, cond); err != nil {
		return reconcile.Result{}, err
	}
	m.grantEvents(p.obj, p.granted)
	if p.was.mayHaveHeld() && p.was.current {
		m.regrantEvents(p.obj, p.granted, p.was.failed)
	}

	grants := make([]Grant, len(p.granted))
	for i, h := range p.granted {
		grants[i] = Grant{Key: h.o.Key, Token: h.o.Token}
	}
	handovers, err := m.planHandovers(ctx, p.obj, p.self, p.granted)
	if err != nil {
		return reconcile.Result{}, err
	}
	holds, err := m.renew.ensure(ctx, req.NamespacedName, p.self, p.granted)
	if err != nil {
		return reconcile.Result{}, err
	}
	m.renew.stopExcept(req.NamespacedName, norms...)
	innerCtx, stop := guard(userCtx, holds)
	state := State{Granted: true, Grants: grants, Releasing: grantsOf(p.giveUp), Handovers: handovers, Condition: cond}
	mutant.Do(mutant.ReleaseBeforeInner, func() { _ = m.release(ctx, p, "before its inner pass") })
	res, err := m.inner.Reconcile(m.innerContext(innerCtx, state), req)
	stop()
	if err != nil {
		mutant.Do(mutant.ReleaseAfterFailedInner, func() { _ = m.release(ctx, p, "after a failed inner pass") })
		// The inner pass did not finish: keys it gives up may still be in
		// use by its old workloads, and keys it hands over may not be free
		// of them yet. Keep them.
		return res, err
	}
	if len(handovers) > 0 && res.IsZero() {
		if err := m.commitHandovers(ctx, p.obj, p.self, handovers); err != nil {
			return reconcile.Result{}, err
		}
	}
	return res, m.release(ctx, p, "which it no longer names")
}

// parked runs a pass in which the object does not hold every key: the
// condition, events, the inner reconciler in parked mode when it must or
// may run, and the release of what the object gave up.
func (m *Middleware) parked(ctx, userCtx context.Context, req reconcile.Request, p *pass, cond metav1.Condition) (reconcile.Result, error) {
	reason := conditions.Reason(cond.Reason)
	changed, err := m.setCondition(ctx, p.obj, cond)
	if err != nil {
		return reconcile.Result{}, err
	}
	if changed {
		m.metrics.observeParked(reason)
		eventType := corev1.EventTypeNormal
		if reason.Priority() >= conditions.ReasonClaimError.Priority() {
			eventType = corev1.EventTypeWarning
		}
		if p.was.mayHaveHeld() && !isInvalid(reason) {
			m.event(p.obj, corev1.EventTypeWarning, EventLost, ActionPark, "Lost its claim: "+cond.Message)
		} else {
			m.event(p.obj, eventType, EventReason(reason), ActionPark, cond.Message)
		}
	}
	m.grantEvents(p.obj, p.granted)
	// A key of the held prefix stays held while the object waits, so its
	// renewal goes on; every other hold ends.
	if _, err := m.renew.ensure(ctx, req.NamespacedName, p.self, p.granted); err != nil {
		return reconcile.Result{}, err
	}
	kept := make([]string, len(p.granted))
	for i, h := range p.granted {
		kept[i] = h.o.Key
	}
	m.renew.stopExcept(req.NamespacedName, kept...)

	after := m.cfg.parkedRequeue
	if reason == conditions.ReasonWaitingForHandover {
		after = m.cfg.waitRequeue
	}
	if r := m.cfg.renewal; r != nil && reason == conditions.ReasonParked && after > r.Duration {
		// A holder that stops renewing sends no event: only asking again
		// once the lease duration passed notices that it expired.
		after = r.Duration
	}
	res := reconcile.Result{RequeueAfter: after}

	// The inner reconciler must run when the object has to stop using keys:
	// it just lost one, or it gives some up. Otherwise the parked mode
	// decides.
	mutant.Do(mutant.LostKeyNeverTold, func() { p.was = previous{} })
	mutant.Do(mutant.ReleaseBeforeInner, func() { _ = m.release(ctx, p, "before its inner pass") })
	if m.cfg.parkedMode == RunInnerWhileParked || p.was.mayHaveHeld() || len(p.giveUp) > 0 {
		state := State{Releasing: grantsOf(p.giveUp), Condition: cond}
		inner, err := m.inner.Reconcile(m.innerContext(userCtx, state), req)
		if err != nil {
			mutant.Do(mutant.ReleaseAfterFailedInner, func() { _ = m.release(ctx, p, "after a failed inner pass") })
			return inner, err
		}
		if inner.RequeueAfter > 0 && inner.RequeueAfter < after {
			res.RequeueAfter = inner.RequeueAfter
		}
	}
	return res, m.release(ctx, p, "which it gave up while it waits")
}

// release frees the records the pass gave up, after the inner pass that was
// told of them succeeded. Each is re-read and deleted fenced on that read.
func (m *Middleware) release(ctx context.Context, p *pass, why string) error {
	if len(p.giveUp) == 0 {
		return nil
	}
	released, err := m.claimer.ReleaseRecords(ctx, p.self, p.giveUp...)
	if len(released) > 0 {
		m.event(p.obj, corev1.EventTypeNormal, EventReleased, ActionRelease, boundNote("Released "+quoteKeys(released)+", "+why+"."))
	}
	if err != nil {
		return fmt.Errorf("releasing claims of %s: %w", client.ObjectKeyFromObject(p.obj), err)
	}
	return nil
}

// invalidMessage is the InvalidKey message of err: the error, with any URL
// user info redacted whatever the disclosure (a key normalizer or keys function may quote a raw
// reference).
func (m *Middleware) invalidMessage(err error) string { return sentence(claim.Redact(err.Error())) }

// claimError shows an error that kept the claim from being judged as the
// ClaimError condition, tells the inner reconciler when it was acting until
// now or runs while parked (parked: it may not act on a claim nobody could
// judge, and its own summary must not stay True), and returns the error for
// the controller to retry.
func (m *Middleware) claimError(ctx, userCtx context.Context, req reconcile.Request, p *pass, err error) (reconcile.Result, error) {
	cond := conditions.New(m.cfg.condType, conditions.ReasonClaimError, errorMessage(m.cfg.disclosure, err), p.obj.GetGeneration())
	if _, werr := m.setCondition(ctx, p.obj, cond); werr != nil {
		log.FromContext(ctx).Error(werr, "writing the claim condition after an error")
	}
	if m.cfg.parkedMode == RunInnerWhileParked || p.was.claimed {
		if _, ierr := m.inner.Reconcile(m.innerContext(userCtx, State{Condition: cond}), req); ierr != nil {
			log.FromContext(ctx).Error(ierr, "the inner reconciler's pass after a claim error failed")
		}
	}
	return reconcile.Result{}, err
}

// previous is what an object's claim condition said when a pass began:
// the only memory of an earlier pass the middleware has, and it is on the
// object, in the API server.
type previous struct {
	claimed bool // True, reason Claimed
	failed  bool // False, reason ClaimError: it may have held every key before
	// current: the condition was computed for the object's current
	// generation, so its key set has not changed since.
	current bool
}

// mayHaveHeld reports whether the object may have been acting for its keys
// until this pass: it must be told to stop (a parked inner pass) and told
// that it lost them.
func (p previous) mayHaveHeld() bool { return p.claimed || p.failed }

func (m *Middleware) previous(obj client.Object) previous {
	conds, err := conditionsOf(obj)
	if err != nil {
		return previous{}
	}
	c := meta.FindStatusCondition(*conds, string(m.cfg.condType))
	if c == nil {
		return previous{}
	}
	return previous{
		claimed: c.Status == metav1.ConditionTrue && c.Reason == string(conditions.ReasonClaimed),
		failed:  c.Reason == string(conditions.ReasonClaimError),
		current: c.ObservedGeneration == obj.GetGeneration(),
	}
}

// conditionOf returns obj's claim condition as read, zero when it has none.
func (m *Middleware) conditionOf(obj client.Object) metav1.Condition {
	conds, err := conditionsOf(obj)
	if err != nil {
		return metav1.Condition{}
	}
	if c := meta.FindStatusCondition(*conds, string(m.cfg.condType)); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func isInvalid(r conditions.Reason) bool {
	return r == conditions.ReasonInvalidKey || r == conditions.ReasonClaimError
}

// keysOf computes obj's keys: each normalized once for sorting and
// de-duplication, in normalized order.
func (m *Middleware) keysOf(ctx context.Context, obj client.Object) ([]namedKey, error) {
	raw, err := m.cfg.keys(ctx, obj)
	if err != nil {
		return nil, fmt.Errorf("computing claim keys: %w", err)
	}
	if len(raw) > m.cfg.maxKeys {
		return nil, fmt.Errorf("%w: the object names %d keys, at most %d are allowed (claimmw.WithMaxKeys)", claim.ErrInvalidKey, len(raw), m.cfg.maxKeys)
	}
	keys := make([]namedKey, 0, len(raw))
	for _, k := range raw {
		norm, err := m.claimer.NormalizeKey(k)
		if err != nil {
			return nil, err
		}
		keys = append(keys, namedKey{raw: k, norm: norm})
	}
	slices.SortFunc(keys, func(a, b namedKey) int { return strings.Compare(a.norm, b.norm) })
	return slices.CompactFunc(keys, func(a, b namedKey) bool { return a.norm == b.norm }), nil
}

func (m *Middleware) acquire(ctx context.Context, key string, self claim.Holder) (claim.Outcome, error) {
	start := time.Now()
	_, o, err := m.claimer.Acquire(ctx, key, self)
	m.metrics.observeAcquire(o, err, time.Since(start))
	log.FromContext(ctx).V(1).Info("acquired claim", "claimKey", o.Key, "reason", string(o.Reason), "error", err)
	return o, err
}

// finalize runs the deletion path: the inner reconciler, told which keys the
// object still holds, then one release sweep, then the finalizer comes off.
// A deleted object never acquires.
func (m *Middleware) finalize(ctx, userCtx context.Context, req reconcile.Request, obj client.Object, self claim.Holder) (reconcile.Result, error) {
	// Whether or not the finalizer is still there (a person may have removed
	// it while another finalizer keeps the object): the inner pass cleans up
	// only what the object holds.
	holdings, err := m.deletionHoldings(ctx, obj, self)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading the claims of %s before its deletion: %w", req.NamespacedName, err)
	}
	res, err := m.inner.Reconcile(m.innerContext(userCtx, State{Deleting: true, Grants: grantsOf(holdings), Condition: m.conditionOf(obj)}), req)
	if err != nil {
		return res, err
	}
	// A deleted object acts no more: stop renewing before the release.
	m.renew.stopExcept(req.NamespacedName)
	if len(holdings) > 0 {
		released, err := m.claimer.ReleaseRecords(ctx, self, holdings...)
		if len(released) > 0 {
			m.event(obj, corev1.EventTypeNormal, EventReleased, ActionRelease, boundNote("Released "+quoteKeys(released)+" before deletion."))
		}
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("releasing the claims of %s before its deletion: %w", req.NamespacedName, err)
		}
		// The objects waiting for these keys are woken by their release.
		// The sweep that lists every record of the object (a List the API
		// server may hold up to 100 ms until its watch cache is current)
		// and the finalizer follow in a later pass, after theirs.
		return reconcile.Result{RequeueAfter: sweepAfterRelease}, nil
	}
	release := func(ctx context.Context) error {
		if err := m.claimer.Release(ctx, self); err != nil {
			return fmt.Errorf("releasing claims: %w", err)
		}
		return nil
	}
	if !m.fin.Has(obj) {
		m.forget(req)
		return res, nil
	}
	if _, err := m.fin.Finalize(ctx, obj, release); err != nil {
		return reconcile.Result{}, err
	}
	m.forget(req)
	return res, nil
}

// sweepAfterRelease is how long a deleted object that released its keys
// waits before its last pass, so that the passes of the objects its release
// woke come first.
const sweepAfterRelease = 50 * time.Millisecond

// deletionHoldings returns the records the object being deleted holds, read
// uncached: one Get per key it names, and, when the cache shows a record of
// it for another key (or its keys cannot be computed), one List of its
// records. A Get is answered at once; an uncached List may wait for the API
// server's watch cache.
func (m *Middleware) deletionHoldings(ctx context.Context, obj client.Object, self claim.Holder) ([]claim.Record, error) {
	keys, kerr := m.keysOf(ctx, obj)
	cached, err := m.claimer.CachedHoldings(ctx, self)
	if err != nil {
		return nil, err
	}
	named := func(r claim.Record) bool {
		return slices.ContainsFunc(keys, func(k namedKey) bool { return k.norm == r.Key })
	}
	if kerr != nil || !all(cached, named) {
		return m.claimer.Holdings(ctx, self)
	}
	set := m.claimer.Config().Set
	var out []claim.Record
	for _, k := range keys {
		rec, err := m.claimer.Current(ctx, k.raw)
		if err != nil {
			return nil, err
		}
		if rec.Ours() && rec.Holder.Is(self) && (rec.Set == "" || rec.Set == set) {
			out = append(out, rec)
		}
	}
	return out, nil
}

func all[T any](s []T, f func(T) bool) bool {
	for _, v := range s {
		if !f(v) {
			return false
		}
	}
	return true
}

func (m *Middleware) forget(req reconcile.Request) {
	m.renew.stopExcept(req.NamespacedName)
	m.metrics.setHeld(req.NamespacedName, 0)
}

// innerContext is the context the inner reconciler runs with: the State,
// and what FencedClient needs.
func (m *Middleware) innerContext(ctx context.Context, s State) context.Context {
	return withFencing(withState(ctx, s), fencing{client: m.cfg.client, reader: m.cfg.apiReader})
}

func grantsOf(recs []claim.Record) []Grant {
	if len(recs) == 0 {
		return nil
	}
	out := make([]Grant, len(recs))
	for i, r := range recs {
		out[i] = Grant{Key: r.Key, Token: r.Token}
	}
	return out
}

// setCondition sets cond on obj and writes the status only when it changed,
// with an optimistic lock: the conditions list is written whole, so a write
// computed from a stale read must not replace a newer one.
func (m *Middleware) setCondition(ctx context.Context, obj client.Object, cond metav1.Condition) (bool, error) {
	base, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return false, fmt.Errorf("copying %T: not a client.Object", obj)
	}
	cond.Message = conditions.BoundMessage(cond.Message)
	changed, err := setConditionOn(obj, cond)
	if err != nil || !changed {
		return false, err
	}
	patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	if err := m.cfg.client.Status().Patch(ctx, obj, patch); err != nil {
		if apierrors.IsConflict(err) {
			err = fmt.Errorf("%w: %w", errStaleRead, err)
		}
		return false, fmt.Errorf("writing condition %s=%s (%s) on %s: %w", cond.Type, cond.Status, cond.Reason, client.ObjectKeyFromObject(obj), err)
	}
	log.FromContext(ctx).V(1).Info("wrote claim condition", "status", cond.Status, "reason", cond.Reason)
	return true, nil
}

func setConditionOn(obj client.Object, cond metav1.Condition) (bool, error) {
	if _, ok := obj.(StatusConditionsOwner); !ok {
		if c, ok := obj.(Conditioned); ok {
			conds := c.GetConditions()
			changed := conditions.Set(&conds, cond)
			if changed {
				c.SetConditions(conds)
			}
			return changed, nil
		}
	}
	conds, err := conditionsOf(obj)
	if err != nil {
		return false, err
	}
	return conditions.Set(conds, cond), nil
}

// grantEvents records the grants of this pass that changed something.
func (m *Middleware) grantEvents(obj client.Object, granted []heldKey) {
	for _, h := range granted {
		if ev := conditions.GrantEvent(h.o.Reason); ev != "" {
			m.event(obj, corev1.EventTypeNormal, EventReason(ev), ActionAcquire, h.o.Message)
		}
	}
}

// regrantEvents tells of keys granted afresh (a new record) to an object
// whose condition said, for its current spec, that it held them: their
// record was deleted or taken from outside, and the object holds them again
// under a new token. After a claim error the object may not have held them
// before, and the note says so.
func (m *Middleware) regrantEvents(obj client.Object, granted []heldKey, afterError bool) {
	for _, h := range granted {
		if conditions.GrantEvent(h.o.Reason) == "" {
			continue
		}
		note := fmt.Sprintf("Its record of %q was gone; it acquired the key again, with token %s.", h.o.Key, h.o.Token)
		if afterError {
			note = fmt.Sprintf("After a claim error it acquired %q, with token %s; if it held the key before, its record was gone.", h.o.Key, h.o.Token)
		}
		m.event(obj, corev1.EventTypeWarning, EventLost, ActionAcquire, note)
	}
}

func (m *Middleware) event(obj client.Object, eventType string, reason EventReason, action EventAction, note string) {
	if m.cfg.recorder == nil {
		return
	}
	m.cfg.recorder.Eventf(obj, nil, eventType, string(reason), string(action), "%s", boundNote(note))
}

// maxEventNote is the longest note the events API accepts.
const maxEventNote = 1024

// boundNote bounds an event note to what the events API accepts; an event
// refused for its length would be lost.
func boundNote(s string) string { return conditions.Truncate(s, maxEventNote) }

// Event notes quote at most eventKeys keys of at most eventKeyLength bytes
// each, so that with their words they stay within maxEventNote and keep
// the count of what they left out.
const (
	eventKeys      = 3
	eventKeyLength = 160
)

// quoteKeys quotes a few keys, each cut short, for an event note, and counts
// the rest.
func quoteKeys(keys []string) string {
	cut := make([]string, len(keys))
	for i, k := range keys {
		cut[i] = conditions.Truncate(claim.Redact(k), eventKeyLength)
	}
	return conditions.QuoteKeys(cut, eventKeys)
}

// sentence makes an error text a condition message: capitalized, with a
// full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}
