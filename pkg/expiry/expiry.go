package expiry

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/ocf-claim/claim/internal/claimhook"
	"github.com/ocf-claim/claim/pkg/claim"
)

// Liveness is a time-based claim.Liveness for holders that are processes,
// or that may hang without disappearing: a holder is dead once its claim has
// not been renewed for the lease duration.
//
// It judges the client-go way: from the local clock's time at which this
// process last saw the claim renewed, never by comparing the record's
// renewTime, written by another machine's clock, with the local clock. A
// renewal is a change of the protocol's renew marker: a new holder, a new
// grant, or a new RenewTime, which every grant and every [Renew] writes and
// which only the protocol writes. Other writes to the object that stores the
// record do not count: a label edited on a Lease, or, on the annotation
// backend, the operator writing the claimed object, change its
// resourceVersion but renew nothing, so a dead holder still expires. So a
// holder whose clock is skewed is not taken over early, and a fresh process
// waits a whole duration before it takes over anything, since it has never
// seen the record change. With the real clock the comparison uses Go's
// monotonic clock, which a wall-clock jump does not move.
//
// Holders renew their records with [Renew], or with a [Keeper].
type Liveness struct {
	duration time.Duration
	clock    clock.PassiveClock

	mu   sync.Mutex
	seen map[recordID]observation
}

// recordID names one stored record: one Liveness may judge records of one
// key kept by several Claimers (two claim namespaces, two prefixes), whose
// renew markers must not be taken for each other's changes.
type recordID struct {
	key string
	ref types.NamespacedName
}

type observation struct {
	marker renewMarker
	at     time.Time
}

// renewMarker is what changes when, and only when, the protocol grants or
// renews a claim.
type renewMarker struct {
	holder   types.UID
	acquired time.Time
	renewed  time.Time
}

func markerOf(rec claim.Record) renewMarker {
	// Times as stored: the monotonic reading and location do not survive a
	// round trip through a backend, and must not make equal marks differ.
	return renewMarker{holder: rec.Holder.UID, acquired: rec.AcquireTime.Round(0).UTC(), renewed: rec.RenewTime.Round(0).UTC()}
}

// New returns a Liveness with the given lease duration, on clk (the real
// clock when nil). The duration must be positive.
func New(duration time.Duration, clk clock.PassiveClock) (*Liveness, error) {
	if duration <= 0 {
		return nil, fmt.Errorf("configuring expiry: duration %v is not positive", duration)
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Liveness{duration: duration, clock: clk, seen: map[recordID]observation{}}, nil
}

// Alive reports whether rec's claim was granted or renewed within the lease
// duration, as seen by this process.
func (e *Liveness) Alive(_ context.Context, rec claim.Record) (bool, error) {
	now := e.clock.Now()
	mark := markerOf(rec)
	e.mu.Lock()
	defer e.mu.Unlock()
	id := recordID{key: rec.Key, ref: rec.Ref}
	last, ok := e.seen[id]
	if !ok || last.marker != mark {
		e.seen[id] = observation{marker: mark, at: now}
		return true, nil
	}
	return now.Sub(last.at) < e.duration, nil
}

// ErrRenewDeadline is the cause of a Keeper's context when the holder could
// not renew its claim before its renew deadline: it must stop acting, as
// another process may judge it dead soon.
var ErrRenewDeadline = errors.New("claim not renewed before the renew deadline")

// KeeperConfig times a Keeper. RenewEvery < RenewDeadline < Duration, where
// Duration is the lease duration the contenders' Liveness uses.
type KeeperConfig struct {
	Duration      time.Duration
	RenewEvery    time.Duration
	RenewDeadline time.Duration
	// Clock drives the renew ticker and the deadline. It must be the clock
	// of the Claimer, whose readings [claim.Outcome.Sent] carries. Default:
	// the Claimer's clock when it has a ticker (claim.WithClock of a
	// clock.WithTicker), otherwise the real one. A nil *T is refused.
	Clock clock.WithTicker
}

// Keeper keeps time-bound claims alive and tells the holder when to stop
// acting.
type Keeper struct {
	claimer *claim.Claimer
	cfg     KeeperConfig
}

// NewKeeper validates cfg and returns a Keeper renewing through c.
func NewKeeper(c *claim.Claimer, cfg KeeperConfig) (*Keeper, error) {
	var errs []error
	if c == nil {
		errs = append(errs, errors.New("claimer: nil"))
	}
	if cfg.RenewEvery <= 0 || cfg.RenewEvery >= cfg.RenewDeadline || cfg.RenewDeadline >= cfg.Duration {
		errs = append(errs, fmt.Errorf("timings: want 0 < RenewEvery (%v) < RenewDeadline (%v) < Duration (%v)", cfg.RenewEvery, cfg.RenewDeadline, cfg.Duration))
	}
	if cfg.Clock != nil {
		// A nil *T clock is not nil as an interface: the first renewal
		// would panic on it.
		if v := reflect.ValueOf(cfg.Clock); v.Kind() == reflect.Pointer && v.IsNil() {
			errs = append(errs, fmt.Errorf("Clock: a nil %T", cfg.Clock))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("configuring keeper: %w", errors.Join(errs...))
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
		if withTicker, ok := claimhook.Clock(c).(clock.WithTicker); ok {
			cfg.Clock = withTicker
		}
	}
	return &Keeper{claimer: c, cfg: cfg}, nil
}

// Config returns the Keeper's configuration, every default filled in (its
// Clock included), for code that waits on the time its deadlines count.
func (k *Keeper) Config() KeeperConfig { return k.cfg }

// Renew records that self, which holds key, is still alive: one write of a
// new renew marker that keeps the grant and passes its token on, sent
// through c. (The token it reports is the grant's, or higher when someone
// else wrote the record's object since; see claim.Token.)
// Its Outcome (ReasonHeld, with [claim.Outcome.Sent]) may be given to
// [Keeper.Hold]. It fails with an error wrapping claim.ErrNotHolder when self
// no longer holds key, and with one wrapping backends.ErrConflict when the
// record changed between the read and the write.
func Renew(ctx context.Context, c *claim.Claimer, key string, self claim.Holder) (claim.Outcome, error) {
	if c == nil {
		return claim.Outcome{}, errors.New("renewing claim: claimer is nil")
	}
	o, err := claimhook.Renew(ctx, c, key, self)
	out, _ := o.(claim.Outcome)
	return out, err
}

// Hold keeps the claim that granted reports: it renews granted.Holder's
// claim on key every RenewEvery until stop is called or ctx ends, and
// returns a context for the work the claim guards. key is the key as the
// caller has it, as given to Acquire: every Claimer method normalizes it.
//
// granted is the Outcome of the write that granted or last renewed the key:
// an Acquire that wrote (Acquired, TakenOver), a Commit, or a [Renew].
// The held context is cancelled, with cause ErrRenewDeadline, once
// RenewDeadline has passed since the last successful write was sent, the
// first being granted's ([claim.Outcome.Sent]), not the call to Hold: a contender
// counts its lease duration from the moment it saw that write, which can be
// no earlier than its sending, so time spent between the write and Hold
// counts against the holder. It is cancelled also while a renewal hangs; and
// at once, with a cause wrapping claim.ErrNotHolder, when a renewal finds that the
// holder lost the claim.
//
// The first renewal is sent RenewEvery after Hold is called: call Hold right
// after the grant, or time spent before it shortens the hold. One renewal is
// in flight at a time: one due while another is still in flight is sent as
// soon as that one returns.
//
// An Outcome that is not granted, or that wrote nothing (a re-entry, Held
// from Acquire), cannot say when the deadline started: the held context is
// cancelled at once. Renew first and hold the Renew's Outcome.
func (k *Keeper) Hold(ctx context.Context, key string, granted claim.Outcome) (held context.Context, stop func()) {
	return k.hold(ctx, key, granted, func(ctx context.Context) error {
		_, err := Renew(ctx, k.claimer, key, granted.Holder)
		return err
	})
}

func init() {
	claimhook.HoldNormalized = func(keeper any, ctx context.Context, key string, granted any) (context.Context, func()) {
		k := keeper.(*Keeper)
		o, _ := granted.(claim.Outcome)
		return k.hold(ctx, key, o, func(ctx context.Context) error {
			_, err := claimhook.RenewNormalized(ctx, k.claimer, key, o.Holder)
			return err
		})
	}
}

// hold is Hold with the renewal it sends.
func (k *Keeper) hold(ctx context.Context, key string, granted claim.Outcome, renew func(context.Context) error) (held context.Context, stop func()) {
	self := granted.Holder
	// Causes end up in logs: name the key as the grant normalized it, and
	// never with the user info of a URL in it.
	shown := key
	if granted.Key != "" {
		shown = granted.Key
	}
	shown = claim.Redact(shown)
	held, cancel := context.WithCancelCause(ctx)
	switch {
	case !granted.Granted():
		cancel(fmt.Errorf("holding claim %q: %w: the outcome is %s", shown, claim.ErrNotHolder, granted.Reason))
		return held, func() {}
	case granted.Sent.IsZero():
		cancel(fmt.Errorf("%w: key %q, holder %s: the outcome wrote nothing, so the deadline's start is unknown; renew first", ErrRenewDeadline, shown, self))
		return held, func() {}
	}
	clk := k.cfg.Clock
	left := k.cfg.RenewDeadline - clk.Since(granted.Sent)
	if left <= 0 {
		cancel(fmt.Errorf("%w: key %q, holder %s: %v passed since the grant was sent", ErrRenewDeadline, shown, self, clk.Since(granted.Sent)))
		return held, func() {}
	}
	ticker := clk.NewTicker(k.cfg.RenewEvery)
	deadline := clk.NewTimer(left)
	done := make(chan struct{})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			close(done)
			cancel(context.Canceled)
		})
	}
	type result struct {
		sent time.Time
		err  error
	}
	results := make(chan result, 1)
	go func() {
		defer ticker.Stop()
		defer deadline.Stop()
		inflight, due := false, false
		send := func() {
			inflight, due = true, false
			sent := clk.Now()
			go func() {
				results <- result{sent: sent, err: renew(held)}
			}()
		}
		for {
			select {
			case <-done:
				return
			case <-held.Done():
				return
			case <-deadline.C():
				cancel(fmt.Errorf("%w: key %q, holder %s", ErrRenewDeadline, shown, self))
				return
			case <-ticker.C():
				if inflight {
					// A renewal that hangs must not pile up more (the
					// deadline timer ends the hold if it never returns),
					// but a slow one must not cost a whole period either:
					// the renewal it delayed goes out when it returns.
					due = true
					continue
				}
				send()
			case r := <-results:
				inflight = false
				switch {
				case r.err == nil:
					// Count from when the renewal was sent: contenders
					// saw the record change no earlier than that.
					left := k.cfg.RenewDeadline - clk.Since(r.sent)
					if left <= 0 {
						cancel(fmt.Errorf("%w: key %q, holder %s: the last renewal took until its deadline", ErrRenewDeadline, shown, self))
						return
					}
					deadline.Reset(left)
				case errors.Is(r.err, claim.ErrNotHolder):
					cancel(r.err)
					return
				}
				if due {
					send()
				}
			}
		}
	}()
	return held, stop
}
