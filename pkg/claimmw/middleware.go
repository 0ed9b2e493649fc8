package claimmw

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
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
	// EventHandoverPending: the object's pass moved off a key it hands
	// over, but the successor does not wait for that key yet (it waits for
	// another key first, or has not seen the prepared handover): the key is
	// kept, and the commit is tried again. Recorded on both objects.
	EventHandoverPending EventReason = "HandoverPending"
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
	// lastHolders is the holder each key's record last named, as this
	// process saw the records change; see [Middleware.predecessor].
	lastHolders lastHolders
	// written is what this process last wrote as each object's claim
	// condition; see [writtenConditions].
	written writtenConditions
	// confirmed remembers the objects a pass of this process saw confirmed
	// before they acted.
	confirmed confirmedGrants
	// failed remembers the keys whose record's release failed after a
	// pass that knew it goes succeeded; see [failedReleases].
	failed failedReleases
	// pending are the holders whose commit of a handover this process
	// refused, by successor; see [pendingCommits].
	pending pendingCommits
	// herds holds back the wake-ups of a freed key's namers but the first.
	herds herds
	// waiters receives the objects waiting for a handover that another
	// middleware of the manager wakes (Middleware.wakeWaiting): each
	// middleware's objects go to its own controller's queue.
	waiters chan event.GenericEvent
	// cachedRecords is set when the Claimer's CachedHoldings reads the
	// manager's cache (the middleware built the Claimer on a manager).
	cachedRecords bool
	// indexLog is the logger the cache's index functions compute keys
	// with (they are given no context): what the keys function logs goes
	// to the manager's logger.
	indexLog logr.Logger
}

var _ reconcile.Reconciler = (*Middleware)(nil)

// Wrap returns a Middleware around inner configured by opts. It validates
// every option once and reports every problem at once (errors.Join); no
// reconcile re-validates them.
func Wrap(inner reconcile.Reconciler, opts ...Option) (*Middleware, error) {
	c := config{metrics: true}
	for i, opt := range opts {
		if opt == nil {
			// A conditional option left unset: named, not called.
			c.problems = append(c.problems, fmt.Errorf("options[%d]: nil", i))
			continue
		}
		opt(&c)
	}
	var errs []error
	if inner == nil || isNil(inner) {
		errs = append(errs, errors.New("inner reconciler: nil"))
	}
	if err := c.validate(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("configuring claim middleware: %w", errors.Join(errs...))
	}
	m := &Middleware{inner: inner, cfg: c, claimer: c.claimer, waiters: make(chan event.GenericEvent, waitersBuffer)}
	m.indexLog = log.FromContext(m.outsidePass(context.Background()))
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
		opts = append(opts, claim.WithPredecessors(m.predecessor))
		if c.manager != nil {
			dc, err := discovery.NewDiscoveryClientForConfig(c.manager.GetConfig())
			if err != nil {
				return nil, fmt.Errorf("configuring claim middleware: building a discovery client: %w", err)
			}
			m.cachedRecords = true
			opts = append(opts, claim.WithServerVersion(dc), claim.WithCachedReader(c.manager.GetClient()),
				// Its own kind is watched already: a waiter finds its holder
				// alive without a request per pass.
				claim.WithCachedLiveness(c.prototype))
		}
		cl, err := claim.New(c.apiReader, c.client, cfg, opts...)
		if err != nil {
			return nil, fmt.Errorf("configuring claim middleware: %w", err)
		}
		m.claimer = cl
	}
	if c.renewal != nil {
		r, err := newRenewals(m.claimer, *c.renewal, c.prototype)
		if err != nil {
			return nil, fmt.Errorf("configuring claim middleware: %w", err)
		}
		m.renew = r
	}
	if c.manager != nil {
		if err := c.manager.Add(manager.RunnableFunc(m.Start)); err != nil {
			return nil, fmt.Errorf("configuring claim middleware: adding its start to the manager: %w", err)
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
// With [FromManager], it first lists every record of its claim set once
// (from the cache, and uncached those a cache restricted by Config.Labels
// does not hold) and, beside the first passes and without waiting for
// them, many at once:
//   - with [WithRenewal], resumes the renewals of every record the objects
//     of its kind in the manager's cache hold: a process that starts (a
//     restart, a new leader) renews what its objects hold although its
//     queue may reach an object only after a contender's count of the lease
//     duration has run out;
//   - stamps every record of its set whose labels differ from what it
//     writes (written before Config.Labels were set, or under other
//     HolderLabels values), so that the listings by label of later passes
//     (the give-up rule, the release sweep) find it. Records without a set
//     are stamped by their holder's passes.
func (m *Middleware) Start(ctx context.Context) error {
	if m.cfg.manager != nil {
		go m.resume(m.outsidePass(ctx))
	}
	<-ctx.Done()
	m.renew.close()
	return nil
}

// resume lists every record of the middleware's claim set, resumes their
// renewals (with WithRenewal) and stamps those that lack its labels.
func (m *Middleware) resume(ctx context.Context) {
	byHolder, listed, err := m.claimer.RecordsByHolder(ctx)
	if err != nil {
		// What the cache shows is resumed and stamped all the same; the
		// rest is renewed and stamped from its holder's first pass.
		logError(ctx, err, "listing the claims at start")
		if byHolder == nil {
			// Not even the cache answered: each object's renewals are
			// resumed from its own cached listing.
			listed = false
		}
	}
	if m.renew != nil {
		m.resumeRenewals(ctx, byHolder, listed)
	}
	m.stampAll(ctx, byHolder)
}

// resumeRenewals starts a hold for every record an object of m's kind
// holds: those of byHolder, when listed, or else those its cached listing
// finds. Each is renewed once first, which proves it is still held; a
// record found lost is skipped.
func (m *Middleware) resumeRenewals(ctx context.Context, byHolder map[types.UID][]claim.Record, listed bool) {
	list, err := m.newList()
	if err != nil {
		logError(ctx, err, "resuming the renewals of held claims")
		return
	}
	if err := m.cfg.client.List(ctx, list); err != nil {
		logError(ctx, err, "resuming the renewals of held claims: listing the objects")
		return
	}
	// The objects' renewals run side by side (each object's records one
	// after another): contenders count the lease duration from this
	// process's start while they run, so the time they take must not grow
	// with the number of objects times a write's latency.
	sem := make(chan struct{}, resumeRenewers)
	var wg sync.WaitGroup
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		obj, ok := o.(client.Object)
		if !ok || ctx.Err() != nil {
			return nil
		}
		self, err := m.claimer.HolderOf(obj)
		if err != nil {
			return nil
		}
		var recs []claim.Record
		if listed {
			for _, rec := range byHolder[self.UID] {
				if rec.Holder.Is(self) {
					recs = append(recs, rec)
				}
			}
		} else if recs, err = m.claimer.CachedHoldings(ctx, self); err != nil {
			logError(ctx, err, "resuming the renewals of held claims", "object", client.ObjectKeyFromObject(obj))
			return nil
		}
		if len(recs) == 0 {
			return nil
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			m.renew.keep(ctx, client.ObjectKeyFromObject(obj), self, recs)
		}()
		return nil
	})
	wg.Wait()
}

// stampAll stamps every record of byHolder that lacks the labels the
// middleware writes, resumeRenewers at once. A record renewed since is
// stamped already, and costs one read. A record without a set is left to
// its holder's passes: a stamp writes the set too, and which middleware of
// the kind such a record belongs to only a pass decides.
func (m *Middleware) stampAll(ctx context.Context, byHolder map[types.UID][]claim.Record) {
	sem := make(chan struct{}, resumeRenewers)
	var wg sync.WaitGroup
	for _, held := range byHolder {
		for _, rec := range held {
			if !rec.Unlabelled || rec.Set == "" || ctx.Err() != nil {
				continue
			}
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				if _, err := m.claimer.Restamp(ctx, rec.Holder, rec); err != nil && !errors.Is(err, claim.ErrNotHolder) {
					logError(ctx, err, "stamping a claim at start", "claimKey", claim.Redact(rec.Key))
				}
			}()
		}
	}
	wg.Wait()
}

// resumeRenewers bounds the objects whose renewals resumeRenewals resumes
// at once.
const resumeRenewers = 32

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
	// Also when the pass panics (controller-runtime recovers it): the
	// objects held back behind this one are woken now, not a second later.
	defer m.herds.passEnded(req.NamespacedName)
	res, err := m.reconcile(log.IntoContext(ctx, logger), ctx, req)
	if errors.Is(err, errStaleRead) {
		// Not a failure: read again once the cache caught up, without the
		// error backoff and its log line.
		logger.V(1).Info("status write refused by its optimistic lock; reading again", "error", err.Error())
		return reconcile.Result{RequeueAfter: staleReadRequeue}, nil
	}
	if stopping(ctx, err) {
		// The manager stops: nothing to retry, and no error to log.
		logger.V(1).Info("pass ended by the manager stopping", "error", err.Error())
		return reconcile.Result{}, nil
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
	// kept are records the object holds and keeps without acting for them:
	// on the InvalidKey path, what it held before its keys became unknown;
	// otherwise the blocked key's, held while an earlier holder may still
	// act for it.
	kept []claim.Record
	// was is what the claim condition said when the pass began.
	was previous
	// stale: the cache shows the object Claimed, but the condition this
	// process last wrote for it said otherwise.
	stale bool
	// untold are the keys of giveUp the object never acted for (its
	// condition says it acts for nothing) and another object may still act
	// for: released without telling its reconciler, whose cleanup would
	// touch what the other uses.
	untold []string
	// unconfirmed are the outcomes (as the Claimer gave them, unredacted)
	// of the granted keys the object may start acting for in this pass:
	// before it does, it asks whether an earlier holder still may.
	unconfirmed []claim.Outcome
	// gate is the handover gate's answer about giveUp, asked once after
	// the inner pass told of them succeeded; nil until then.
	gate *gateAnswer
}

// gateAnswer is what the handover gate said about the records a pass gives
// up: those it lets go now, whether it held any back, and the errors of
// asking it.
type gateAnswer struct {
	free    []claim.Record
	waiting bool
	err     error
}

// toldHeldBack asks the handover gate about the records p gives up (once
// per pass) and reports whether it holds back one its inner pass was told
// of: the object's workloads of that key still run, so its condition keeps
// saying it may act (Stopping, or Claimed while its keys change) rather than
// say it stopped and, in the next pass, say again that it may act before it
// is told of the record once more: every pass would write twice while the
// gate stays closed.
func (m *Middleware) toldHeldBack(ctx context.Context, p *pass) bool {
	if len(p.giveUp) == 0 {
		return false
	}
	if p.gate == nil {
		free, waiting, err := m.gated(ctx, p.self, p.giveUp)
		p.gate = &gateAnswer{free: free, waiting: waiting, err: err}
	}
	return slices.ContainsFunc(p.told(), func(r claim.Record) bool {
		return !slices.ContainsFunc(p.gate.free, func(f claim.Record) bool { return f.Key == r.Key })
	})
}

// told returns the records given up that the inner reconciler is told of.
func (p *pass) told() []claim.Record {
	if len(p.untold) == 0 {
		return p.giveUp
	}
	var out []claim.Record
	for _, r := range p.giveUp {
		if !slices.Contains(p.untold, r.Key) {
			out = append(out, r)
		}
	}
	return out
}

// othersActFor returns the keys of recs, records self holds while its
// condition says it acts for nothing, that another object may still act
// for (the predecessor check that decides).
func (m *Middleware) othersActFor(ctx context.Context, self claim.Holder, recs []claim.Record) ([]string, error) {
	var out []string
	for _, r := range recs {
		_, _, ok, err := m.predecessor(confirmingContext(ctx), r.Key, self, claim.Holder{})
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, r.Key)
		}
	}
	return out, nil
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
			forget := m.forgetUnseen
			mutant.Do(mutant.UnseenHolderForgotten, func() { forget = m.forgetByName })
			forget(ctx, req)
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
	if !p.was.mayHaveHeld() && m.written.saidClaimed(req.NamespacedName) {
		// The cache has not caught up with this process's own Claimed
		// write: the object may act, and must be told before it stops.
		p.was.claimed = true
	}
	mutant.Do(mutant.MustTellInMemory, func() { p.was = m.rememberedPrevious(req, p.was) })
	gen := obj.GetGeneration()

	p.keys, err = m.keysOf(ctx, obj)
	if status := apierrors.APIStatus(nil); errors.As(err, &status) {
		// The keys function could not read what it needed: a fault of the API
		// server's or the operator's, not of the spec. Retry.
		return m.claimError(ctx, userCtx, req, p, err)
	}
	if err != nil {
		// What the object names is unknown: keep (and renew) what it holds,
		// act on nothing, and wait for the spec to be fixed.
		kept, _, lerr := m.holdingsOf(ctx, p)
		if lerr != nil {
			// Not knowing what it holds, a parked pass would stop renewing
			// all of it: retry as a claim error, which keeps every hold.
			return m.claimError(ctx, userCtx, req, p, fmt.Errorf("listing the claims %s holds: %w", req.NamespacedName, lerr))
		}
		p.kept = kept
		mutant.Do(mutant.InvalidSpecNeverTold, func() { p.was = previous{} })
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
	holdings, cached, err := m.holdingsOf(ctx, p)
	if err != nil {
		return m.claimError(ctx, userCtx, req, p, fmt.Errorf("listing the claims %s holds: %w", req.NamespacedName, err))
	}
	yield, err := m.yields(ctx, p.keys, self)
	if err != nil {
		return m.claimError(ctx, userCtx, req, p, err)
	}
	if yield != nil {
		// An older object goes first for a free key: yield before writing
		// any record, or every parked pass would create records and
		// release them again.
		y := redact(m.cfg.disclosure, *yield, self)
		p.blocked = &y
	}
	// An object Claimed for exactly these keys acts for them already; any
	// other starts acting for a key in this pass, and asks first whether an
	// earlier holder still does. So does one whose record was written in
	// this pass: its condition is read from a cache that may still show
	// Claimed from before it stopped.
	p.stale = m.claimedFor(m.conditionOf(obj), p.keys) && m.written.staleClaimed(req.NamespacedName)
	// A Claimed that no pass of this process saw confirmed may have been
	// written by a pass (of this process before a restart, or of another)
	// that then found an earlier holder still acting and could not say it
	// waits: it is confirmed again before it counts as acting.
	acting := m.claimedFor(m.conditionOf(obj), p.keys) && !p.stale && m.confirmed.has(req.NamespacedName, self.UID)
	for _, k := range p.keys {
		if p.blocked != nil {
			break
		}
		o, err := m.acquire(ctx, k.raw, self)
		if err != nil {
			m.metrics.setHeld(req.NamespacedName, len(p.granted))
			if errors.Is(err, claim.ErrInvalidKey) {
				p.kept = holdings
				return m.parked(ctx, userCtx, req, p, conditions.New(m.cfg.condType, conditions.ReasonInvalidKey, m.invalidMessage(err), gen))
			}
			return m.claimError(ctx, userCtx, req, p, err)
		}
		if o.Granted() && (!acting || o.Reason != claim.ReasonHeld) {
			// Remembered before it may act (and before the condition that
			// says so is written): a waiter of this process that finds the
			// key erased later reads this object, however far its caches lag.
			m.lastHolders.add(o.Key, req.NamespacedName, self.UID)
			// Asked first about the objects the cache shows acting and the
			// holders remembered, so that the pass stops at the first key an
			// earlier holder may still act for, and a waiter that keeps a
			// record for one does not say Claimed in every pass; asked about
			// every object once the condition that says it may act is written,
			// before it acts (confirmGrants).
			w, wait, err := m.claimer.Predecessor(ctx, o, self)
			if err != nil {
				return m.claimError(ctx, userCtx, req, p, err)
			}
			if wait {
				// It holds the record and keeps it (renewed), but does not act
				// for it until the predecessor stopped: the predecessor, finding
				// the key held by another, is told to stop.
				p.kept = append(p.kept, o.Record)
				o = w
			} else {
				p.unconfirmed = append(p.unconfirmed, o)
			}
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
	p.giveUp = giveUp(holdings, p.granted, func(rec claim.Record) bool { return m.namedByAnother(ctx, obj, rec.Key) })
	p.giveUp = slices.DeleteFunc(p.giveUp, func(r claim.Record) bool {
		return slices.ContainsFunc(p.kept, func(k claim.Record) bool { return k.Key == r.Key })
	})
	if cached && len(p.giveUp) > 0 {
		// The cache may still show a record released since, whose key
		// another object may act for now: the inner pass must not be told
		// to release it (its cleanup would touch what the other uses).
		if p.giveUp, err = m.stillHeld(ctx, self, p.giveUp); err != nil {
			return m.claimError(ctx, userCtx, req, p, err)
		}
	}
	p.giveUp = m.restampUnlabelled(ctx, self, p.giveUp)
	cond := m.conditionOf(obj)
	if p.stale {
		// Its cache still shows Claimed after its own later write that
		// said otherwise: judge as if it may act for everything.
		cond = conditions.New(m.cfg.condType, conditions.ReasonStopping, "", gen)
	}
	if p.untold, err = m.untoldOf(ctx, obj, cond, p.keys, p.giveUp, self); err != nil {
		return m.claimError(ctx, userCtx, req, p, err)
	}
	if p.blocked != nil {
		return m.parked(ctx, userCtx, req, p, conditions.ForOutcome(m.cfg.condType, *p.blocked, gen))
	}
	return m.granted(ctx, userCtx, req, p)
}

// holdingsOf lists the records the object holds, and says whether the list
// came from the manager's cache. While its claim condition speaks of its
// current spec and, if it may act, of exactly the keys it names, from the
// cache: the records of the keys it names were read again by Acquire
// anyway, and the list only tells which others need releasing (each is read
// again before it is given up). After a spec change (or before any
// condition, or while it may act for keys it no longer names), uncached: a
// record written before Config.Labels was set is invisible to a cache
// restricted by them, and a key the object stopped naming is found only by
// this list, which the pass that tells it to stop must see whole.
func (m *Middleware) holdingsOf(ctx context.Context, p *pass) (recs []claim.Record, cached bool, err error) {
	if p.was.current && (!p.was.mayHaveHeld() || m.claimedFor(m.conditionOf(p.obj), p.keys)) {
		recs, err = m.claimer.CachedHoldings(ctx, p.self)
		return recs, true, err
	}
	recs, err = m.claimer.Holdings(ctx, p.self)
	return recs, false, err
}

// restampUnlabelled stamps given-up records that lack the Claimer's labels,
// so that a later pass finds them in a cache restricted by those labels
// if this pass does not release them. A record found lost is dropped: it is
// not the object's to give up any more.
func (m *Middleware) restampUnlabelled(ctx context.Context, self claim.Holder, recs []claim.Record) []claim.Record {
	out := recs[:0]
	for _, rec := range recs {
		if rec.Unlabelled {
			got, err := m.claimer.Restamp(ctx, self, rec)
			switch {
			case errors.Is(err, claim.ErrNotHolder):
				continue
			case err != nil:
				log.FromContext(ctx).Error(err, "stamping a claim record the object gives up with its labels", "claimKey", claim.Redact(rec.Key))
			default:
				rec = got
			}
		}
		out = append(out, rec)
	}
	return out
}

// yields asks, before any key is acquired, whether the object yields one of
// keys to an older object (the fairness pre-filter): the first such
// outcome, or nil.
func (m *Middleware) yields(ctx context.Context, keys []namedKey, self claim.Holder) (*claim.Outcome, error) {
	for _, k := range keys {
		o, ok, err := m.claimer.Yields(ctx, k.raw, self)
		if err != nil {
			return nil, err
		}
		if ok {
			return &o, nil
		}
	}
	return nil, nil
}

// saysSoFenced reports whether a granted pass is certain to write, before
// it acts, a condition that says it may act over one that says it acts for
// nothing, by the cache and by what this process wrote: such a write,
// optimistically locked on the cached object, applies only to the object
// the pass judged from.
func (m *Middleware) saysSoFenced(p *pass, cond metav1.Condition) bool {
	return !p.stale && len(p.granted) > 0 && mayAct(cond) && !mayAct(m.conditionOf(p.obj)) && !p.was.mayHaveHeld()
}

// giveUp returns the holdings that are not among the keys granted in this
// pass: keys no longer named, and keys after the one a parked object waits
// for. Keeping only a prefix of the sorted keys while waiting is what makes
// waiting deadlock-free whatever the key sets were before: an object never
// holds a key while it waits for a smaller one.
//
// A record without a claim set (written before sets existed) is kept when
// theirs reports that another middleware of the kind names its key for the
// object: it may be that middleware's. The deletion path releases it either
// way.
func giveUp(holdings []claim.Record, granted []heldKey, theirs func(claim.Record) bool) []claim.Record {
	var out []claim.Record
	for _, rec := range holdings {
		if slices.ContainsFunc(granted, func(h heldKey) bool { return h.o.Key == rec.Key }) {
			continue
		}
		if rec.Set == "" && theirs(rec) {
			continue
		}
		out = append(out, rec)
	}
	return out
}

// granted runs a pass in which the object holds every key it names.
func (m *Middleware) granted(ctx, userCtx context.Context, req reconcile.Request, p *pass) (reconcile.Result, error) {
	norms := make([]string, len(p.keys))
	for i, k := range p.keys {
		norms[i] = k.norm
	}
	// Its own grants are known here before any informer shows them: a
	// waiter of this process that finds one of these keys erased from
	// outside reads this object first, however far its caches lag.
	for _, h := range p.granted {
		m.lastHolders.add(h.o.Key, req.NamespacedName, p.self.UID)
	}
	// Renewed first: whatever fails below (a status write, a handover
	// plan), the records it acts for must not expire under it. A record it
	// cannot renew may be judged expired once the lease duration passed:
	// it is told to stop, as after any claim error, rather than act on.
	holds, err := m.renew.ensure(ctx, req.NamespacedName, p.self, p.granted)
	if err != nil {
		return m.claimError(ctx, userCtx, req, p, err)
	}
	mutant.Do(mutant.SteadyPassWrites, func() { m.rewrite(ctx, p) })
	m.renew.keep(ctx, req.NamespacedName, p.self, p.giveUp)
	m.renew.stopExcept(req.NamespacedName, append(norms, keysOf(p.giveUp)...)...)
	cond := conditions.ForKeys(m.cfg.condType, norms, p.obj.GetGeneration())
	// An object that was Claimed for an older spec, or Stopping (for any
	// spec: a parked pass after a key edit writes Stopping for the new one),
	// may still act for keys no spec it has now names (their records may be
	// gone, deleted from outside): its condition keeps saying it may act,
	// which tells a waiter so, until a pass for the current spec succeeded.
	written := slices.ContainsFunc(p.granted, func(h heldKey) bool { return h.o.Reason != claim.ReasonHeld })
	confirm := p.stale || !m.claimedFor(m.conditionOf(p.obj), p.keys) || written || !m.confirmed.has(req.NamespacedName, p.self.UID)
	if confirm && m.saysSoFenced(p, cond) {
		// Its first write below, fenced on the cached resourceVersion, is
		// refused unless the API server still has the object as the cache
		// shows it (a refused one reads it again, setCondition): the read
		// would prove nothing more, and a successor waits for it.
		confirm = false
	}
	mutant.Do(mutant.CachedConditionTrusted, func() { confirm = p.stale || written })
	if confirm {
		// It may start acting for a key now (it is not Claimed for exactly
		// these keys, or a record was written for it in this pass), and what
		// decides whether it says so first is its condition as the API
		// server has it. A lagging cache may still show Claimed from before
		// it stopped, or Stopping from before its told pass succeeded and it
		// said so: either would skip the write a waiter reads. Once per
		// grant, not per pass.
		fresh := newObject(m.cfg.prototype)
		if err := m.cfg.apiReader.Get(ctx, req.NamespacedName, fresh); err != nil {
			return reconcile.Result{}, fmt.Errorf("reading %s before it acts for a new grant: %w", req.NamespacedName, err)
		}
		if fresh.GetGeneration() != p.obj.GetGeneration() {
			return reconcile.Result{RequeueAfter: staleReadRequeue}, nil
		}
		p.obj, p.was = fresh, m.previous(fresh)
		// What the object says is known again, whatever the answer to an
		// earlier write of it was.
		m.written.note(req.NamespacedName, m.conditionOf(fresh))
	}
	// Records it is told to release while its condition says it does not
	// act for their keys (it kept them without acting, parked or waiting,
	// or their release failed after it said so): its reconciler cleans up
	// what it keeps for them in this pass, which is acting for them. Its
	// condition says it may act before it does, as a deletion pass given
	// such records does, and until a pass told of them succeeded.
	closed := m.closedWindows(m.conditionOf(p.obj), p.keys, p.told())
	if len(closed) > 0 && !confirm {
		// Judged from a cached condition: the API server's may say it acts
		// for those keys already (a cache that lags may show one written
		// before it acted for them), and then it need not say so again.
		fresh := newObject(m.cfg.prototype)
		if err := m.cfg.apiReader.Get(ctx, req.NamespacedName, fresh); err != nil {
			return reconcile.Result{}, fmt.Errorf("reading %s before it is told to release claims: %w", req.NamespacedName, err)
		}
		closed = m.closedWindows(m.conditionOf(fresh), p.keys, closed)
	}
	delay := p.was.stopping || p.was.claimed && p.was.message != cond.Message || len(closed) > 0
	wrote := false // a claim condition of p.obj written in this pass
	if target, ok := m.releasingCondition(p, cond, closed); ok {
		// It acts for the keys it names and for those whose records it is
		// told to release, and for no other: it says exactly that, so that
		// it does not count as acting for every key meanwhile.
		if wrote, err = m.setCondition(ctx, p.obj, target); err != nil {
			if len(closed) > 0 && !errors.Is(err, errStaleRead) {
				// It cannot say it may act for them (its status writes are
				// refused): it is not told to clean up for records its
				// condition says it does not act for, and they go untold,
				// as a parked object's do, so that a key it stopped naming
				// (whose release failed after its told pass succeeded) is
				// not held for as long as the writes fail. A write refused
				// because the cache lagged is judged again in the next pass.
				untold := *p
				untold.giveUp, untold.gate = closed, nil
				res, rerr := m.release(ctx, &untold, reconcile.Result{}, "which it no longer names")
				return res, errors.Join(err, rerr)
			}
			return reconcile.Result{}, err
		}
	} else if p.was.stopping {
		// Stopping for exactly the keys it acted for: before it acts for
		// others (those it is granted, and records it is told to release),
		// its condition names them too.
		was := m.conditionOf(p.obj)
		if acts, ok := exactKeysOf(was); ok {
			more := append(slices.Clone(norms), keysOf(closed)...)
			if slices.ContainsFunc(more, func(k string) bool { return !slices.Contains(acts, k) }) {
				if wrote, err = m.setCondition(ctx, p.obj, m.stoppingShown(was, p.keys, cond, more...)); err != nil {
					return reconcile.Result{}, err
				}
			}
		}
	} else if delay {
		// Claimed for other keys than these: before it acts for keys that
		// condition does not name, it says so, in a form that no key set
		// counts as current for. Its keys may change back (a keys function
		// that reads more than the spec) before this pass succeeds, and the
		// older condition would then count as current again although it
		// acted for these keys.
		changing := cond
		changing.Message = strings.TrimSuffix(cond.Message, ".") + changingKeys
		if cond.Reason != string(conditions.ReasonClaimed) {
			// It names no key now: it still may act for those it held, and
			// says so as a stopping object does.
			changing.Reason, changing.Status = string(conditions.ReasonStopping), metav1.ConditionFalse
		}
		mutant.Do(mutant.EmptyKeySetNotActing, func() { changing.Reason, changing.Status = cond.Reason, cond.Status })
		if wrote, err = m.setCondition(ctx, p.obj, changing); err != nil {
			return reconcile.Result{}, err
		}
	}
	if !delay {
		changed, err := m.setCondition(ctx, p.obj, cond)
		if err != nil {
			return reconcile.Result{}, err
		}
		wrote = wrote || changed
	}
	if wrote && !p.was.claimed {
		// It starts acting now. A waiter that read its condition before
		// this write may have found the key free (its record deleted
		// from outside since the acquire) and taken it: read the
		// records again before acting, once per grant, not per pass.
		for _, h := range p.granted {
			held, err := m.claimer.Holds(ctx, h.raw, p.self)
			if err != nil {
				return reconcile.Result{}, err
			}
			if !held {
				return reconcile.Result{RequeueAfter: staleReadRequeue}, nil
			}
		}
	}
	if wrote && len(closed) > 0 {
		// So too for the records it is told to release: one a waiter took
		// before this write is not the object's to clean up.
		if still, err := m.stillHeld(ctx, p.self, closed); err != nil {
			return reconcile.Result{}, err
		} else if len(still) < len(closed) {
			return reconcile.Result{RequeueAfter: staleReadRequeue}, nil
		}
	}
	if res, blocked, err := m.confirmGrants(ctx, userCtx, req, p, wrote); blocked || err != nil {
		return res, err
	}
	m.confirmed.add(req.NamespacedName, p.self.UID)
	m.grantEvents(p.obj, p.granted)
	if (p.was.claimed || p.was.failed) && p.was.current {
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
	m.failed.acted(req.NamespacedName, append(keysOf(p.told()), norms...))
	innerCtx, stop := guard(userCtx, holds)
	state := State{Granted: true, Grants: grants, Releasing: grantsOf(p.told()), Handovers: handovers, Condition: cond}
	mutant.Do(mutant.ReleaseBeforeInner, func() { _, _ = m.release(ctx, p, reconcile.Result{}, "before its inner pass") })
	res, err := m.inner.Reconcile(m.innerContext(innerCtx, state), req)
	stop()
	if err != nil {
		mutant.Do(mutant.ReleaseAfterFailedInner, func() { _, _ = m.release(ctx, p, reconcile.Result{}, "after a failed inner pass") })
		// The inner pass did not finish: keys it gives up may still be in
		// use by its old workloads, and keys it hands over may not be free
		// of them yet. Keep them.
		return res, err
	}
	if (len(p.told()) > 0 || delay) && !res.IsZero() {
		// Not done with the keys it gives up (it asks to run again): it may
		// still act for them. They stay held, and renewed, and its
		// condition keeps saying it may act for keys it held before, until
		// a pass told of them returns a zero Result. So too when it is
		// given no record to release (delay): a key it acted for whose
		// record was deleted from outside is not in Grants, and this pass
		// was told to stop using it all the same.
		return res, nil
	}
	if delay {
		// The inner pass may have written the status itself (ocf's flush
		// always does): write on the object as it is now.
		fresh := newObject(m.cfg.prototype)
		if err := m.cfg.apiReader.Get(ctx, req.NamespacedName, fresh); err != nil {
			return reconcile.Result{}, fmt.Errorf("reading %s again after its pass: %w", req.NamespacedName, err)
		}
		if fresh.GetGeneration() != p.obj.GetGeneration() {
			// Its spec changed again: the next pass judges the new one.
			return reconcile.Result{RequeueAfter: staleReadRequeue}, nil
		}
		if !m.toldHeldBack(ctx, p) {
			if _, err := m.setCondition(ctx, fresh, cond); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	if len(handovers) > 0 && res.IsZero() {
		waiting, err := m.commitHandovers(ctx, p.obj, p.self, handovers)
		if err != nil {
			return reconcile.Result{}, err
		}
		if waiting {
			res = soonest(res, m.cfg.waitRequeue)
		}
	}
	return m.release(ctx, p, res, "which it no longer names")
}

// confirmGrants asks, for each key of p.unconfirmed, whether an earlier
// holder may still act for it, once the object holds its record and its
// condition says it may act, and before it acts: of two objects that both
// found the key free, one always sees the other. When one may, the object
// keeps the record (renewed) without acting for it and the pass goes on as
// a parked one waiting for that holder (blocked); the holder, finding the
// key held by another, is told to stop. wrote says the pass wrote p.obj's
// claim condition: once the manager's cache shows that write, the cache
// holds every earlier write of the kind in the object's namespace, and the
// objects it shows there acting for nothing need no uncached read.
func (m *Middleware) confirmGrants(ctx, userCtx context.Context, req reconcile.Request, p *pass, wrote bool) (reconcile.Result, bool, error) {
	if len(p.unconfirmed) == 0 {
		return reconcile.Result{}, false, nil
	}
	cctx := confirmingContext(ctx)
	fresh := wrote && m.cacheShows(ctx, p.obj)
	mutant.Do(mutant.FreshCacheAssumed, func() { fresh = true })
	if fresh {
		cctx = freshCacheContext(cctx, m, p.obj.GetNamespace())
	}
	for _, o := range p.unconfirmed {
		w, wait, err := m.claimer.Predecessor(cctx, o, p.self)
		if err != nil {
			res, err := m.claimError(ctx, userCtx, req, p, err)
			return res, true, err
		}
		if !wait {
			continue
		}
		p.kept = append(p.kept, o.Record)
		p.granted = slices.DeleteFunc(p.granted, func(h heldKey) bool { return h.o.Key == o.Key })
		blocked := redact(m.cfg.disclosure, w, p.self)
		p.blocked = &blocked
		m.metrics.setHeld(req.NamespacedName, len(p.granted))
		res, err := m.parked(ctx, userCtx, req, p, conditions.ForOutcome(m.cfg.condType, blocked, p.obj.GetGeneration()))
		return res, true, err
	}
	return reconcile.Result{}, false, nil
}

// cacheShows reports whether the manager's cache shows obj at its
// resourceVersion or a later one, waiting a moment for it.
func (m *Middleware) cacheShows(ctx context.Context, obj client.Object) bool {
	want := obj.GetResourceVersion()
	cached := newObject(m.cfg.prototype)
	deadline := time.Now().Add(cacheShowsWait)
	for wait := time.Millisecond; ; wait = min(2*wait, cacheShowsPoll) {
		if err := m.cfg.client.Get(ctx, client.ObjectKeyFromObject(obj), cached); err != nil {
			return false
		}
		if cmp, err := resourceversion.CompareResourceVersion(cached.GetResourceVersion(), want); err != nil {
			return false
		} else if cmp >= 0 {
			return cached.GetUID() == obj.GetUID()
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}

// cacheShowsWait bounds the wait of cacheShows; a cache slower than that
// costs uncached reads. cacheShowsPoll bounds the time between its reads of
// the cache, and so the time it waits after the cache caught up (a read of
// the cache copies one object).
const (
	cacheShowsWait = 512 * time.Millisecond
	cacheShowsPoll = 4 * time.Millisecond
)

// recordedHolder is the holder rec names, zero when there is no record.
func recordedHolder(rec claim.Record) claim.Holder {
	if !rec.Exists {
		return claim.Holder{}
	}
	return rec.Holder
}

// soonest returns res with a requeue no later than after.
func soonest(res reconcile.Result, after time.Duration) reconcile.Result {
	if res.RequeueAfter == 0 || after < res.RequeueAfter {
		res.RequeueAfter = after
	}
	return res
}

// parked runs a pass in which the object does not hold every key: the
// condition, events, the inner reconciler in parked mode when it must or
// may run, and the release of what the object gave up.
//
// An object that may still be acting for keys (its condition said Claimed,
// or Stopping) is told to stop: its condition says Stopping until a pass
// that told it returned success, and only then says what blocks it. So a
// told pass that fails, or a status write that fails, is followed by
// another told pass, and the object counts as acting for its keys until
// one succeeded (see [Middleware.predecessor]).
func (m *Middleware) parked(ctx, userCtx context.Context, req reconcile.Request, p *pass, cond metav1.Condition) (reconcile.Result, error) {
	reason := conditions.Reason(cond.Reason)
	tell := mustTell(p.was, len(p.told()))
	mutant.Do(mutant.LostKeyNeverTold, func() { tell = len(p.giveUp) > 0 })
	shown := cond
	// Records it is told to release while its condition says it does not
	// act for their keys: its reconciler cleans up what it keeps for them,
	// which is acting for them, so it says Stopping first, as a deletion
	// pass given such records does, until a pass told of them succeeded.
	closed := m.closedWindows(m.conditionOf(p.obj), p.keys, p.told())
	confirm := !p.was.mayHaveHeld() && len(closed) > 0
	mutant.Do(mutant.CachedConditionTrusted, func() { confirm = false })
	// A cache that has not shown this process's last write of the
	// condition may say the object acts for a record it is told to release,
	// while the API server says it stopped acting for that key (its told
	// pass succeeded, and its release failed): judged from the cache, the
	// pass would clean up for the key without saying so first.
	lagging := len(p.told()) > 0 && m.written.lags(req.NamespacedName, m.conditionOf(p.obj))
	mutant.Do(mutant.LaggingConditionTrusted, func() { lagging = false })
	if confirm || lagging {
		// Judged from a cached condition, which may lag behind one that says
		// it acts for those keys (written by another process, before a
		// restart, so that no memory of this one covers it): the records
		// would go untold if the write below is refused. What the API server
		// says decides, as for a granted pass.
		fresh := newObject(m.cfg.prototype)
		if err := m.cfg.apiReader.Get(ctx, req.NamespacedName, fresh); err != nil {
			return reconcile.Result{}, fmt.Errorf("reading %s before it is told to release claims: %w", req.NamespacedName, err)
		}
		if fresh.GetUID() != p.obj.GetUID() || fresh.GetGeneration() != p.obj.GetGeneration() {
			return reconcile.Result{RequeueAfter: staleReadRequeue}, nil
		}
		p.obj, p.was = fresh, m.previous(fresh)
		m.written.note(req.NamespacedName, m.conditionOf(fresh))
		closed = m.closedWindows(m.conditionOf(p.obj), p.keys, p.told())
	}
	startsActing := !p.was.mayHaveHeld() && len(closed) > 0
	if p.was.mayHaveHeld() || startsActing {
		// It says which keys it may act for when its condition did: a
		// key it never acted for, named in a spec edited since, is not
		// held from another object that acted for it all along.
		shown = m.stoppingShown(m.conditionOf(p.obj), p.keys, cond, keysOf(closed)...)
	}
	if target, ok := m.releasingCondition(p, cond, closed); ok {
		// It acts for no key but those whose records it is told to release:
		// it says exactly that, so that it does not count as acting for
		// every key meanwhile.
		shown = target
	}
	wasReason := conditions.Reason(m.conditionOf(p.obj).Reason)
	changed, werr := m.setCondition(ctx, p.obj, shown)
	if changed && !p.was.stopping {
		m.metrics.observeParked(reason)
		eventType := corev1.EventTypeNormal
		if reason.Priority() >= conditions.ReasonClaimError.Priority() {
			eventType = corev1.EventTypeWarning
		}
		switch {
		case (p.was.mayHaveHeld() || p.was.failed) && !isInvalid(reason):
			m.event(p.obj, corev1.EventTypeWarning, EventLost, ActionPark, "Lost its claim: "+cond.Message)
		case wasReason != reason:
			m.event(p.obj, eventType, EventReason(reason), ActionPark, cond.Message)
		}
		// A waiter whose condition only names another holder (or sibling,
		// or detail) of the same wait records nothing: a handover would
		// otherwise write an event per waiter. The successor and the old
		// holder record it.
	}
	m.grantEvents(p.obj, p.granted)
	// Every record the object still holds stays renewed until it is
	// deleted: the held prefix it waits with, the keys it gives up (until
	// released), and what it keeps while its keys are unknown.
	if _, err := m.renew.ensure(ctx, req.NamespacedName, p.self, p.granted); err != nil && !tell {
		return reconcile.Result{}, err
	}
	m.renew.keep(ctx, req.NamespacedName, p.self, p.giveUp)
	m.renew.keep(ctx, req.NamespacedName, p.self, p.kept)
	held := keysOf(p.giveUp)
	held = append(held, keysOf(p.kept)...)
	for _, h := range p.granted {
		held = append(held, h.o.Key)
	}
	m.renew.stopExcept(req.NamespacedName, held...)
	if werr != nil && startsActing && !errors.Is(werr, errStaleRead) {
		// It cannot say it may act (its status writes are refused): it is
		// not told to clean up for records its condition says it does not
		// act for, and they go untold, so that a key it stopped naming is
		// not held for as long as the writes fail. A write refused because
		// the cache lagged is judged again in the next pass instead.
		res, err := m.release(ctx, p, reconcile.Result{}, "which it gave up while it waits")
		return res, errors.Join(werr, err)
	}
	if werr != nil && len(closed) > 0 && !errors.Is(werr, errStaleRead) {
		// Its condition still says it acts for exactly the keys it acted
		// for, not for these: they go untold, as above, and it is told of
		// the rest in the next pass.
		untold := *p
		untold.giveUp, untold.gate = closed, nil
		res, err := m.release(ctx, &untold, reconcile.Result{}, "which it gave up while it waits")
		return res, errors.Join(werr, err)
	}
	staleTold := errors.Is(werr, errStaleRead) && len(p.told()) > 0
	mutant.Do(mutant.LaggingConditionTrusted, func() { staleTold = false })
	if werr != nil && (!tell || len(closed) > 0 || staleTold) {
		// Renewed above all the same: what it holds must not expire while
		// its condition cannot be written. Records its condition does not
		// name are not told of while the API server may say so; nor is any
		// record after a write refused because the condition it was judged
		// from is not the API server's (another writer's since): the next
		// pass judges again.
		return reconcile.Result{}, werr
	}
	if changed && len(closed) > 0 {
		// A waiter that read its condition before this write may have
		// taken one of them since (its record deleted from outside): read
		// them again, and let the next pass decide.
		still, err := m.stillHeld(ctx, p.self, closed)
		if err != nil {
			return reconcile.Result{}, err
		}
		if len(still) < len(closed) {
			return reconcile.Result{RequeueAfter: staleReadRequeue}, nil
		}
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
	res := reconcile.Result{RequeueAfter: after}

	mutant.Do(mutant.ReleaseBeforeInner, func() { _, _ = m.release(ctx, p, reconcile.Result{}, "before its inner pass") })
	// Once this pass ends with success the object acts for nothing: it was
	// told to stop, or it has not acted since a told pass succeeded.
	stopped := true
	if tell || m.cfg.parkedMode == RunInnerWhileParked {
		m.failed.acted(req.NamespacedName, keysOf(p.told()))
		state := State{Releasing: grantsOf(p.told()), Condition: shown}
		inner, err := m.inner.Reconcile(m.innerContext(userCtx, state), req)
		if err != nil {
			mutant.Do(mutant.ReleaseAfterFailedInner, func() { _, _ = m.release(ctx, p, reconcile.Result{}, "after a failed inner pass") })
			// Still Stopping (or still Claimed, if the write failed): the next
			// pass tells it again, after the controller's backoff.
			return inner, err
		}
		if inner.RequeueAfter > 0 && inner.RequeueAfter < after {
			res.RequeueAfter = inner.RequeueAfter
		}
		stopped = inner.IsZero()
		mutant.Do(mutant.RequeuedStopTakenAsDone, func() { stopped = true })
		if tell && !stopped {
			// Told to stop and not done yet: it asks to run again, as a
			// deletion pass does while its workloads go away. It may still
			// act for its keys, so it keeps saying so (Stopping) and keeps
			// what it gives up, and is told again when it asked to be.
			if werr != nil {
				return reconcile.Result{}, werr
			}
			return inner, nil
		}
	}
	if werr != nil {
		// The told pass succeeded, so the given-up keys may go; the
		// condition is written again in the next pass.
		res, err := m.release(ctx, p, res, "which it gave up while it waits")
		return res, errors.Join(werr, err)
	}
	heldBack := tell && m.toldHeldBack(ctx, p)
	if shown.Reason != cond.Reason && !heldBack {
		// The told pass succeeded: the object stopped acting. Say what
		// blocks it before the release wakes the waiters, which read it.
		if _, err := m.setCondition(ctx, p.obj, cond); err != nil {
			return reconcile.Result{}, err
		}
	}
	if stopped && !heldBack {
		// It acts for no key now (the prefix it keeps, it holds without
		// acting for): no waiter needs to find it through this process's memory.
		m.lastHolders.forget(p.self.UID)
		// A key it keeps while it waits for another is still handed over
		// as planned: a successor waiting for it would otherwise wait for
		// as long as this object waits.
		waiting, err := m.handOverKept(ctx, p)
		if err != nil {
			return reconcile.Result{}, err
		}
		if waiting {
			// A successor that does not wait for the key yet: the commit is
			// tried again after the waiting requeue, as a granted holder's is.
			res = soonest(res, m.cfg.waitRequeue)
		}
	}
	if b := p.blocked; b != nil && b.Reason == claim.ReasonWaitingForHandover && b.Detail == predecessorDetail {
		// It waits for a predecessor to stop, and only that predecessor's
		// condition change wakes it, through a cache that may not yet show
		// this object waiting: ask once more now that its condition is
		// written, so a change made meanwhile is not missed.
		if _, _, still, err := m.predecessor(ctx, b.Key, p.self, recordedHolder(b.Record)); err == nil && !still {
			res = soonest(res, staleReadRequeue)
		} else if !m.shows(ctx, b.Previous) {
			// No event of that predecessor reaches this process (its cache
			// does not hold it: another shard's object): ask again.
			poll := unseenPredecessorPoll
			mutant.Do(mutant.UnseenPredecessorNotPolled, func() { poll = m.cfg.waitRequeue })
			res = soonest(res, poll)
		}
	}
	return m.release(ctx, p, res, "which it gave up while it waits")
}

// mustTell reports whether a parked pass must call the inner reconciler to
// stop using keys: it may still be acting for keys it held (its condition
// said Claimed or Stopping), or it gives keys up. RunInnerWhileParked calls
// it in every pass anyway.
func mustTell(was previous, givingUp int) bool {
	return was.mayHaveHeld() || givingUp > 0
}

// stoppingCondition returns the Stopping form of a parked condition: shown while the
// object may still be acting for keys it held, until a told pass succeeds.
func stoppingCondition(cond metav1.Condition) metav1.Condition {
	out := cond
	out.Reason = string(conditions.ReasonStopping)
	out.Status = conditions.ReasonStopping.Status()
	out.Message = conditions.BoundMessage(strings.TrimSuffix(cond.Message, ".") + "; its reconciler is told to stop acting for its keys until a pass succeeds.")
	return out
}

// release frees the records the pass gave up, after the inner pass that was
// told of them succeeded, each through the handover gate with the object
// itself as the previous holder: a gate such as PodsGone keeps a key the
// object stops naming until its workloads of that key are gone, exactly as
// it keeps a takeover waiting. A key held back is kept (and renewed), and the
// pass is requeued to ask the gate again. Each released record is re-read
// and deleted fenced on that read.
func (m *Middleware) release(ctx context.Context, p *pass, res reconcile.Result, why string) (reconcile.Result, error) {
	if len(p.giveUp) == 0 {
		return res, nil
	}
	gate := p.gate
	if gate == nil {
		free, waiting, err := m.gated(ctx, p.self, p.giveUp)
		gate = &gateAnswer{free: free, waiting: waiting, err: err}
	}
	free, err := gate.free, gate.err
	if gate.waiting {
		res = soonest(res, m.cfg.waitRequeue)
	}
	released, rerr := m.claimer.ReleaseRecords(ctx, p.self, free...)
	retry := m.releasedOrFailed(client.ObjectKeyFromObject(p.obj), free, released, rerr)
	for _, k := range released {
		m.renew.stop(client.ObjectKeyFromObject(p.obj), k)
	}
	m.lastHolders.forget(p.self.UID, released...)
	if len(released) > 0 {
		m.event(p.obj, corev1.EventTypeNormal, EventReleased, ActionRelease, boundNote("Released "+quoteKeys(released)+", "+why+"."))
	}
	if err == nil && rerr != nil {
		return retryRelease(ctx, res, retry, fmt.Errorf("releasing claims of %s: %w", client.ObjectKeyFromObject(p.obj), rerr))
	}
	if err = errors.Join(err, rerr); err != nil {
		return res, fmt.Errorf("releasing claims of %s: %w", client.ObjectKeyFromObject(p.obj), err)
	}
	return res, nil
}

// releasedOrFailed notes what a release of recs, after a pass that knew
// they go succeeded, came to: the keys released, and, when it failed, the
// records it did not release. It returns how long to wait before a release
// that failed is tried again.
func (m *Middleware) releasedOrFailed(name types.NamespacedName, recs []claim.Record, released []string, err error) time.Duration {
	if err == nil {
		if len(recs) > 0 {
			m.failed.succeeded(name, released)
		}
		return 0
	}
	m.failed.acted(name, released)
	return m.failed.failed(name, recs, released)
}

// retryRelease ends a pass whose release failed after the pass that knew
// the records go succeeded: the error is logged, and the pass is run again
// after retry rather than after the controller's error backoff, which its
// passes, writing nothing while the release fails, would let grow for as
// long as it does.
func retryRelease(ctx context.Context, res reconcile.Result, retry time.Duration, err error) (reconcile.Result, error) {
	log.FromContext(ctx).Error(err, "releasing claims the object gave up; trying again", "after", retry)
	return soonest(res, retry), nil
}

// gated splits recs into those the handover gate lets self free now and
// reports whether it held any back.
func (m *Middleware) gated(ctx context.Context, self claim.Holder, recs []claim.Record) ([]claim.Record, bool, error) {
	gate := m.claimer.Gate()
	if gate == nil {
		return recs, false, nil
	}
	var free []claim.Record
	var errs []error
	waiting := false
	for _, rec := range recs {
		open, detail, err := gate.Open(ctx, rec.Key, self)
		if err != nil {
			errs = append(errs, fmt.Errorf("asking the handover gate before releasing claim %q: %w", claim.Redact(rec.Key), err))
			continue
		}
		if !open {
			waiting = true
			log.FromContext(ctx).Info("keeping a claim the object gives up until the handover gate opens", "claimKey", claim.Redact(rec.Key), "detail", detail)
			continue
		}
		free = append(free, rec)
	}
	return free, waiting, errors.Join(errs...)
}

// namedNorms returns the normalized forms of named, in order.
func namedNorms(named []namedKey) []string {
	out := make([]string, len(named))
	for i, k := range named {
		out[i] = k.norm
	}
	return out
}

// keysOf returns the keys of recs.
func keysOf(recs []claim.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Key
	}
	return out
}

// invalidMessage is the InvalidKey message of err: the error, with any URL
// user info redacted whatever the disclosure (a key normalizer or keys function may quote a raw
// reference).
func (m *Middleware) invalidMessage(err error) string { return sentence(claim.Redact(err.Error())) }

// claimError shows an error that kept the claim from being judged as the
// ClaimError condition and returns the error for the controller to retry.
// An object that may still be acting for its keys is told to stop first,
// under the Stopping condition (with the error's message) until that told
// pass succeeds; the inner reconciler also runs with RunInnerWhileParked
// (it may not act on a claim nobody could judge, and its own summary must
// not stay True).
func (m *Middleware) claimError(ctx, userCtx context.Context, req reconcile.Request, p *pass, err error) (reconcile.Result, error) {
	cond := conditions.New(m.cfg.condType, conditions.ReasonClaimError, errorMessage(m.cfg.disclosure, err), p.obj.GetGeneration())
	// Whatever it still holds stays renewed while the claim cannot be
	// judged: it may still act for it (after a restart, no hold runs yet).
	if held, _, herr := m.holdingsOf(ctx, p); herr == nil {
		m.renew.keep(ctx, req.NamespacedName, p.self, held)
	}
	shown := cond
	if p.was.mayHaveHeld() {
		shown = m.stoppingShown(m.conditionOf(p.obj), p.keys, cond)
	}
	if _, werr := m.setCondition(ctx, p.obj, shown); werr != nil {
		logError(ctx, werr, "writing the claim condition after an error")
	}
	if m.cfg.parkedMode == RunInnerWhileParked || p.was.mayHaveHeld() {
		ires, ierr := m.inner.Reconcile(m.innerContext(userCtx, State{Condition: shown}), req)
		if ierr != nil {
			logError(ctx, ierr, "the inner reconciler's pass after a claim error failed; it is told again in the next pass")
			return reconcile.Result{}, err
		}
		// A told pass that asks to run again has not stopped yet: it stays
		// Stopping, and is told again in the next pass.
		if shown.Reason != cond.Reason && ires.IsZero() {
			if _, werr := m.setCondition(ctx, p.obj, cond); werr != nil {
				logError(ctx, werr, "writing the claim condition after an error")
			}
		}
	}
	return reconcile.Result{}, err
}

// previous is what an object's claim condition said when a pass began:
// the only memory of an earlier pass the middleware has, and it is on the
// object, in the API server.
type previous struct {
	claimed bool // True, reason Claimed
	failed  bool // False, reason ClaimError: a claim error, told if it may have held
	// stopping: False, reason Stopping: it lost a key it may still be
	// acting for, and no told pass has succeeded since.
	stopping bool
	// current: the condition was computed for the object's current
	// generation, so its key set has not changed since, unless the keys
	// function reads more than the spec (compare message).
	current bool
	// message is the condition's message: for Claimed, the keys it was
	// written for.
	message string
}

// mayHaveHeld reports whether the object may be acting for keys it held:
// it must be told to stop (a parked inner pass), and told that it lost them,
// until a told pass succeeds.
func (p previous) mayHaveHeld() bool { return p.claimed || p.stopping }

func (m *Middleware) previous(obj client.Object) previous {
	c := m.conditionOf(obj)
	if c.Type == "" {
		return previous{}
	}
	return previous{
		claimed:  c.Status == metav1.ConditionTrue && c.Reason == string(conditions.ReasonClaimed),
		failed:   c.Reason == string(conditions.ReasonClaimError),
		stopping: c.Reason == string(conditions.ReasonStopping),
		current:  c.ObservedGeneration == obj.GetGeneration(),
		message:  c.Message,
	}
}

// claimedFor reports whether c says Claimed for exactly keys, judged from
// its message: the keys function may read more than the spec, so the
// generation alone does not prove the keys unchanged, and a new generation
// that changed no key (another field of the spec, or the deletion mark,
// which bumps it) does not make an object act for other keys. An object
// whose key set changes says so (changingKeys) before it acts for the new
// set, so a condition for keys it acted for in a pass that then failed
// never counts as current.
func (m *Middleware) claimedFor(c metav1.Condition, keys []namedKey) bool {
	if c.Reason != string(conditions.ReasonClaimed) {
		return false
	}
	norms := make([]string, len(keys))
	for i, k := range keys {
		norms[i] = k.norm
	}
	return c.Message == conditions.ForKeys(m.cfg.condType, norms, 0).Message
}

// mayAct reports whether an object whose claim condition is c may be acting
// for the keys it names: from its first granted pass (Claimed) until a pass
// told to stop returned success (Stopping until then).
func mayAct(c metav1.Condition) bool {
	switch conditions.Reason(c.Reason) {
	case conditions.ReasonClaimed:
		return c.Status == metav1.ConditionTrue
	case conditions.ReasonStopping:
		return true
	}
	return false
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

// finalize runs the deletion path. Each pass finds the records the object
// still holds, tells the inner reconciler those (State.Grants, with
// Deleting), keeps them renewed, and after that pass succeeded releases
// exactly those; only a pass that found none and told the inner reconciler
// so removes the finalizer. A deleted object never acquires, and a record
// is never released without a deletion pass that was given it.
//
// No pass waits for the API server's watch cache to catch up with etcd (a
// consistent List, up to 100 ms after a write of another resource, which
// the controller's worker would spend idle). A pass before the object says
// Released lists as the records are (from the manager's cache, else the
// API server's watch cache), and reads each key it names
// by a Get (etcd): a record it misses is found by a later pass. Once it says
// Released, written after such a pass listed, a pass lists at least as
// fresh as the object itself: that includes every record written before the
// first deletion pass began, and so every record of its own earlier passes,
// which is what lets the finalizer come off after a pass that found none.
// An object that says nothing of Released and finds nothing lists once more
// consistently before its finalizer comes off.
func (m *Middleware) finalize(ctx, userCtx context.Context, req reconcile.Request, obj client.Object, self claim.Holder) (reconcile.Result, error) {
	// Whether or not the finalizer is still there (a person may have removed
	// it while another finalizer keeps the object): the inner pass cleans up
	// only what the object holds.
	was := m.conditionOf(obj)
	holdings, cached, err := m.deletionListing(ctx, obj, was, self)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("reading the claims of %s before its deletion: %w", req.NamespacedName, err)
	}
	confirm := len(holdings) > 0 && mayAct(was)
	// Given no record, the pass judges from the condition alone whether the
	// object may still act for a key (one whose record was deleted from
	// outside): a cache that has not shown a Claimed write yet says it acts
	// for nothing, and the finalizer would come off while the pass asks to
	// run again. Read once per pass that lists nothing.
	bare := len(holdings) == 0 && !mayAct(was)
	mutant.Do(mutant.DeletionCachedConditionTrusted, func() { confirm, bare = false, false })
	if confirm || bare {
		// The pass is about to act for records on the word of a cached
		// condition; the API server may say by now that the object acts for
		// nothing (a told pass that succeeded moments ago wrote so), and a
		// waiter's check before it acts reads that: the condition must say
		// it may act again first, from what the API server says.
		current := newObject(m.cfg.prototype)
		if err := m.cfg.apiReader.Get(ctx, req.NamespacedName, current); apierrors.IsNotFound(err) {
			// Gone since the cached read: its finalizer came off already.
			m.forget(req)
			return reconcile.Result{}, nil
		} else if err != nil {
			return reconcile.Result{}, fmt.Errorf("reading %s before its deletion pass: %w", req.NamespacedName, err)
		}
		if current.GetUID() != obj.GetUID() {
			return reconcile.Result{RequeueAfter: staleReadRequeue}, nil
		}
		obj, was = current, m.conditionOf(current)
		if cached && !m.cacheListsEnough(ctx, obj, was) {
			// The cache lagged behind a condition that says the object
			// may act for keys it does not name now: the records of those
			// are listed from the API server.
			if holdings, _, err = m.deletionListing(ctx, obj, was, self); err != nil {
				return reconcile.Result{}, fmt.Errorf("reading the claims of %s before its deletion: %w", req.NamespacedName, err)
			}
		}
	}
	holds := m.renew.keep(ctx, req.NamespacedName, self, holdings)
	m.renew.stopExcept(req.NamespacedName, keysOf(holdings)...)
	for _, rec := range holdings {
		// Its deletion pass acts for each: a waiter of this process that
		// finds one erased reads this object first.
		m.lastHolders.add(rec.Key, req.NamespacedName, self.UID)
	}
	var untold []claim.Record
	named, _ := m.keysOf(ctx, obj)
	// Records it holds while its condition says it does not act for them,
	// and another object may act for: it has not acted for them since that
	// object started, and its cleanup must not touch what the other uses.
	// Released after the pass, untold.
	if keys, err := m.untoldOf(ctx, obj, was, named, holdings, self); err != nil {
		return reconcile.Result{}, fmt.Errorf("reading the claims of %s before its deletion: %w", req.NamespacedName, err)
	} else if len(keys) > 0 {
		holdings = slices.DeleteFunc(holdings, func(r claim.Record) bool {
			if slices.Contains(keys, r.Key) {
				untold = append(untold, r)
				return true
			}
			return false
		})
	}
	if isClaimed(was) && len(holdings) > 0 && !m.confirmed.has(req.NamespacedName, self.UID) {
		// It says Claimed, but no pass of this process saw it act: that may
		// be a Claimed written before its pass found an earlier holder still
		// acting, which it could not replace by saying it waits. Records
		// another object may act for go untold: its cleanup must not touch
		// what the other uses.
		keys, err := m.othersActFor(recheckContext(ctx), self, holdings)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("reading the claims of %s before its deletion: %w", req.NamespacedName, err)
		}
		holdings = slices.DeleteFunc(holdings, func(r claim.Record) bool {
			if slices.Contains(keys, r.Key) {
				untold = append(untold, r)
				return true
			}
			return false
		})
	}
	if len(holdings) > 0 && !m.saysActingFor(was, named, holdings) {
		// The pass acts for records while the condition says the object
		// acts for none (it said Released and their release failed, or one
		// was written since; or it was parked, or waited): the condition
		// says it may act before it does, and each record is read again
		// after that: a waiter that found one erased and wrote its own
		// before this write holds it now, and this pass is not given it.
		msg := "Being deleted; its deletion pass acts for the claims it still holds."
		if saysReleased(was) {
			msg = "Being deleted; its deletion pass runs again for the claims it still holds."
		}
		again := conditions.New(m.cfg.condType, conditions.ReasonStopping, msg, was.ObservedGeneration)
		if was.Type == "" {
			again.ObservedGeneration = obj.GetGeneration()
		}
		if _, err := m.setCondition(ctx, obj, again); err != nil {
			if errors.Is(err, errStaleRead) {
				// The cache lagged: the next pass judges again.
				return reconcile.Result{}, err
			}
			// It cannot say it may act for them (its status writes are
			// refused): its pass is not given records its condition says
			// it does not act for (a release that failed after its deletion
			// pass succeeded, or records it kept without acting), and they
			// go untold, so that neither the key nor the object is held for
			// as long as the writes fail. Judged from the condition as the
			// API server has it: a cache that lags may show Released from
			// before a deletion pass given them failed.
			current := newObject(m.cfg.prototype)
			if gerr := m.cfg.apiReader.Get(ctx, req.NamespacedName, current); gerr != nil {
				return reconcile.Result{}, errors.Join(err, fmt.Errorf("reading %s before it releases claims untold: %w", req.NamespacedName, gerr))
			}
			keys, kerr := m.keysOf(ctx, current)
			if closed := m.closedWindows(m.conditionOf(current), keys, holdings); kerr == nil && current.GetUID() == obj.GetUID() && len(closed) > 0 {
				released, rerr := m.claimer.ReleaseRecords(ctx, self, closed...)
				m.releasedOrFailed(req.NamespacedName, closed, released, rerr)
				for _, k := range released {
					m.renew.stop(req.NamespacedName, k)
				}
				m.lastHolders.forget(self.UID, released...)
				if len(released) > 0 {
					m.event(obj, corev1.EventTypeNormal, EventReleased, ActionRelease, boundNote("Released "+quoteKeys(released)+" before deletion."))
				}
				return reconcile.Result{}, errors.Join(err, rerr)
			}
			return reconcile.Result{}, err
		}
		was = again
		var held []claim.Record
		for _, rec := range holdings {
			ok, err := m.claimer.Holds(ctx, rec.Key, self)
			if err != nil {
				return reconcile.Result{}, fmt.Errorf("reading the claims of %s again before its deletion pass: %w", req.NamespacedName, err)
			}
			if ok {
				held = append(held, rec)
			}
		}
		if len(held) < len(holdings) {
			// A record went to another holder: list again in the next pass
			// rather than judge the finalizer from this one.
			return reconcile.Result{RequeueAfter: staleReadRequeue}, nil
		}
	}
	m.failed.acted(req.NamespacedName, keysOf(holdings))
	innerCtx, stop := guard(userCtx, holds)
	res, err := m.inner.Reconcile(m.innerContext(innerCtx, State{Deleting: true, Grants: grantsOf(holdings), Condition: was}), req)
	stop()
	if err != nil {
		return res, err
	}
	if !res.IsZero() && (len(holdings) > 0 || mayAct(was)) {
		// A deletion pass that asks to run again has not finished: its
		// workloads may still be going away. What it holds stays held,
		// and renewed, until a pass returns neither an error nor a requeue;
		// and while its condition says it may act (for a key whose record
		// was deleted from outside, say), it keeps saying so. Given nothing
		// while it acts for nothing, it has no key to protect: the finalizer
		// comes off whatever it returns, so that a reconciler that always
		// asks to run again is not kept for ever.
		return res, nil
	}
	if mayAct(was) || len(holdings) > 0 && !saysReleased(was) {
		// Its deletion pass succeeded: it acts for no key any more. Said
		// before the release wakes the waiters, which read it, and, written
		// after this pass listed, what lets later passes list at least as
		// fresh as the object instead of waiting for a consistent List.
		gen := was.ObservedGeneration
		if was.Type == "" {
			gen = obj.GetGeneration()
		}
		released := conditions.New(m.cfg.condType, conditions.ReasonReleased, "Being deleted; its deletion pass succeeded and it acts for no key.", gen)
		if _, err := m.setCondition(ctx, obj, released); err != nil {
			return reconcile.Result{}, err
		}
		m.lastHolders.forget(self.UID)
	}
	holdings = append(holdings, untold...)
	if len(holdings) > 0 {
		released, err := m.claimer.ReleaseRecords(ctx, self, holdings...)
		retry := m.releasedOrFailed(req.NamespacedName, holdings, released, err)
		for _, k := range released {
			m.renew.stop(req.NamespacedName, k)
		}
		if len(released) > 0 {
			m.event(obj, corev1.EventTypeNormal, EventReleased, ActionRelease, boundNote("Released "+quoteKeys(released)+" before deletion."))
		}
		if err != nil {
			return retryRelease(ctx, reconcile.Result{}, retry, fmt.Errorf("releasing the claims of %s before its deletion: %w", req.NamespacedName, err))
		}
		// The objects waiting for these keys are woken by their release.
		// The pass that lists nothing and removes the finalizer follows,
		// after theirs.
		return reconcile.Result{RequeueAfter: sweepAfterRelease}, nil
	}
	if !m.fin.Has(obj) {
		m.forget(req)
		return res, nil
	}
	// This pass listed no record, at least as fresh as every record the
	// object's passes before its deletion wrote, and told the inner
	// reconciler so: nothing is left to release.
	if _, err := m.fin.Finalize(ctx, obj, func(context.Context) error { return nil }); err != nil {
		return reconcile.Result{}, err
	}
	m.forget(req)
	return res, nil
}

// releasingClaims introduces, at the end of the message of a Claimed
// condition for the keys an object names, the keys of the records it is told
// to release while it does not act for them otherwise (it kept them without
// acting, or their release failed after a told pass succeeded): until a pass
// told of them succeeded it acts for those and for the keys it names, and
// for no other key. releasingOnly begins the message of the Stopping
// condition of an object that acts for nothing else.
const (
	releasingClaims = "; until a pass told to release their records succeeded, it also acts for "
	releasingOnly   = "It acts for no key but those whose records it is told to release, until a pass told of them succeeded: "
)

// releasingMessage returns the message that ends with keys, quoted in
// order, after prefix, and false when it would not show them whole.
func releasingMessage(prefix string, keys []string) (string, bool) {
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = strconv.Quote(k)
	}
	msg := prefix + strings.Join(quoted, ", ") + "."
	return msg, len(keys) > 0 && len(msg) <= conditions.MaxMessageLength
}

// releasingKeysOf returns the keys a message that begins with prefix and was
// written by releasingMessage names, and false for any other message.
func releasingKeysOf(msg, prefix string) ([]string, bool) {
	rest, ok := strings.CutPrefix(msg, prefix)
	if !ok {
		return nil, false
	}
	keys, rest, ok := quotedKeys(rest)
	return keys, ok && rest == ""
}

// quotedKeys reads the keys s begins with, quoted, separated by ", " and
// ended by ".", and returns them with what follows the ".". Quoting escapes
// every '"' within a key, so no key can end the list early.
func quotedKeys(s string) ([]string, string, bool) {
	var keys []string
	for {
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			return nil, "", false
		}
		k, err := strconv.Unquote(q)
		if err != nil {
			return nil, "", false
		}
		keys = append(keys, k)
		s = s[len(q):]
		if rest, ok := strings.CutPrefix(s, "."); ok {
			return keys, rest, true
		}
		var more bool
		if s, more = strings.CutPrefix(s, ", "); !more {
			return nil, "", false
		}
	}
}

// releasingFor returns the keys of the records c says an object whose keys
// are keys acts for besides them (or, Stopping, alone), while a pass told to
// release those records has not succeeded; false when c does not say so.
func (m *Middleware) releasingFor(c metav1.Condition, keys []namedKey) ([]string, bool) {
	switch {
	case c.Reason == string(conditions.ReasonStopping):
		return releasingKeysOf(c.Message, releasingOnly)
	case c.Reason == string(conditions.ReasonClaimed) && c.Status == metav1.ConditionTrue:
		norms := make([]string, len(keys))
		for i, k := range keys {
			norms[i] = k.norm
		}
		base := strings.TrimSuffix(conditions.ForKeys(m.cfg.condType, norms, 0).Message, ".")
		return releasingKeysOf(c.Message, base+releasingClaims)
	}
	return nil, false
}

// stoppingOnly begins the message of the Stopping condition of an object
// that says exactly which keys it may still act for: those its condition
// said it acted for before it was told to stop (and those whose records it
// is told to release), carried from one told pass that fails to the next.
// The rest of the message says what blocks it.
const stoppingOnly = "Until a pass told to stop succeeded, it acts for no key but "

// stoppingKeysOf returns the keys a message written by stoppingMessage
// names, and false for any other message.
func stoppingKeysOf(msg string) ([]string, bool) {
	rest, ok := strings.CutPrefix(msg, stoppingOnly)
	if !ok {
		return nil, false
	}
	keys, rest, ok := quotedKeys(rest)
	if !ok || rest != "" && !strings.HasPrefix(rest, " ") {
		return nil, false
	}
	return keys, true
}

// stoppingMessage returns the message of a Stopping condition that says
// the object acts for no key but keys, followed by what blocks it, and
// false when the keys would not show whole.
func stoppingMessage(keys []string, rest string) (string, bool) {
	list, ok := releasingMessage("", keys)
	if !ok {
		return "", false
	}
	msg := conditions.BoundMessage(stoppingOnly + list + " " + rest)
	// Bounded, the message must still show every key whole.
	shown, ok := stoppingKeysOf(msg)
	return msg, ok && len(shown) == len(slices.Compact(slices.Sorted(slices.Values(keys))))
}

// claimedKeysOf returns the keys a Claimed condition's message, as
// [conditions.ForKeys] writes it, names, and false when the message does
// not name them whole (more keys than it quotes, or one cut short) or was
// not written so.
func claimedKeysOf(msg string) ([]string, bool) {
	rest, ok := strings.CutPrefix(msg, "Holds key ")
	if !ok {
		if rest, ok = strings.CutPrefix(msg, "Holds keys "); !ok {
			return nil, false
		}
	}
	keys, ok := releasingKeysOf(rest, "")
	if !ok || conditions.ForKeys("", keys, 0).Message != msg {
		return nil, false
	}
	return keys, true
}

// exactKeysOf returns exactly the keys an object whose claim condition is c
// may act for, by what c says whatever keys the object names now, and
// false when c does not say (Stopping without its keys, Claimed while its
// key set changes, or for keys it does not show whole). An object acts for
// a key outside what its condition says only after a write that says so.
func exactKeysOf(c metav1.Condition) ([]string, bool) {
	switch {
	case !mayAct(c):
		return nil, true
	case c.Reason == string(conditions.ReasonStopping):
		if keys, ok := stoppingKeysOf(c.Message); ok {
			return keys, true
		}
		return releasingKeysOf(c.Message, releasingOnly)
	}
	base, releasing, found := strings.Cut(c.Message, releasingClaims)
	if !found {
		return claimedKeysOf(c.Message)
	}
	claimed, ok := claimedKeysOf(base + ".")
	if !ok {
		return nil, false
	}
	held, ok := releasingKeysOf(releasingClaims+releasing, releasingClaims)
	if !ok {
		return nil, false
	}
	return slices.Compact(slices.Sorted(slices.Values(append(claimed, held...)))), true
}

// ActsFor returns the keys, normalized, that c, a claim condition the
// middleware wrote, says its object may act for: none when it says the
// object acts for nothing, and false when it says the object may act for
// any key it held (Stopping without its keys, Claimed while its key set
// changes, or for more keys than its message shows whole). An object acts
// for a key outside what its condition says only after a write that says
// so; the middleware's own checks read conditions the same way. For tools
// and checkers.
func ActsFor(c metav1.Condition) ([]string, bool) { return exactKeysOf(c) }

// actsFor returns exactly the keys an object whose claim condition is c and
// whose keys are named may act for, and false when c does not say.
func (m *Middleware) actsFor(c metav1.Condition, named []namedKey) ([]string, bool) {
	if !mayAct(c) {
		return nil, true
	}
	norms := namedNorms(named)
	if held, ok := m.releasingFor(c, named); ok {
		if c.Reason == string(conditions.ReasonClaimed) {
			held = append(held, norms...)
		}
		return slices.Compact(slices.Sorted(slices.Values(held))), true
	}
	if m.claimedFor(c, named) {
		return norms, true
	}
	return exactKeysOf(c)
}

// stoppingShown returns the Stopping condition a pass shows while the
// object whose condition was was, and whose keys are named, is told to stop
// (base says what blocks it, or what it is granted): it says exactly which
// keys the object may act for when was said so, with more added (the keys
// of records it is about to act for), and otherwise that it may act for
// any key it held.
func (m *Middleware) stoppingShown(was metav1.Condition, named []namedKey, base metav1.Condition, more ...string) metav1.Condition {
	out := stoppingCondition(base)
	keys, ok := m.actsFor(was, named)
	mutant.Do(mutant.StoppingNamesCurrentKeys, func() { keys, ok = namedNorms(named), true })
	if !ok || len(keys)+len(more) == 0 {
		return out
	}
	if msg, ok := stoppingMessage(append(slices.Clone(keys), more...), out.Message); ok {
		out.Message = msg
	}
	return out
}

// saysActingFor reports whether c says the object, whose keys are named,
// may act for the key of every record of recs.
func (m *Middleware) saysActingFor(c metav1.Condition, named []namedKey, recs []claim.Record) bool {
	return mayAct(c) && len(m.closedWindows(c, named, recs)) == 0
}

// releasingCondition returns the condition p's object shows while it is
// told to release records whose keys it did not act for (closed): it acts
// for them, and for the keys it names when cond grants them, and for
// nothing else (its condition said it acted for nothing, or for exactly
// the keys it names, or already said this). False when its condition says
// it may act for more (it lost keys, or its key set changed), or when the
// keys would not show whole: then the broader condition applies.
func (m *Middleware) releasingCondition(p *pass, cond metav1.Condition, closed []claim.Record) (metav1.Condition, bool) {
	was := m.conditionOf(p.obj)
	held, precise := m.releasingFor(was, p.keys)
	switch {
	case precise:
	case len(closed) == 0:
		return metav1.Condition{}, false
	case p.was.stopping || p.was.claimed && p.was.message != cond.Message:
		return metav1.Condition{}, false
	}
	keys := append(held, keysOf(closed)...)
	granted := cond.Reason == string(conditions.ReasonClaimed) && cond.Status == metav1.ConditionTrue
	if precise && was.Reason == string(conditions.ReasonClaimed) && !granted {
		// It acted for the keys it names (its condition said Claimed for
		// them): a condition that does not grant them still names them.
		for _, k := range p.keys {
			keys = append(keys, k.norm)
		}
	}
	out := cond
	var ok bool
	if granted {
		out.Message, ok = releasingMessage(strings.TrimSuffix(cond.Message, ".")+releasingClaims, keys)
	} else {
		out.Reason, out.Status = string(conditions.ReasonStopping), metav1.ConditionFalse
		out.Message, ok = releasingMessage(releasingOnly, keys)
	}
	return out, ok
}

// changingKeys ends the message of the Claimed condition an object shows
// while its key set changes, from before its first pass for the new set
// acts until that pass succeeded: it may act for keys of either set.
const changingKeys = "; it may still act for keys it held before, until its first pass for these succeeded."

// saysReleased reports whether a claim condition says Released: written by
// a deletion pass after it listed the object's records.
func saysReleased(c metav1.Condition) bool {
	return c.Reason == string(conditions.ReasonReleased)
}

// deletionListing returns the records a deletion pass of obj, whose claim
// condition is was, is given, and whether they were listed from the
// manager's cache. Until the object says Released, they are listed as they
// are: from the manager's cache (no request) when that shows every record
// the object may act for (cacheListsEnough), else from the API server's
// watch cache; and, when that finds none, once more consistently, since a
// listing of the records as they are may miss one written moments ago and
// no finalizer comes off on its word. Once it says Released, at least as
// fresh as the object.
func (m *Middleware) deletionListing(ctx context.Context, obj client.Object, was metav1.Condition, self claim.Holder) ([]claim.Record, bool, error) {
	fresh := "0"
	if saysReleased(was) {
		fresh = obj.GetResourceVersion()
	}
	cached := fresh == "0" && m.cachedRecords && m.cacheListsEnough(ctx, obj, was)
	holdings, err := m.deletionHoldings(ctx, obj, self, fresh, cached)
	if err == nil && len(holdings) == 0 && fresh == "0" {
		holdings, err = m.deletionHoldings(ctx, obj, self, "", false)
		cached = false
	}
	return holdings, cached, err
}

// cacheListsEnough reports whether a deletion pass may list obj's records
// from the manager's cache: its condition (was) says it acts for nothing,
// or for exactly the keys it names, whose records deletionHoldings reads
// by name from etcd anyway. A record the cache misses then is one the
// object does not act for, which a later pass, listing at least as fresh
// as the object, finds and releases. A key it stopped naming while it may
// still act for it (its told pass has not succeeded) is listed from the API
// server: a pass not given it must not say Released, which would end its
// acting window for that key untold.
func (m *Middleware) cacheListsEnough(ctx context.Context, obj client.Object, was metav1.Condition) bool {
	if !mayAct(was) {
		return true
	}
	named, err := m.keysOf(ctx, obj)
	return err == nil && m.claimedFor(was, named)
}

// deletionHoldings returns every record the object being deleted holds: the
// listing of its records (by its selector labels, and the records that lost
// them: Claimer.HoldingsNotOlderThan) at least as fresh as
// resourceVersion ("": consistent, "0": as they are), or, when cached, as
// the manager's cache shows them; and one Get per key it still names, read
// from etcd, which also finds a record whose labels another writer replaced
// (an annotation record on an object others edit).
func (m *Middleware) deletionHoldings(ctx context.Context, obj client.Object, self claim.Holder, resourceVersion string, cached bool) ([]claim.Record, error) {
	keys, kerr := m.keysOf(ctx, obj)
	if kerr != nil && cached {
		// The cache's listing counts on the keys it names being read by
		// name: without them a record the cache misses, of a key it acts
		// for, would not be given to this pass. The API server lists.
		cached, resourceVersion = false, "0"
	}
	var out []claim.Record
	var err error
	switch {
	case resourceVersion == "":
		out, err = m.claimer.Holdings(ctx, self)
	case cached:
		// As the manager's cache shows them, which costs no request: a
		// listing of the API server's watch cache as it is may miss a
		// record too, and filters every Lease of the namespace (tens of
		// milliseconds at ten thousand) while the successor waits.
		out, err = m.claimer.CachedHoldings(ctx, self)
	default:
		out, err = m.claimer.HoldingsNotOlderThan(ctx, self, resourceVersion)
	}
	if err != nil {
		return nil, err
	}
	if resourceVersion != "" {
		// A listing that may lag can show a record the object has released
		// since, and another object may act for that key now: its deletion
		// pass must not be given it.
		if out, err = m.stillHeld(ctx, self, out); err != nil {
			return nil, err
		}
	}
	for _, k := range keys {
		if slices.ContainsFunc(out, func(r claim.Record) bool { return r.Key == k.norm }) {
			continue
		}
		rec, err := m.claimer.Current(ctx, k.raw)
		if err != nil {
			return nil, err
		}
		if m.claimer.Mine(rec, self) {
			out = append(out, rec)
		}
	}
	slices.SortFunc(out, func(a, b claim.Record) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// untoldOf returns the keys of recs that are released without telling the
// inner pass: those whose keys the object's condition says it does not act
// for (closedWindows) and that another object may act for (othersActFor),
// or whose release failed after a pass that knew they go succeeded
// (failedReleases: telling the object again would only cost it two status
// writes per pass while the release fails). cached is the condition as the
// cache shows it; before any key is released untold, the condition is read
// again uncached, as a cache that lags may show an older Claimed for the
// keys the object names now, though it acted for more since; the keys it
// names are computed again from that read too.
func (m *Middleware) untoldOf(ctx context.Context, obj client.Object, cached metav1.Condition, named []namedKey, recs []claim.Record, self claim.Holder) ([]string, error) {
	// Records whose release failed are judged from the API server whatever
	// the cache shows: a cache behind the pass's own writes (the condition
	// that said the object acts for the key, before it said it stopped)
	// would have it told again, and write twice, in every pass.
	retried := m.failed.retried(client.ObjectKeyFromObject(obj), recs)
	closed := slices.DeleteFunc(m.closedWindows(cached, named, recs), func(r claim.Record) bool {
		return slices.ContainsFunc(retried, func(t claim.Record) bool { return t.Key == r.Key })
	})
	keys, err := m.othersActFor(ctx, self, closed)
	if err != nil {
		return nil, err
	}
	keys = append(keysOf(retried), keys...)
	if len(keys) == 0 {
		return nil, nil
	}
	closed = append(closed, retried...)
	fresh := newObject(m.cfg.prototype)
	if err := m.cfg.apiReader.Get(ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
		return nil, fmt.Errorf("reading %s before it releases claims untold: %w", client.ObjectKeyFromObject(obj), err)
	}
	freshKeys, err := m.keysOf(ctx, fresh)
	if err != nil {
		// Its keys cannot be judged now: it may act for any, and is told.
		return nil, nil
	}
	still := m.closedWindows(m.conditionOf(fresh), freshKeys, closed)
	return slices.DeleteFunc(keys, func(k string) bool {
		return !slices.ContainsFunc(still, func(r claim.Record) bool { return r.Key == k })
	}), nil
}

// closedWindows returns the records of recs whose keys the object's
// condition c says it does not act for: all of them when c says it acts for
// nothing; when c says exactly which keys it acts for (actsFor: Claimed for
// exactly the keys it names now, written only after a pass that was told of
// every other key succeeded or before any pass when it acted for nothing;
// or a condition that names its keys), those it does not say; none when c
// says it may act for whatever it held.
func (m *Middleware) closedWindows(c metav1.Condition, named []namedKey, recs []claim.Record) []claim.Record {
	acts, ok := m.actsFor(c, named)
	if !ok {
		return nil
	}
	var out []claim.Record
	for _, r := range recs {
		if !slices.Contains(acts, r.Key) {
			out = append(out, r)
		}
	}
	return out
}

// stillHeld reads each of recs again uncached and returns those self still
// holds, as they are now.
func (m *Middleware) stillHeld(ctx context.Context, self claim.Holder, recs []claim.Record) ([]claim.Record, error) {
	var out []claim.Record
	for _, r := range recs {
		rec, err := m.claimer.Current(ctx, r.Key)
		if err != nil {
			return nil, fmt.Errorf("reading claim %q again: %w", claim.Redact(r.Key), err)
		}
		if m.claimer.Mine(rec, self) {
			out = append(out, rec)
		}
	}
	return out, nil
}

// sweepAfterRelease is how long a deleted object that released its keys
// waits before its last pass, so that the passes of the objects its release
// woke come first.
const sweepAfterRelease = 50 * time.Millisecond

// forgetUnseen forgets what the process keeps for an object its cache does
// not show, as forget does, but the holders remembered under its name only
// once an uncached read finds no object of that name, or one of another UID
// (as the predecessor check forgets them): a cache may not show an object
// that still acts for a key. One reconciled by another shard of the
// operator, whose cache holds only its own shard's objects, is such an
// object, and every event of a record that names it asks this process to
// reconcile it. An error of that read keeps them (a hint too many costs a
// read; one too few lets a key go while its holder acts).
func (m *Middleware) forgetUnseen(ctx context.Context, req reconcile.Request) {
	m.forgetKept(req)
	uids := m.lastHolders.uidsOf(req.NamespacedName)
	if len(uids) == 0 || m.cfg.apiReader == nil {
		return
	}
	current := newObject(m.cfg.prototype)
	switch err := m.cfg.apiReader.Get(ctx, req.NamespacedName, current); {
	case apierrors.IsNotFound(err):
		m.lastHolders.forgetName(req.NamespacedName)
	case err == nil:
		for _, uid := range uids {
			if uid != current.GetUID() {
				m.lastHolders.forget(uid)
			}
		}
	}
}

// forget forgets everything the process keeps for an object that is gone.
func (m *Middleware) forget(req reconcile.Request) {
	m.forgetKept(req)
	m.lastHolders.forgetName(req.NamespacedName)
}

// forgetKept forgets what the process keeps for an object's own passes:
// pending commits, renewals, written conditions, its held metric.
func (m *Middleware) forgetKept(req reconcile.Request) {
	m.pending.forget(req.NamespacedName)
	m.renew.stopExcept(req.NamespacedName)
	m.written.forget(req.NamespacedName)
	m.confirmed.forget(req.NamespacedName)
	m.failed.forget(req.NamespacedName)
	m.metrics.setHeld(req.NamespacedName, 0)
}

// confirmedGrants remembers, per object, the UID of the one whose grants a
// pass of this process confirmed (confirmGrants) and then acted for. The
// API server's Claimed alone does not say that: a pass writes it before it
// confirms, and one that then finds an earlier holder still acting may fail
// to say it waits instead (its status write refused, its process stopped).
// Memory that only makes a pass check more, never less: a restarted
// process confirms each Claimed object again in its first pass.
type confirmedGrants struct {
	mu sync.Mutex
	m  map[types.NamespacedName]types.UID
}

func (c *confirmedGrants) add(name types.NamespacedName, uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[types.NamespacedName]types.UID{}
	}
	c.m[name] = uid
}

func (c *confirmedGrants) has(name types.NamespacedName, uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := c.m[name] == uid
	mutant.Do(mutant.UnconfirmedClaimTrusted, func() { ok = true })
	return ok
}

func (c *confirmedGrants) forget(name types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, name)
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
	judged := m.conditionOf(base)
	changed, err := setConditionOn(obj, cond)
	if err != nil || !changed {
		return false, err
	}
	patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	// Until the answer says otherwise, the write may or may not apply: an
	// error can come after the server wrote it.
	m.written.attempt(client.ObjectKeyFromObject(obj), cond)
	err = m.cfg.client.Status().Patch(ctx, obj, patch)
	if apierrors.IsConflict(err) && m.cfg.apiReader != nil {
		// Another writer (the inner pass, a tool) wrote the object since the
		// cached read. The condition stands as long as the spec and the
		// claim condition it was judged from do: write it once more on the
		// object as it is now. A claim condition changed since (this
		// middleware's own write the cache had not shown yet) means the
		// pass decided from a stale one: the next pass decides again.
		gen := obj.GetGeneration()
		if rerr := m.cfg.apiReader.Get(ctx, client.ObjectKeyFromObject(obj), obj); rerr == nil && obj.GetGeneration() == gen && sameJudgement(judged, m.conditionOf(obj)) {
			if base, ok = obj.DeepCopyObject().(client.Object); ok {
				if changed, serr := setConditionOn(obj, cond); serr != nil || !changed {
					return false, serr
				}
				err = m.cfg.client.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
			}
		}
	}
	if err != nil {
		if apierrors.IsConflict(err) {
			err = fmt.Errorf("%w: %w", errStaleRead, err)
		}
		return false, fmt.Errorf("writing condition %s=%s (%s) on %s: %w", cond.Type, cond.Status, cond.Reason, client.ObjectKeyFromObject(obj), err)
	}
	m.written.note(client.ObjectKeyFromObject(obj), cond)
	log.FromContext(ctx).V(1).Info("wrote claim condition", "status", cond.Status, "reason", cond.Reason)
	return true, nil
}

// writtenConditions remembers, per object, whether the claim condition this
// process last wrote said Claimed. A cache that shows Claimed for an object
// whose last write here said otherwise (WaitingForHandover while it kept a
// record without acting, Stopping, Parked) has not caught up: the pass then
// judges as if the object did not act yet. One that shows it acting for
// nothing after a Claimed write here has not caught up either: the pass
// tells it to stop before it may say so. Memory that only makes a pass check
// or tell more, never less. A parked pass told to release records reads
// its condition uncached unless the cache shows the condition last written
// (or read) here: a restarted process's cache may not show the previous
// process's last write yet (lags).
type writtenConditions struct {
	mu sync.Mutex
	m  map[types.NamespacedName]written
}

// written is what an object may say in the API server, by the conditions
// written here for it: one after a write that succeeded (or a read
// uncached), either of two after a write answered with an error, which may
// have been applied all the same (a timeout after the server wrote it).
type written struct {
	claimed, other bool
	// last is the condition obj says by the last write here that
	// succeeded, or the last uncached read; known is false while the
	// answer to a later write is not known.
	last  metav1.Condition
	known bool
}

func isClaimed(cond metav1.Condition) bool {
	return cond.Reason == string(conditions.ReasonClaimed) && cond.Status == metav1.ConditionTrue
}

// note records cond as what obj says in the API server: written here, or
// read uncached.
func (w *writtenConditions) note(obj types.NamespacedName, cond metav1.Condition) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.NamespacedName]written{}
	}
	w.m[obj] = written{claimed: isClaimed(cond), other: !isClaimed(cond), last: cond, known: true}
}

// lags reports whether cached, the condition a cache shows for obj, may be
// older than what obj says in the API server: nothing was written here (or
// read uncached) since this process started, so nothing shows the cache
// caught up (a restarted process's cache may not show the previous one's
// last write yet), or cached is not the last of those, or the answer to a
// later write is not known.
func (w *writtenConditions) lags(obj types.NamespacedName, cached metav1.Condition) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.m[obj]
	return !ok || !v.known || !sameJudgement(v.last, cached)
}

// attempt records a write of cond whose answer is not known yet: obj may
// say it, or what it said before.
func (w *writtenConditions) attempt(obj types.NamespacedName, cond metav1.Condition) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.NamespacedName]written{}
	}
	v := w.m[obj]
	v.claimed = v.claimed || isClaimed(cond)
	v.other = v.other || !isClaimed(cond)
	v.known = false
	w.m[obj] = v
}

// staleClaimed reports whether obj may say something other than Claimed by
// the conditions written here: a cached Claimed is then read again.
func (w *writtenConditions) staleClaimed(obj types.NamespacedName) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m[obj].other
}

// saidClaimed reports whether obj may say Claimed by the conditions written
// here.
func (w *writtenConditions) saidClaimed(obj types.NamespacedName) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m[obj].claimed
}

func (w *writtenConditions) forget(obj types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, obj)
}

// sameJudgement reports whether two readings of a claim condition say the
// same thing a pass decides from.
func sameJudgement(a, b metav1.Condition) bool {
	return a.Reason == b.Reason && a.Status == b.Status && a.ObservedGeneration == b.ObservedGeneration && a.Message == b.Message
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
