// Package contractsuite is what the exported contract suites
// (pkg/backends/backendtest, pkg/generation/generationtest) share: running
// their cases as subtests, and one case on the Env its harness built, under a
// deadline, with its failure named after it. Each suite keeps its own cases,
// worlds and failures.
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

// Check runs one case named name: it builds the case's Env with harness,
// fails t when validate refuses that Env (the harness is at fault, not the
// backend under test), and runs the case on it with a context that ends after
// timeout. It returns the case's failure prefixed with name (errors.Is still
// sees the failure), nil when the case passed.
func Check[E any](t *testing.T, name string, timeout time.Duration, harness func(*testing.T) E, validate func(E) error, run func(ctx context.Context, env E) error) error {
	t.Helper()
	env := harness(t)
	if err := validate(env); err != nil {
		t.Fatalf("building the Env of %s: %v", name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := run(ctx, env); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
