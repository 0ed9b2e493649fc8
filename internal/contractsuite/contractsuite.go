// Package contractsuite is what the exported contract suites
// (pkg/backends/backendtest, pkg/generation/generationtest) share: running
// their cases as subtests, and one case under a deadline with its failure
// named after it. Each suite keeps its own cases, worlds and failures.
package contractsuite

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// Run runs every case as a subtest named name(c) and fails that subtest
// with the error check returns for it.
func Run[C any](t *testing.T, cases []C, name func(C) string, check func(*testing.T, C) error) {
	t.Helper()
	for _, c := range cases {
		t.Run(name(c), func(t *testing.T) {
			if err := check(t, c); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Check runs one case named name with a context that ends after timeout,
// and returns its failure prefixed with name (errors.Is still sees the
// failure), nil when the case passed.
func Check(name string, timeout time.Duration, run func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := run(ctx); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
