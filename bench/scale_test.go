package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/internal/testclaimant"
	"github.com/ocf-claim/claim/pkg/claim"
)

// Given s.scale holders of one key each in one namespace, when a probe
// holder acquires fresh keys and then sweeps them, then an acquire costs
// about what it costs among 10 keys and the sweep is two Lists (its
// records, and those that lost its holder label: the API server answers
// that one from its watch cache, empty unless some did) and one Delete per
// claim of its own, whatever the other holders; and the middleware's
// memory for them is measured.
// sweepLists is what a holder's listing of its records costs: one List by
// its holder labels, and one of the records that lost a holder label
// (docs/backends.md, Listing a holder's records).
const sweepLists = 2

func scale(t *testing.T, s sizes, rep *report) {
	ns := env.Namespace(t)
	ctx := context.Background()
	r := newRig(t, ns, rigOptions{})
	cr := newClaimerRig(t, ns)
	probe := holders(t, cr.cl, ns, "probe", 1, 1)[0]
	dc := env.TestClient(t)

	populate := func(from, to int) {
		t.Helper()
		if err := parallel(to-from, s.workers, func(i int) error {
			i += from
			return dc.Create(ctx, newClaimant(ns, fmt.Sprintf("scale-%d", i), fmt.Sprintf("scale-key-%d", i)))
		}); err != nil {
			t.Fatal(err)
		}
		envtest.Eventually(t, 5*time.Minute, func() (bool, string) {
			list := &testclaimant.ClaimantList{}
			if err := r.client.List(ctx, list, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			return len(list.Items) >= to, fmt.Sprintf("the cache saw %d of %d Claimants", len(list.Items), to)
		})
		if err := parallel(to-from, s.workers, func(i int) error {
			name := fmt.Sprintf("scale-%d", i+from)
			for attempt := 0; ; attempt++ {
				_, err := r.reconcileOnce(ctx, name)
				if _, ok := r.inner.grantedAt(name); ok && err == nil {
					return nil
				}
				if attempt == 20 {
					return fmt.Errorf("%s not granted after %d passes: %w", name, attempt, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	// probeRun acquires s.probes fresh keys one after the other, then
	// releases them all in one sweep.
	probeRun := func(tag string) (acq latencies, sweep counts, sweepTook time.Duration) {
		t.Helper()
		for j := range s.probes {
			start := time.Now()
			_, o, err := cr.cl.Acquire(ctx, fmt.Sprintf("probe-%s-%d", tag, j), probe)
			if err := wantReason(o, err, claim.ReasonAcquired); err != nil {
				t.Fatal(err)
			}
			acq = append(acq, time.Since(start))
		}
		before := cr.api.snapshot()
		start := time.Now()
		if err := cr.cl.Release(ctx, probe); err != nil {
			t.Fatal(err)
		}
		return acq, cr.api.since(before), time.Since(start)
	}

	const small = 10
	populate(0, small)
	smallAcq, smallSweep, smallTook := probeRun("small")
	// Holders are added in batches until s.scale or the time budget is
	// reached, whichever comes first: on a loaded machine the table states
	// the scale it got to rather than running out the test timeout.
	start := time.Now()
	reached := small
	for reached < s.scale && time.Since(start) < s.scaleBudget {
		next := min(reached+500, s.scale)
		populate(reached, next)
		reached = next
	}
	populated := time.Since(start)
	if reached < s.scale {
		rep.note("Scale: %d of the %d holders asked for were created and reconciled within the %s budget; the scale rows are measured at %d.", reached, s.scale, s.scaleBudget, reached)
	}
	s.scale = reached
	largeAcq, largeSweep, largeTook := probeRun("large")

	withMW := heapInUse()
	r.mw = nil
	withoutMW := heapInUse()
	mem := int64(withMW) - int64(withoutMW)

	for _, sw := range []counts{smallSweep, largeSweep} {
		if sw.of(verbList, "leases") != sweepLists || sw.of(verbDelete, "leases") != s.probes || sw.writes() != s.probes {
			t.Errorf("sweep of %d claims: %s, want %d lists and %d deletes", s.probes, sw.byVerb(1), sweepLists, s.probes)
		}
	}
	scen := fmt.Sprintf("6 Scale, %d holders in one namespace", s.scale)
	ratioP50 := float64(largeAcq.pct(50)) / float64(smallAcq.pct(50))
	rep.add(row{scen, fmt.Sprintf("fresh acquire at %d keys vs at %d keys", s.scale, small),
		fmt.Sprintf("%s vs %s (%.2fx)", largeAcq, smallAcq, ratioP50), "", "p50 within 2x",
		verdict(ratioP50 <= 2, fmt.Sprintf("%.2fx", ratioP50))})
	rep.add(row{scen, fmt.Sprintf("sweep of one holder with %d claims: requests; time at %d vs %d keys", s.probes, s.scale, small),
		fmt.Sprintf("%s; %s vs %s", largeSweep.byVerb(1), ms(largeTook), ms(smallTook)), "", fmt.Sprintf("%d lists, %d deletes", sweepLists, s.probes),
		verdict(largeSweep.of(verbList, "leases") == sweepLists && largeSweep.of(verbDelete, "leases") == s.probes, largeSweep.byVerb(1))})
	rep.add(row{scen, "middleware memory (the held-keys gauge's map: it keeps no other state per object)",
		fmt.Sprintf("%.1f MiB for %d objects, %d B per object", float64(mem)/(1<<20), s.scale, mem/int64(s.scale)), "", "", ""})
	rep.add(row{scen, "populate: Claimants created and reconciled once each",
		fmt.Sprintf("%d in %s (%d workers)", s.scale-small, populated.Round(time.Second), s.workers), "", "", ""})
}
