package chaos_test

import (
	"context"
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/internal/chaos"
	"github.com/ocf-claim/claim/internal/history"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
)

// TestChaos is the randomized contention: four holder slots race for three
// keys under injected faults and crashes, holders are deleted and recreated
// with new UIDs, and the history checker judges every seed. It runs 3 seeds
// by default; `make chaos SEEDS=N` runs N, and -seed=N (or CHAOS_SEED=N)
// replays one.
func TestChaos(t *testing.T) {
	total := history.Summary{}
	stats := &chaos.Stats{}
	list := seeds(t)
	for _, seed := range list {
		// Given four holders, three keys and the default fault profile
		// When they acquire, release, crash and are deleted for one seed
		res := small.play(t, seed)
		stats.Add(res.stats)
		total.Ops += res.summary.Ops
		total.Grants += res.summary.Grants
		total.Epochs += res.summary.Epochs
		total.Versions += res.summary.Versions
		total.Violations += res.summary.Violations
		// Then the history keeps every promise
		if len(res.violations) > 0 {
			t.Errorf("seed %d: %s\nreplay: go test ./internal/chaos/ -run '^TestChaos$' -seed=%d  (or CHAOS_SEED=%d make chaos)",
				seed, history.Report(res.summary, res.violations), seed, seed)
		}
		if res.summary.Grants == 0 {
			t.Errorf("seed %d granted nothing: the run proves nothing", seed)
		}
	}
	t.Logf("chaos summary: seeds=%d %s %s", len(list), history.Report(total, nil), stats)
}

// brokenBackend is the Lease backend with its takeover precondition
// dropped: Update re-reads the record and writes over whatever is there now,
// as a takeover without the resourceVersion precondition would.
type brokenBackend struct{ backends.Backend }

func (b brokenBackend) Update(ctx context.Context, _ claim.Record, next claim.Record) (claim.Record, error) {
	fresh, err := b.Get(ctx, next.Key)
	if err != nil {
		return claim.Record{}, err
	}
	if !fresh.Exists {
		return b.Create(ctx, fresh, next)
	}
	return b.Backend.Update(ctx, fresh, next)
}

func broken(r client.Reader, w client.Client, cfg backends.Config) (backends.Backend, error) {
	inner, err := lease.Backend(r, w, cfg)
	return brokenBackend{inner}, err
}

// TestTheCheckerCatchesATakeoverWithoutPrecondition shows the checker can
// fail: with the broken backend, some seed's history breaks a promise.
func TestTheCheckerCatchesATakeoverWithoutPrecondition(t *testing.T) {
	// Given the randomized run with a takeover that ignores what it read
	r := small
	r.backend = broken
	r.steps = 40
	for seed := uint64(1); seed <= 10; seed++ {
		// When it runs
		res := r.play(t, seed)
		// Then the checker reports a violation
		if len(res.violations) > 0 {
			t.Logf("seed %d caught the broken protocol: %s", seed, history.Report(res.summary, res.violations))
			return
		}
	}
	t.Fatal(fmt.Errorf("ten seeds of a protocol without takeover preconditions passed the checker"))
}
