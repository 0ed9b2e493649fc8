package generation

import (
	"time"

	"k8s.io/utils/clock"
)

// Clock provides time for deterministic tests. A backend reads every time it
// uses from its Clock.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
	NewTicker(d time.Duration) Ticker
	Since(t time.Time) time.Duration
}

// Ticker is a cancelable periodic timer.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// RealClock is the wall clock (with Go's monotonic reading, so Since is not
// moved by a wall-clock jump).
var RealClock Clock = FromClock(clock.RealClock{})

// FromClock adapts a k8s.io/utils clock, such as clock/testing.FakeClock, to
// Clock.
func FromClock(c clock.WithTicker) Clock { return kclock{c} }

type kclock struct{ c clock.WithTicker }

func (k kclock) Now() time.Time                         { return k.c.Now() }
func (k kclock) After(d time.Duration) <-chan time.Time { return k.c.After(d) }
func (k kclock) Since(t time.Time) time.Duration        { return k.c.Since(t) }
func (k kclock) NewTicker(d time.Duration) Ticker       { return k.c.NewTicker(d) }
