package claimmw

import "time"

// WithStateForTest exposes withState to the external tests.
var WithStateForTest = withState

// WithHerdWaitForTest holds a freed key's namers but the first back for up
// to d (herds), in place of a second.
func WithHerdWaitForTest(d time.Duration) Option {
	return func(c *config) { c.herdWait = d }
}
