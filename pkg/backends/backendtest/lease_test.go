package backendtest_test

// The Lease backend's contract run lives here, beside the suite, so that the
// lease package's own tests stay its own.

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/backendtest"
	"github.com/ocf-claim/claim/pkg/backends/lease"
)

// leaseHarness gives each case a fresh namespace for its Leases and holders.
func leaseHarness(t *testing.T) backendtest.Env {
	ns := env.Namespace(t)
	writer := env.TestClient(t)
	e := backendtest.ConfigMapEnv(env.APIReader, writer, ns)
	e.Backend = lease.Backend
	var keys atomic.Int64
	e.NewKey = func(*testing.T) string { return fmt.Sprintf("postgres://db-%d.example:5432/app", keys.Add(1)) }
	e.SeedForeign = func(t *testing.T, key string) {
		// A Lease at the key's name that a hand-written claim left,
		// without the holder annotations.
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: backends.HashName(backends.DefaultPrefix, key)}}
		if err := writer.Create(context.Background(), l); err != nil {
			t.Fatalf("seeding a foreign Lease for %q: %v", key, err)
		}
	}
	return e
}

func TestLeaseBackendHonoursTheContract(t *testing.T) {
	backendtest.Run(t, leaseHarness)
}
