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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
	"github.com/ocf-claim/claim/pkg/finalizer"
)

// Event reasons the middleware records on the object. Parked states are
// recorded under their condition reason (conditions.ReasonParked and the
// others) when the condition changes to them.
const (
	// EventClaimed: the object acquired a free key.
	EventClaimed = "Claimed"
	// EventTakenOver: the object took a key over from a holder that is gone.
	EventTakenOver = "TakenOver"
	// EventReleased: the object released keys it no longer names, or every
	// key before its deletion.
	EventReleased = "Released"
	// EventHandoverPrepared: the object prepared the handover of a key to
	// the successor its HandoverFunc names.
	EventHandoverPrepared = "HandoverPrepared"
	// EventHandoverAborted: the object names no successor any more and
	// cleared the prepared handover.
	EventHandoverAborted = "HandoverAborted"
	// EventHandedOver: the object committed a handover; the successor
	// holds the key.
	EventHandedOver = "HandedOver"
)

// event actions, as the events API asks for a verb.
const (
	actionAcquire  = "Acquire"
	actionRelease  = "Release"
	actionPark     = "Park"
	actionHandover = "Handover"
)

// missedWakeRequeue is how soon an object is reconciled again when the
// record it now waits on changed while it was being reconciled: the wake-up
// came before it was registered as waiting.
const missedWakeRequeue = 100 * time.Millisecond

// handedOverRequeue is how soon an object that committed a handover is
// reconciled again, so that its condition stops saying it holds the key.
const handedOverRequeue = 50 * time.Millisecond

// staleReadRequeue is how soon an object whose status write met a newer
// version is read again.
const staleReadRequeue = 50 * time.Millisecond

// Middleware is a reconcile.Reconciler that acquires an object's claim keys
// before it calls the inner reconciler. Build it with [Wrap]. It is safe for
// concurrent use by a controller's workers.
type Middleware struct {
	inner   reconcile.Reconciler
	cfg     config
	claimer *claim.Claimer
	fin     *finalizer.Finalizer
	metrics *recorder
	track   *tracker
	renew   *renewals
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
	m := &Middleware{inner: inner, cfg: c, claimer: c.claimer, track: newTracker()}
	if m.claimer == nil {
		opts := c.claimOpts
		if c.manager != nil {
			dc, err := discovery.NewDiscoveryClientForConfig(c.manager.GetConfig())
			if err != nil {
				return nil, fmt.Errorf("configuring claim middleware: building a discovery client: %w", err)
			}
			opts = append(slices.Clip(opts), claim.WithServerVersion(dc))
		}
		cl, err := claim.New(c.apiReader, c.client, *c.claimCfg, opts...)
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
	ctx = log.IntoContext(ctx, logger)
	res, err := m.reconcile(ctx, req)
	if errors.Is(err, errStaleRead) {
		// Not a failure: read again once the cache caught up, without the
		// error backoff and its log line.
		logger.V(1).Info("status write refused by its optimistic lock; reading again", "error", err.Error())
		return reconcile.Result{RequeueAfter: staleReadRequeue}, nil
	}
	return res, err
}

func (m *Middleware) reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	snap := m.track.snapshot()

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
		return m.finalize(ctx, req, obj, self)
	}

	gen := obj.GetGeneration()
	keys, err := m.keysOf(ctx, obj)
	if err != nil {
		cond := conditions.New(m.cfg.condType, conditions.ReasonInvalidKey, sentence(err.Error()), gen)
		return m.parked(ctx, req, obj, cond, nil, snap)
	}
	if len(keys) > 0 {
		// Before the first claim write: a claim written for an object without
		// the finalizer would leak when the object is deleted.
		if _, err := m.fin.Add(ctx, obj); err != nil {
			return reconcile.Result{}, err
		}
	}

	grants := make([]Grant, 0, len(keys))
	held := make([]claim.Outcome, 0, len(keys))
	var happened []claim.Outcome
	for _, key := range keys {
		o, err := m.acquire(ctx, key, self)
		if err != nil {
			m.track.setHeld(req.NamespacedName, len(grants), m.metrics)
			if errors.Is(err, claim.ErrInvalidKey) {
				return m.parked(ctx, req, obj, conditions.New(m.cfg.condType, conditions.ReasonInvalidKey, sentence(err.Error()), gen), nil, snap)
			}
			// The claim could not be judged: say so, and let the controller
			// retry with its backoff.
			cond := conditions.New(m.cfg.condType, conditions.ReasonClaimError, sentence(err.Error()), gen)
			if _, werr := m.setCondition(ctx, obj, cond); werr != nil {
				logger.Error(werr, "writing the claim condition after an acquire error")
			}
			return reconcile.Result{}, err
		}
		if !o.Granted() {
			m.renew.stop(req.NamespacedName, key)
			m.track.setHeld(req.NamespacedName, len(grants), m.metrics)
			m.grantEvents(obj, happened)
			return m.parked(ctx, req, obj, conditions.ForOutcome(m.cfg.condType, o, gen), &o, snap)
		}
		grants = append(grants, Grant{Key: o.Key, Token: o.Token})
		held = append(held, o)
		if o.Reason != claim.ReasonHeld {
			happened = append(happened, o)
		}
	}
	m.track.setHeld(req.NamespacedName, len(grants), m.metrics)
	m.track.stopWaiting(req.NamespacedName)

	cond := conditions.ForKeys(m.cfg.condType, keys, gen)
	if _, err := m.setCondition(ctx, obj, cond); err != nil {
		return reconcile.Result{}, err
	}
	m.grantEvents(obj, happened)

	handovers, err := m.planHandovers(ctx, obj, self, held)
	if err != nil {
		return reconcile.Result{}, err
	}
	holds, err := m.renew.ensure(ctx, req.NamespacedName, self, held)
	if err != nil {
		return reconcile.Result{}, err
	}
	innerCtx, release := guard(ctx, holds)
	innerCtx = withFencing(withState(innerCtx, State{Granted: true, Grants: grants, Handovers: handovers, Condition: cond}),
		fencing{client: m.cfg.client, reader: m.cfg.apiReader})
	res, err := m.inner.Reconcile(innerCtx, req)
	release()
	if err != nil {
		// The inner pass did not finish: claims the object no longer names
		// may still be in use by its old workloads, and keys it hands over
		// may not be free of them yet. Keep them.
		return res, err
	}
	if len(handovers) > 0 && res.IsZero() {
		if err := m.commitHandovers(ctx, obj, self, handovers); err != nil {
			return reconcile.Result{}, err
		}
		res = reconcile.Result{RequeueAfter: handedOverRequeue}
	}
	if err := m.sweep(ctx, obj, self, keys); err != nil {
		return res, err
	}
	m.renew.stopExcept(req.NamespacedName, keys...)
	return res, nil
}

// keysOf computes obj's keys, normalized, without duplicates, sorted.
func (m *Middleware) keysOf(ctx context.Context, obj client.Object) ([]string, error) {
	raw, err := m.cfg.keys(ctx, obj)
	if err != nil {
		return nil, fmt.Errorf("computing claim keys: %w", err)
	}
	keys := make([]string, 0, len(raw))
	for _, k := range raw {
		norm, err := m.claimer.NormalizeKey(k)
		if err != nil {
			return nil, err
		}
		keys = append(keys, norm)
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

func (m *Middleware) acquire(ctx context.Context, key string, self claim.Holder) (claim.Outcome, error) {
	start := time.Now()
	_, o, err := m.claimer.Acquire(ctx, key, self)
	m.metrics.observeAcquire(o, err, time.Since(start))
	log.FromContext(ctx).V(1).Info("acquired claim", "claimKey", key, "reason", string(o.Reason), "error", err)
	return o, err
}

// parked records a pass in which the object does not hold every key: the
// condition, the wake-up registration, an event when the state changed, and
// the inner reconciler in parked mode when so configured.
func (m *Middleware) parked(ctx context.Context, req reconcile.Request, obj client.Object, cond metav1.Condition, o *claim.Outcome, snap uint64) (reconcile.Result, error) {
	reason := conditions.Reason(cond.Reason)
	changed, err := m.setCondition(ctx, obj, cond)
	if err != nil {
		return reconcile.Result{}, err
	}
	if changed {
		m.metrics.observeParked(reason)
		eventType := corev1.EventTypeNormal
		if reason.Priority() >= conditions.ReasonClaimError.Priority() {
			eventType = corev1.EventTypeWarning
		}
		m.event(obj, eventType, string(reason), actionPark, cond.Message)
	}

	after := m.cfg.parkedRequeue
	if reason == conditions.ReasonWaitingForHandover {
		after = m.cfg.waitRequeue
	}
	if r := m.cfg.renewal; r != nil && reason == conditions.ReasonParked && after > r.Duration {
		// A holder that stops renewing sends no event: only asking again
		// once the lease duration passed notices that it expired.
		after = r.Duration
	}
	var record *claim.Record
	if o != nil && o.Record.Ref.Name != "" {
		record = &o.Record
	}
	if m.track.wait(req.NamespacedName, record, reason == conditions.ReasonWaitingForHandover, snap) {
		log.FromContext(ctx).V(1).Info("the awaited claim record changed during this pass; reconciling again soon")
		after = missedWakeRequeue
	}

	res := reconcile.Result{RequeueAfter: after}
	if m.cfg.parkedMode == RunInnerWhileParked {
		inner, err := m.inner.Reconcile(withState(ctx, State{Condition: cond}), req)
		if err != nil {
			return inner, err
		}
		if inner.RequeueAfter > 0 && inner.RequeueAfter < after {
			res.RequeueAfter = inner.RequeueAfter
		}
	}
	return res, nil
}

// sweep releases every claim of self that keys no longer names. It lists
// self's records only when the key set differs from the one the last sweep
// of this object kept, so that a steady pass makes no request for it.
func (m *Middleware) sweep(ctx context.Context, obj client.Object, self claim.Holder, keys []string) error {
	nn := client.ObjectKeyFromObject(obj)
	prev, known := m.track.swept(nn, obj.GetUID())
	if known && slices.Equal(prev, keys) {
		return nil
	}
	if err := m.claimer.Release(ctx, self, keys...); err != nil {
		return fmt.Errorf("releasing claims %s no longer names: %w", client.ObjectKeyFromObject(obj), err)
	}
	m.track.setSwept(nn, obj.GetUID(), keys)
	var released []string
	for _, k := range prev {
		if !slices.Contains(keys, k) {
			released = append(released, fmt.Sprintf("%q", k))
		}
	}
	if len(released) > 0 {
		m.event(obj, corev1.EventTypeNormal, EventReleased, actionRelease, "Released "+strings.Join(released, ", ")+", which it no longer names.")
	}
	return nil
}

// finalize runs the deletion path: the inner reconciler, then one release
// sweep, then the finalizer comes off. A deleted object never acquires.
func (m *Middleware) finalize(ctx context.Context, req reconcile.Request, obj client.Object, self claim.Holder) (reconcile.Result, error) {
	res, err := m.inner.Reconcile(ctx, req)
	if err != nil {
		return res, err
	}
	// A deleted object acts no more: stop renewing before the release.
	m.renew.stopExcept(req.NamespacedName)
	removed, err := m.fin.Finalize(ctx, obj, func(ctx context.Context) error {
		if err := m.claimer.Release(ctx, self); err != nil {
			return fmt.Errorf("releasing claims: %w", err)
		}
		return nil
	})
	if err != nil {
		return reconcile.Result{}, err
	}
	if removed {
		m.event(obj, corev1.EventTypeNormal, EventReleased, actionRelease, "Released every claim before deletion.")
	}
	m.forget(req)
	return res, nil
}

func (m *Middleware) forget(req reconcile.Request) {
	m.renew.stopExcept(req.NamespacedName)
	m.track.forget(req.NamespacedName)
	m.track.setHeld(req.NamespacedName, 0, m.metrics)
}

// setCondition sets cond on obj and writes the status only when it changed,
// with an optimistic lock: the conditions list is written whole, so a write
// computed from a stale read must not replace a newer one.
func (m *Middleware) setCondition(ctx context.Context, obj client.Object, cond metav1.Condition) (bool, error) {
	base, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return false, fmt.Errorf("copying %T: not a client.Object", obj)
	}
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
	if c, ok := obj.(Conditioned); ok {
		conds := c.GetConditions()
		changed := conditions.Set(&conds, cond)
		if changed {
			c.SetConditions(conds)
		}
		return changed, nil
	}
	conds, err := conditionsOf(obj)
	if err != nil {
		return false, err
	}
	return conditions.Set(conds, cond), nil
}

// grantEvents records the grants of this pass that changed something.
func (m *Middleware) grantEvents(obj client.Object, happened []claim.Outcome) {
	for _, o := range happened {
		if o.Reason == claim.ReasonTakenOver {
			m.event(obj, corev1.EventTypeNormal, EventTakenOver, actionAcquire, o.Message)
		} else {
			m.event(obj, corev1.EventTypeNormal, EventClaimed, actionAcquire, o.Message)
		}
	}
}

func (m *Middleware) event(obj client.Object, eventType, reason, action, note string) {
	if m.cfg.recorder == nil {
		return
	}
	m.cfg.recorder.Eventf(obj, nil, eventType, reason, action, "%s", note)
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
