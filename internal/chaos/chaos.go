// Package chaos injects faults between a claim participant and the API
// server, following a seeded schedule so that a failing run replays exactly.
//
// [Wrap] returns a client.WithWatch whose calls, per the [Schedule]:
//
//   - fail before reaching the server with Conflict (AlreadyExists for a
//     Create), ServerTimeout or TooManyRequests;
//   - are ambiguous: the write reaches the server and is applied, and the
//     caller gets a timeout as if the response had been lost;
//   - are delayed before the call, or after it, so that the caller acts on a
//     read that has aged, as a slow network or a lagging reader would make it;
//   - crash the caller: its context is cancelled before the call, or after a
//     write was applied, and the caller never sees the result.
//
// The package is test-only. Its suites (this directory's tests) run the
// randomized contention on envtest, the control-plane restart and the
// hostile-input tables; see docs/reliability.md.
package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// Fault is one kind of injected fault.
type Fault int

// The faults a Schedule draws from.
const (
	None Fault = iota
	Conflict
	Timeout
	Throttle
	Ambiguous
	Delay
	CrashBefore
	CrashAfter
	numFaults
)

var faultNames = [...]string{"none", "conflict", "timeout", "throttle", "ambiguous", "delay", "crash-before", "crash-after"}

func (f Fault) String() string { return faultNames[f] }

// Profile gives each fault's probability per call. Write-only faults
// (Conflict, Ambiguous, CrashAfter) are drawn for reads as None.
type Profile struct {
	Conflict, Timeout, Throttle, Ambiguous, Delay, CrashBefore, CrashAfter float64
	// MaxDelay bounds a Delay. Default 20ms.
	MaxDelay time.Duration
}

// Default is the profile of the randomized suite: about one call in four
// misbehaves, one in a hundred crashes its caller.
var Default = Profile{Conflict: 0.05, Timeout: 0.04, Throttle: 0.03, Ambiguous: 0.05, Delay: 0.08, CrashBefore: 0.005, CrashAfter: 0.005, MaxDelay: 20 * time.Millisecond}

// Stats counts injected faults across schedules; safe for concurrent use.
type Stats struct {
	calls  atomic.Int64
	faults [numFaults]atomic.Int64
}

// Calls is how many calls went through wrapped clients.
func (s *Stats) Calls() int64 { return s.calls.Load() }

// Injected is how many calls got a fault other than None.
func (s *Stats) Injected() int64 {
	var n int64
	for f := Conflict; f < numFaults; f++ {
		n += s.faults[f].Load()
	}
	return n
}

// Add adds other's counts to s.
func (s *Stats) Add(other *Stats) {
	s.calls.Add(other.calls.Load())
	for f := range numFaults {
		s.faults[f].Add(other.faults[f].Load())
	}
}

// String lists the count of each fault.
func (s *Stats) String() string {
	out := fmt.Sprintf("calls=%d faults=%d (", s.Calls(), s.Injected())
	for f := Conflict; f < numFaults; f++ {
		if f > Conflict {
			out += " "
		}
		out += fmt.Sprintf("%s=%d", f, s.faults[f].Load())
	}
	return out + ")"
}

// Schedule draws faults from a seeded generator. One schedule serves one
// participant; its draws are serialized, so a participant that calls
// sequentially replays the same faults for the same seed.
type Schedule struct {
	mu      sync.Mutex
	rng     *rand.Rand
	p       Profile
	stats   *Stats
	crash   func()
	enabled atomic.Bool
}

// NewSchedule returns an enabled schedule of p seeded with seed, counting
// into stats (which may be shared). crash is called when the schedule crashes
// the caller; it should cancel the caller's context.
func NewSchedule(seed uint64, p Profile, stats *Stats, crash func()) *Schedule {
	if p.MaxDelay == 0 {
		p.MaxDelay = 20 * time.Millisecond
	}
	s := &Schedule{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), p: p, stats: stats, crash: crash}
	s.enabled.Store(true)
	return s
}

// SetEnabled turns injection on or off, for a final sweep that must succeed.
func (s *Schedule) SetEnabled(on bool) { s.enabled.Store(on) }

func (s *Schedule) draw(write bool) (Fault, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.calls.Add(1)
	if !s.enabled.Load() {
		return None, 0
	}
	r := s.rng.Float64()
	delay := time.Duration(s.rng.Int64N(int64(s.p.MaxDelay)))
	f := None
	for _, c := range []struct {
		f Fault
		p float64
	}{{Conflict, s.p.Conflict}, {Timeout, s.p.Timeout}, {Throttle, s.p.Throttle}, {Ambiguous, s.p.Ambiguous}, {Delay, s.p.Delay}, {CrashBefore, s.p.CrashBefore}, {CrashAfter, s.p.CrashAfter}} {
		if r < c.p {
			f = c.f
			break
		}
		r -= c.p
	}
	if !write && (f == Conflict || f == Ambiguous || f == CrashAfter) {
		f = None
	}
	s.stats.faults[f].Add(1)
	return f, delay
}

var leases = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// around runs call under the drawn fault.
func (s *Schedule) around(ctx context.Context, write bool, name string, conflict func() error, call func(context.Context) error) error {
	f, delay := s.draw(write)
	switch f {
	case Conflict:
		return conflict()
	case Timeout:
		return apierrors.NewServerTimeout(leases, "chaos", 1)
	case Throttle:
		return apierrors.NewTooManyRequests("chaos: throttled", 1)
	case CrashBefore:
		s.crash()
		return fmt.Errorf("chaos: crashed before calling the API server: %w", context.Canceled)
	case Delay:
		if s.rng2(delay) {
			time.Sleep(delay)
			return call(ctx)
		}
		err := call(ctx)
		time.Sleep(delay)
		return err
	case Ambiguous:
		if err := call(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		return apierrors.NewTimeoutError(fmt.Sprintf("chaos: the response to %s was lost after the server applied it", name), 1)
	case CrashAfter:
		err := call(context.WithoutCancel(ctx))
		s.crash()
		return fmt.Errorf("chaos: crashed after calling the API server (its answer was %v): %w", err, context.Canceled) //nolint:errorlint // the lost answer may be nil; the crash is what callers test for
	}
	return call(ctx)
}

// rng2 decides whether a delay comes before the call (true) or after it;
// derived from the delay itself so that it needs no second draw.
func (s *Schedule) rng2(d time.Duration) bool { return d%2 == 0 }

// Wrap returns c with s's faults injected into Get, List, Create, Update,
// Patch and Delete.
func Wrap(c client.WithWatch, s *Schedule) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			return s.around(ctx, false, "get "+key.String(), nil, func(ctx context.Context) error { return c.Get(ctx, key, obj, opts...) })
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			return s.around(ctx, false, "list", nil, func(ctx context.Context) error { return c.List(ctx, list, opts...) })
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return s.around(ctx, true, "create "+obj.GetName(), func() error {
				return apierrors.NewAlreadyExists(leases, obj.GetName())
			}, func(ctx context.Context) error { return c.Create(ctx, obj, opts...) })
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return s.around(ctx, true, "update "+obj.GetName(), func() error {
				return apierrors.NewConflict(leases, obj.GetName(), fmt.Errorf("chaos: injected conflict"))
			}, func(ctx context.Context) error { return c.Update(ctx, obj, opts...) })
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			return s.around(ctx, true, "patch "+obj.GetName(), func() error {
				return apierrors.NewConflict(leases, obj.GetName(), fmt.Errorf("chaos: injected conflict"))
			}, func(ctx context.Context) error { return c.Patch(ctx, obj, p, opts...) })
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			return s.around(ctx, true, "delete "+obj.GetName(), func() error {
				return apierrors.NewConflict(leases, obj.GetName(), fmt.Errorf("chaos: injected conflict"))
			}, func(ctx context.Context) error { return c.Delete(ctx, obj, opts...) })
		},
	})
}
