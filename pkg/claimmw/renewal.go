package claimmw

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ocf-claim/claim/internal/claimhook"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/expiry"
)

// errStopped is the cause of a hold asked for after the middleware stopped.
var errStopped = errors.New("claim middleware stopped; no claim is renewed any more")

// renewals keeps one expiry.Keeper hold running per (object, key) the
// middleware granted, when [WithRenewal] is set: the holds renew the records
// between passes, so that contenders judging by expiry.Liveness see the holder
// alive, and their contexts end when a renewal misses its deadline or finds
// the claim lost. A nil *renewals keeps nothing and guards nothing.
type renewals struct {
	keeper  *expiry.Keeper
	claimer *claim.Claimer
	// ended receives the object of a hold that ended on its own (its renew
	// deadline passed, or a renewal found the claim lost) rather than by
	// stop: the object's workloads, which outlive its passes, must be told
	// to stop before a contender's count of the lease duration runs out,
	// and nothing else may reconcile it before then.
	ended chan event.GenericEvent
	// prototype is the middleware's object type, for those events.
	prototype client.Object

	mu    sync.Mutex
	holds map[holdKey]*hold
	// retrying are the records a retry goroutine renews until it succeeds,
	// each with the ticket of that goroutine; stop, stopExcept and close
	// take it back, and the goroutine ends at its next turn.
	retrying map[holdKey]*retryTicket
	closed   bool
}

type holdKey struct {
	obj types.NamespacedName
	key string
}

type hold struct {
	uid  types.UID
	ctx  context.Context //nolint:containedctx // the hold's own lifetime, ended by stop or by the Keeper
	stop func()
}

// holdEndedBuffer bounds the ended holds waiting for the controller; one
// dropped when it is full is still seen by the object's next pass.
const holdEndedBuffer = 1024

func newRenewals(c *claim.Claimer, cfg expiry.KeeperConfig, prototype client.Object) (*renewals, error) {
	k, err := expiry.NewKeeper(c, cfg)
	if err != nil {
		return nil, err
	}
	return &renewals{keeper: k, claimer: c, holds: map[holdKey]*hold{}, retrying: map[holdKey]*retryTicket{}, ended: make(chan event.GenericEvent, holdEndedBuffer), prototype: prototype}, nil
}

// watch wakes obj when the hold held ends on its own.
func (r *renewals) watch(obj types.NamespacedName, held context.Context) {
	context.AfterFunc(held, func() {
		cause := context.Cause(held)
		if !errors.Is(cause, expiry.ErrRenewDeadline) && !errors.Is(cause, claim.ErrNotHolder) {
			return
		}
		target := newObject(r.prototype)
		target.SetNamespace(obj.Namespace)
		target.SetName(obj.Name)
		select {
		case r.ended <- event.GenericEvent{Object: target}:
		default:
		}
	})
}

// ensure returns the live hold of every key granted to self in this pass,
// starting a hold for each key that has none. A key granted without a write
// (ReasonHeld) whose hold ended, or that this process never held (a
// restart), is renewed once first: the renewal proves, by a write
// conditional on the record, that self still holds it, and restarts the
// contenders' count of the lease duration.
func (r *renewals) ensure(ctx context.Context, obj types.NamespacedName, self claim.Holder, granted []heldKey) (map[string]context.Context, error) {
	if r == nil || len(granted) == 0 {
		return nil, nil
	}
	out := make(map[string]context.Context, len(granted))
	for _, g := range granted {
		o := g.o
		hk := holdKey{obj: obj, key: o.Key}
		live, stopped, closed := r.current(hk, self.UID)
		if closed {
			return nil, errStopped
		}
		if live != nil {
			out[o.Key] = live
			continue
		}
		if stopped != nil {
			log.FromContext(ctx).Info("claim hold ended; holding again", "claimKey", o.Key, "cause", context.Cause(stopped.ctx).Error())
		}
		if o.Reason == claim.ReasonHeld {
			renewed, err := expiry.Renew(ctx, r.claimer, g.raw, self)
			if err != nil {
				r.drop(hk)
				return nil, fmt.Errorf("renewing claim %q before holding it again: %w", o.Key, err)
			}
			// The renew deadline counts from this write, not the old grant.
			o = renewed
		}
		// The hold outlives this pass: it renews until the claim is released,
		// lost, handed over, or the object deleted, each of which stops it.
		hctx, stop := r.keeper.Hold(context.WithoutCancel(ctx), g.raw, o)
		hctx, ok := r.install(hk, self.UID, hctx, stop)
		if !ok {
			return nil, errStopped
		}
		out[o.Key] = hctx
	}
	return out, nil
}

// current returns the context of hk's hold when it is uid's and has not
// ended. A hold of hk that is another holder's or has ended is stopped and
// returned as stopped, for the caller to log why it ended; closed is true
// once the renewals are closed, and then nothing is stopped.
func (r *renewals) current(hk holdKey, uid types.UID) (live context.Context, stopped *hold, closed bool) {
	r.mu.Lock()
	h, ok := r.holds[hk]
	closed = r.closed
	r.mu.Unlock()
	switch {
	case closed || !ok:
		return nil, nil, closed
	case h.liveFor(uid):
		return h.ctx, nil, false
	}
	h.stop()
	return nil, h, false
}

// liveFor reports whether h is uid's hold and has not ended.
func (h *hold) liveFor(uid types.UID) bool { return h.uid == uid && h.ctx.Err() == nil }

// install makes a new hold of hk the one the renewals keep, and returns the
// context of the hold in effect; false once the renewals are closed (the
// new hold is stopped). A live hold of the same holder installed meanwhile
// (a pass and the renewals resumed at start both found none) stays, and the
// new one is stopped: two holds of one record would leave one that nothing
// stops.
func (r *renewals) install(hk holdKey, uid types.UID, hctx context.Context, stop func()) (context.Context, bool) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		stop()
		return nil, false
	}
	old, ok := r.holds[hk]
	if ok && old.liveFor(uid) {
		r.mu.Unlock()
		stop()
		return old.ctx, true
	}
	r.holds[hk] = &hold{uid: uid, ctx: hctx, stop: stop}
	r.mu.Unlock()
	if ok {
		old.stop()
	}
	r.watch(hk.obj, hctx)
	return hctx, true
}

// keep starts a hold, where none is live, for every record of recs that self
// still holds but does not act for as granted in this pass: keys it gives
// up, keys it keeps while its key set is unknown, and, on the deletion path,
// every key it still holds. A record stays renewed until it is deleted, so
// that no contender judging by expiry takes a key over while its holder
// may still be stopping its use of it. Each is renewed once first (by the
// key as stored: its raw form may be unknown), which proves it is still
// held. A record found lost is skipped; any other renewal error is logged
// and the renewal tried again in the background until it succeeds or the
// record is lost (retry), as a pass that must stop using a key is never
// held up by a renewal. It returns the live holds by key.
func (r *renewals) keep(ctx context.Context, obj types.NamespacedName, self claim.Holder, recs []claim.Record) map[string]context.Context {
	if r == nil || len(recs) == 0 {
		return nil
	}
	out := make(map[string]context.Context, len(recs))
	for _, rec := range recs {
		hk := holdKey{obj: obj, key: rec.Key}
		live, _, closed := r.current(hk, self.UID)
		if closed {
			return out
		}
		if live != nil {
			out[rec.Key] = live
			continue
		}
		hctx, err := r.renewAndHold(ctx, hk, self)
		switch {
		case errors.Is(err, errStopped):
			return out
		case errors.Is(err, claim.ErrNotHolder):
			continue
		case err != nil:
			log.FromContext(ctx).Error(err, "renewing a claim the object still holds; trying again", "claimKey", claim.Redact(rec.Key))
			r.retry(ctx, hk, self)
			continue
		}
		out[rec.Key] = hctx
	}
	return out
}

// renewAndHold renews hk's record once and installs a hold of it. Without a
// hold of hk afterwards, it returns errStopped when the renewals closed, an
// error wrapping claim.ErrNotHolder when the record is lost, or the
// renewal's error.
func (r *renewals) renewAndHold(ctx context.Context, hk holdKey, self claim.Holder) (context.Context, error) {
	renewed, err := claimhook.RenewNormalized(ctx, r.claimer, hk.key, self)
	if err != nil {
		r.drop(hk)
		return nil, err
	}
	hctx, stop := claimhook.HoldNormalized(r.keeper, context.WithoutCancel(ctx), hk.key, renewed)
	hctx, ok := r.install(hk, self.UID, hctx, stop)
	if !ok {
		return nil, errStopped
	}
	return hctx, nil
}

// retry tries, in the background, the first renewal of a record keep could
// not renew, again and again (after retryFirst, doubling up to RenewEvery)
// until one succeeds and its hold is installed, the record is found lost,
// a hold of it is live again (a pass installed one), its hold is stopped
// (stop, stopExcept: the record released or handed over, the object
// forgotten once gone), or the renewals close:
// no pass may come before a contender's count of the lease duration runs
// out (a starting process resumes renewals before the first passes), and
// nothing but a renewal keeps the key from expiring under its holder.
func (r *renewals) retry(ctx context.Context, hk holdKey, self claim.Holder) {
	// One retry per record: every pass of a holder whose renewals are
	// refused calls keep again.
	r.mu.Lock()
	if r.retrying[hk] != nil || r.closed {
		r.mu.Unlock()
		return
	}
	ticket := &retryTicket{}
	r.retrying[hk] = ticket
	r.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer func() {
			r.mu.Lock()
			if r.retrying[hk] == ticket {
				delete(r.retrying, hk)
			}
			r.mu.Unlock()
		}()
		// The Keeper's clock: retries wait on the time its deadlines count.
		cfg := r.keeper.Config()
		wait := retryFirst
		for {
			<-cfg.Clock.After(wait)
			wait = min(2*wait, cfg.RenewEvery)
			r.mu.Lock()
			h, ok := r.holds[hk]
			// Taken back: the record was released or handed over, the
			// object forgotten, or the renewals closed.
			taken := r.retrying[hk] != ticket
			r.mu.Unlock()
			if taken || ok && h.liveFor(self.UID) {
				return
			}
			_, err := r.renewAndHold(ctx, hk, self)
			switch {
			case err == nil, errors.Is(err, errStopped), errors.Is(err, claim.ErrNotHolder):
				return
			}
			log.FromContext(ctx).V(1).Info("renewing a claim the object still holds failed again; trying again", "claimKey", claim.Redact(hk.key), "error", err.Error())
		}
	}()
}

// retryFirst is the first wait of retry.
const retryFirst = 50 * time.Millisecond

// retryTicket tells one retry goroutine from the next of the same record.
type retryTicket struct{ _ byte }

// stop ends obj's hold of key, and its retry, if any.
func (r *renewals) stop(obj types.NamespacedName, key string) {
	if r == nil {
		return
	}
	hk := holdKey{obj: obj, key: key}
	r.mu.Lock()
	delete(r.retrying, hk)
	r.mu.Unlock()
	r.drop(hk)
}

func (r *renewals) drop(hk holdKey) {
	r.mu.Lock()
	h, ok := r.holds[hk]
	delete(r.holds, hk)
	r.mu.Unlock()
	if ok {
		h.stop()
	}
}

// stopExcept ends every hold and retry of obj whose key is not in keep.
func (r *renewals) stopExcept(obj types.NamespacedName, keep ...string) {
	if r == nil {
		return
	}
	r.mu.Lock()
	for hk := range r.retrying {
		if hk.obj == obj && !slices.Contains(keep, hk.key) {
			delete(r.retrying, hk)
		}
	}
	var ended []*hold
	for hk, h := range r.holds {
		if hk.obj != obj || slices.Contains(keep, hk.key) {
			continue
		}
		delete(r.holds, hk)
		ended = append(ended, h)
	}
	r.mu.Unlock()
	for _, h := range ended {
		h.stop()
	}
}

// close ends every hold and refuses new ones.
func (r *renewals) close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.closed = true
	ended := r.holds
	r.holds = map[holdKey]*hold{}
	clear(r.retrying)
	r.mu.Unlock()
	for _, h := range ended {
		h.stop()
	}
}

// guard returns a context for the inner reconciler that is cancelled as
// soon as any of holds ends, with a cause naming the key and wrapping the
// hold's cause (expiry.ErrRenewDeadline, or claim.ErrNotHolder). release must
// be called when the inner pass returned.
func guard(ctx context.Context, holds map[string]context.Context) (context.Context, func()) {
	if len(holds) == 0 {
		return ctx, func() {}
	}
	guarded, cancel := context.WithCancelCause(ctx)
	stops := make([]func() bool, 0, len(holds))
	for key, h := range holds {
		stops = append(stops, context.AfterFunc(h, func() {
			cancel(fmt.Errorf("claim %q is no longer held for this pass: %w", key, context.Cause(h)))
		}))
	}
	return guarded, func() {
		for _, s := range stops {
			s()
		}
		cancel(context.Canceled)
	}
}
