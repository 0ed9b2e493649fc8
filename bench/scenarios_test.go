package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/internal/testclaimant"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// pairs creates n (holder, successor) pairs of Claimants on n keys and waits
// until every holder is granted and every successor is parked.
func pairs(t *testing.T, r *rig, n, workers int) {
	t.Helper()
	ctx := context.Background()
	dc := env.TestClient(t)
	if err := parallel(n, workers, func(i int) error {
		return dc.Create(ctx, newClaimant(r.ns, fmt.Sprintf("holder-%d", i), fmt.Sprintf("key-%d", i)))
	}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		r.inner.waitGranted(t, fmt.Sprintf("holder-%d", i), time.Minute)
	}
	if err := parallel(n, workers, func(i int) error {
		return dc.Create(ctx, newClaimant(r.ns, fmt.Sprintf("successor-%d", i), fmt.Sprintf("key-%d", i)))
	}); err != nil {
		t.Fatal(err)
	}
	envtest.Eventually(t, time.Minute, func() (bool, string) {
		list := &testclaimant.ClaimantList{}
		if err := env.APIReader.List(ctx, list, client.InNamespace(r.ns)); err != nil {
			t.Fatal(err)
		}
		parked := 0
		for _, c := range list.Items {
			if conditionOf(&c) == string(conditions.ReasonParked) {
				parked++
			}
		}
		return parked == n, fmt.Sprintf("%d of %d successors parked", parked, n)
	})
}

func conditionOf(c *testclaimant.Claimant) string {
	for _, cond := range c.Status.Conditions {
		if cond.Type == string(conditions.Claimed) {
			return cond.Reason
		}
	}
	return ""
}

// handoverTarget is the p50 of scenario 4 with wake-ups: the cost of the
// path (the holder's finalizer pass, the record's watch event, the
// successor's pass), not of a requeue interval.
const handoverTarget = 50 * time.Millisecond

// handoverP99Target is the p99 of back-to-back handovers: no run waits for
// the API server's watch cache (up to 100 ms after a write of another
// resource) on top of the path.
const handoverP99Target = 100 * time.Millisecond

// handoverPause is the pause before each isolated handover: longer than the
// 100 ms period at which kube-apiserver asks etcd for a progress
// notification while a consistent List waits for its watch cache, so that
// no run's List waits on the previous run's request.
const handoverPause = 250 * time.Millisecond

// handoverRuns are the figures of one series of handovers.
type handoverRuns struct {
	woken latencies
	// phases split each run: the Delete's watch event and the queue until
	// the holder's pass starts; that pass until its Delete of the Lease is
	// answered (the finalizer path); the record's event and the queue (the
	// holder's pass still removing its finalizer) until the successor's
	// granting pass starts; that pass until the inner reconciler runs
	// granted.
	phases          [4]latencies
	successorPasses []int
}

// Given holders with parked successors, when a holder is deleted, then its
// successor is granted within a wake-up (target p50 ≤ 50 ms), and only at
// its next requeue without the wake-up.
func handover(t *testing.T, s sizes, rep *report, res *results) {
	ctx := context.Background()
	dc := env.TestClient(t)
	n := s.handovers

	wake := newRig(t, env.Namespace(t), rigOptions{controller: true, wake: true})
	pairs(t, wake, 2*n, s.workers)
	// Isolated handovers, as a handover happens in a cluster: one at a
	// time, the API server idle for a moment before it. Then back to back:
	// each Delete as soon as the previous successor was granted, as in a
	// rollout that replaces many holders.
	isolated := handoverSeries(t, wake, 0, n, handoverPause)
	backToBack := handoverSeries(t, wake, n, 2*n, 0)
	res.wakeP50, res.wakeP99 = isolated.woken.pct(50), isolated.woken.pct(99)
	listAfterIdle, listRightAfter, getAfter := consistentReads(t, wake.ns, s.listProbes)

	poll := newRig(t, env.Namespace(t), rigOptions{controller: true, parkedRequeue: s.requeue})
	pairs(t, poll, n, s.workers)
	deleted := make([]time.Time, n)
	for i := range n {
		deleted[i] = time.Now()
		if err := dc.Delete(ctx, newClaimant(poll.ns, fmt.Sprintf("holder-%d", i))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(37 * time.Millisecond)
	}
	var requeued latencies
	for i := range n {
		requeued = append(requeued, poll.inner.waitGranted(t, fmt.Sprintf("successor-%d", i), time.Minute).Sub(deleted[i]))
	}

	scen := fmt.Sprintf("4 Handover, %d runs", n)
	target := "p50 ≤ " + ms(handoverTarget)
	for _, x := range []struct {
		label string
		runs  handoverRuns
		p99   bool
	}{
		{fmt.Sprintf("isolated (%s pause before each)", ms(handoverPause)), isolated, false},
		{"back to back", backToBack, true},
	} {
		p50, p99 := x.runs.woken.pct(50), x.runs.woken.pct(99)
		target, met, miss := target, p50 <= handoverTarget, fmt.Sprintf("p50 %s", ms(p50))
		if x.p99 {
			target += ", p99 ≤ " + ms(handoverP99Target)
			met = met && p99 <= handoverP99Target
			miss = fmt.Sprintf("p50 %s, p99 %s", ms(p50), ms(p99))
		}
		rep.add(row{scen, "holder deleted → successor granted, wake-up (SetupWithManager), " + x.label, x.runs.woken.String(), "", target,
			verdict(met, miss)})
		ph := x.runs.phases
		rep.add(row{scen, "phases, " + x.label + ": Delete → holder's pass starts; → its Lease Delete answered; → successor's granting pass starts; → successor granted",
			fmt.Sprintf("p50 %s, %s, %s, %s; p99 %s, %s, %s, %s",
				ms(ph[0].pct(50)), ms(ph[1].pct(50)), ms(ph[2].pct(50)), ms(ph[3].pct(50)),
				ms(ph[0].pct(99)), ms(ph[1].pct(99)), ms(ph[2].pct(99)), ms(ph[3].pct(99))), "", "", ""})
		rep.add(row{scen, "successor passes from the Delete to its grant, " + x.label, spread(x.runs.successorPasses), "", "", ""})
	}
	rep.add(row{scen, fmt.Sprintf("API server: consistent List of Leases after a write of another resource, %s after the previous one; right after one; a Get instead", ms(handoverPause)),
		fmt.Sprintf("%s; %s; %s", listAfterIdle, listRightAfter, getAfter), "", "", ""})
	rep.note("Handover phases: kube-apiserver serves a consistent List (no resourceVersion) from its watch cache once the cache has caught up with etcd's current revision; when the last write was to another resource (here the holder's deletion), the Lease cache waits for a progress notification, which the API server asks etcd for at most every 100 ms, so a consistent List within 100 ms of the previous one waits out the rest of that period (the API server row). The holder's deletion passes send none: the first lists the holder's records from the manager's cache (no request) and reads each key it names by a Get, the next (after its Released write) lists at least as fresh as the holder itself (resourceVersionMatch=NotOlderThan), which the watch cache has already passed; so back-to-back handovers no longer fall into step with the 100 ms period.")
	rep.add(row{scen, fmt.Sprintf("same, wake-up off, requeue %s", s.requeue), requeued.String(), "", "", ""})
	rep.note("Handover without wake-up: %d parked successors requeued every %s share the controller's one worker, and each pass makes two uncached reads; when those passes take longer than the requeue interval the queue, not the interval, sets the latency. The computed row is the figure at the default interval.", n, s.requeue)
	rep.add(row{scen, "same, wake-up off, default requeue 5 min (computed)",
		fmt.Sprintf("p50 %s, p99 %s", ms(claimmwParked/2), ms(claimmwParked*99/100)), "", "", ""})
}

// handoverSeries deletes holder-i for i in [from, to), one at a time, after
// pause, waits for successor-i's grant and splits each run into phases.
func handoverSeries(t *testing.T, r *rig, from, to int, pause time.Duration) handoverRuns {
	t.Helper()
	ctx := context.Background()
	dc := env.TestClient(t)
	var out handoverRuns
	for i := from; i < to; i++ {
		time.Sleep(pause)
		holder, successor := fmt.Sprintf("holder-%d", i), fmt.Sprintf("successor-%d", i)
		start := time.Now()
		if err := dc.Delete(ctx, newClaimant(r.ns, holder)); err != nil {
			t.Fatal(err)
		}
		granted := r.inner.waitGranted(t, successor, 30*time.Second)
		out.woken = append(out.woken, granted.Sub(start))
		holderPasses := r.passes.between(holder, start, granted)
		successorStarts := r.passes.between(successor, start, granted)
		gone, ok := r.api.deletedAt("leases", recordName(t, r, fmt.Sprintf("key-%d", i)))
		if !ok || len(holderPasses) == 0 || len(successorStarts) == 0 {
			t.Fatalf("run %d: no Lease deletion (%v), holder passes %d or successor passes %d before the grant", i, ok, len(holderPasses), len(successorStarts))
		}
		granting := successorStarts[len(successorStarts)-1]
		for j, d := range []time.Duration{holderPasses[0].Sub(start), gone.Sub(holderPasses[0]), granting.Sub(gone), granted.Sub(granting)} {
			out.phases[j] = append(out.phases[j], d)
		}
		out.successorPasses = append(out.successorPasses, len(successorStarts))
	}
	return out
}

// consistentReads measures, n times, a consistent List of Leases (no
// resourceVersion, as the claim's uncached reads send it) right after a
// write of a ConfigMap: once handoverPause after the previous such List,
// once right after it; and a Get of one Lease after such a write, which
// etcd serves.
func consistentReads(t *testing.T, ns string, n int) (afterIdle, rightAfter, get latencies) {
	t.Helper()
	ctx := context.Background()
	dc := env.TestClient(t)
	cm := newConfigMap(ns, "consistent-read-probe")
	if err := dc.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	write := func() {
		t.Helper()
		cm.Data = map[string]string{"at": time.Now().String()}
		if err := dc.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	timed := func(read func() error) time.Duration {
		t.Helper()
		start := time.Now()
		if err := read(); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	list := func() error {
		return dc.List(ctx, &coordinationv1.LeaseList{}, client.InNamespace(ns), client.MatchingLabels{"bench.claim.ocf.io/probe": "none"})
	}
	for range n {
		time.Sleep(handoverPause)
		write()
		afterIdle = append(afterIdle, timed(list))
		write()
		rightAfter = append(rightAfter, timed(list))
		write()
		get = append(get, timed(func() error {
			return dc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "no-such-lease"}, &coordinationv1.Lease{})
		}))
	}
	return afterIdle, rightAfter, get
}

// spread renders small counts as "p50 x, max y (n=z)".
func spread(xs []int) string {
	if len(xs) == 0 {
		return "none"
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return fmt.Sprintf("p50 %d, max %d (n=%d)", s[(len(s)-1)/2], s[len(s)-1], len(s))
}

// recordName is the name of key's record, as the rig's claimer names it.
func recordName(t *testing.T, r *rig, key string) string {
	t.Helper()
	norm, err := r.mw.Claimer().NormalizeKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return r.mw.Claimer().Config().NameFunc(norm)
}

// claimmwParked is claimmw.DefaultParkedRequeue, named here for the
// computed row.
const claimmwParked = 5 * time.Minute

// Given n claimants with their own connections, when all acquire one free
// key at once, then exactly one wins and every loser's only write is one
// rejected Create.
func contention(t *testing.T, s sizes, rep *report) {
	ns := env.Namespace(t)
	ctx := context.Background()
	for _, n := range s.contenders {
		rigs := make([]*claimerRig, n)
		for j := range rigs {
			rigs[j] = newClaimerRig(t, ns)
		}
		hs := holders(t, rigs[0].cl, ns, fmt.Sprintf("contender-%d", n), n, s.workers)
		var settled, first latencies
		var total, losers, loserRejected int
		for round := range s.rounds {
			key := fmt.Sprintf("contended-%d-%d", n, round)
			befores := make([]counts, n)
			for j, r := range rigs {
				befores[j] = r.api.snapshot()
			}
			outcomes := make([]claim.Outcome, n)
			errs := make([]error, n)
			ends := make([]time.Time, n)
			var ready, wg sync.WaitGroup
			gate := make(chan struct{})
			ready.Add(n)
			for j := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ready.Done()
					<-gate
					_, outcomes[j], errs[j] = rigs[j].cl.Acquire(ctx, key, hs[j])
					ends[j] = time.Now()
				}()
			}
			ready.Wait()
			start := time.Now()
			close(gate)
			wg.Wait()
			winners := 0
			last, won := start, start
			for j := range n {
				if errs[j] != nil {
					t.Fatalf("claimant %d: %v", j, errs[j])
				}
				d := rigs[j].api.since(befores[j])
				total += d.writes()
				if outcomes[j].Granted() {
					winners++
					won = ends[j]
				} else {
					losers += d.writes()
					loserRejected += d.rejected()
				}
				if ends[j].After(last) {
					last = ends[j]
				}
			}
			if winners != 1 {
				t.Fatalf("%d claimants, round %d: %d winners", n, round, winners)
			}
			settled = append(settled, last.Sub(start))
			first = append(first, won.Sub(start))
		}
		rounds := s.rounds
		rep.add(row{fmt.Sprintf("5 Contention, %d claimants, %d rounds", n, rounds), "time to one winner; all settled",
			fmt.Sprintf("winner p50 %s; settled p50 %s, p99 %s", ms(first.pct(50)), ms(settled.pct(50)), ms(settled.pct(99))), "", "", ""})
		rep.add(row{fmt.Sprintf("5 Contention, %d claimants, %d rounds", n, rounds), "writes per round: total; losers' (rejected)",
			fmt.Sprintf("%s; %s (%s)", ratio(total, rounds), ratio(losers, rounds), ratio(loserRejected, rounds)), "", "", ""})
	}
}
