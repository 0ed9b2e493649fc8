package generation_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ocf-claim/claim/pkg/generation"
)

// TestEveryBackendNamesEmptyAndOversizedNamesAsInvalidRequests: the
// read calls refuse a name no request may carry (empty, longer than 253
// bytes) with ErrInvalidRequest on every backend, as the Kubernetes backend
// does, rather than answering "not found" on one and "invalid" on the other:
// code unit-tested on the memory backend must see the errors it will see
// in production.
func TestEveryBackendNamesEmptyAndOversizedNamesAsInvalidRequests(t *testing.T) {
	ctx := context.Background()
	long := strings.Repeat("x", 1025)
	onEveryBackend(t, func(t *testing.T, b generation.Backend) {
		defer b.Close()
		calls := []struct {
			what string
			call func() error
		}{
			{"GetClaim with an empty name", func() error { _, err := b.GetClaim(ctx, ""); return err }},
			{"GetClaim with a 1025-byte name", func() error { _, err := b.GetClaim(ctx, long); return err }},
			{"GetGeneration with an empty ID", func() error { _, err := b.GetGeneration(ctx, ""); return err }},
			{"GetGeneration with a 1025-byte ID", func() error { _, err := b.GetGeneration(ctx, long); return err }},
		}
		for _, c := range calls {
			if err := c.call(); !errors.Is(err, generation.ErrInvalidRequest) {
				t.Errorf("%s: %.100v, want ErrInvalidRequest", c.what, err)
			}
		}
	})
}
