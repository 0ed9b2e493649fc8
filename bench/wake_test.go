package bench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// lossTarget bounds how long a holder whose record was removed or taken
// over may keep saying it holds the key.
const lossTarget = 2 * time.Second

// Given s.fanOut objects parked on one key behind one holder, and
// s.bystanders objects holding keys of their own, when the holder is
// deleted (its finalizer releases the key), then one parked object is
// granted, the others settle Parked behind it, and no bystander is
// reconciled: a record's change wakes only the objects naming its key.
func fanOut(t *testing.T, s sizes, rep *report) {
	ctx := context.Background()
	dc := direct(t)
	r := newRig(t, env.Namespace(t), rigOptions{controller: true, wake: true})
	const key = "fan-key"

	// Given
	if err := dc.Create(ctx, newClaimant(r.ns, "fan-holder", key)); err != nil {
		t.Fatal(err)
	}
	r.inner.waitGranted(t, "fan-holder", time.Minute)
	if err := parallel(s.bystanders, s.workers, func(i int) error {
		return dc.Create(ctx, newClaimant(r.ns, fmt.Sprintf("bystander-%d", i), fmt.Sprintf("bystander-key-%d", i)))
	}); err != nil {
		t.Fatal(err)
	}
	if err := parallel(s.fanOut, s.workers, func(i int) error {
		return dc.Create(ctx, newClaimant(r.ns, fmt.Sprintf("fan-%d", i), key))
	}); err != nil {
		t.Fatal(err)
	}
	for i := range s.bystanders {
		r.inner.waitGranted(t, fmt.Sprintf("bystander-%d", i), 5*time.Minute)
	}
	waitParkedBehind(t, r, s.fanOut, "fan-holder", 5*time.Minute)
	r.passes.waitQuiet(t, s.quiet, 5*time.Minute)

	// When
	apiBefore := r.api.snapshot()
	start := time.Now()
	if err := dc.Delete(ctx, newClaimant(r.ns, "fan-holder")); err != nil {
		t.Fatal(err)
	}

	// Then
	winner, granted := waitAnyGranted(t, r, s.fanOut, start, 5*time.Minute)
	settled := waitParkedBehind(t, r, s.fanOut, winner, 5*time.Minute)
	last := r.passes.waitQuiet(t, s.quiet, 5*time.Minute)
	api := r.api.since(apiBefore)
	var total, parkedPasses, bystanderPasses, holderPasses int
	passes := r.passes.since(start)
	per := make([]int, 0, s.fanOut)
	for name, n := range passes {
		total += n
		switch {
		case name == "fan-holder":
			holderPasses += n
		case strings.HasPrefix(name, "bystander-"):
			bystanderPasses += n
		default:
			parkedPasses += n
		}
	}
	for i := range s.fanOut {
		per = append(per, passes[fmt.Sprintf("fan-%d", i)])
	}
	if bystanderPasses != 0 {
		t.Errorf("one release on %q reconciled objects that do not name it %d times", key, bystanderPasses)
	}

	scen := fmt.Sprintf("7 Fan-out, %d parked on one key, %d bystanders", s.fanOut, s.bystanders)
	rep.add(row{scen, "reconciles caused by one release (holder deleted): total; the holder; the parked objects (per object)",
		fmt.Sprintf("%d; %d; %d (%s)", total, holderPasses, parkedPasses, spread(per)), "", "", ""})
	rep.add(row{scen, "reconciles of the bystanders (objects not naming the key)", fmt.Sprintf("%d of %d objects", bystanderPasses, s.bystanders), "", "0",
		verdict(bystanderPasses == 0, fmt.Sprintf("%d passes", bystanderPasses))})
	rep.add(row{scen, "Delete → one successor granted; all others settled Parked naming it; last pass started",
		fmt.Sprintf("%s; %s; %s", ms(granted.Sub(start)), ms(settled.Sub(start)), ms(last.Sub(start))), "", "", ""})
	rep.add(row{scen, "API requests caused by the release (operator process)", api.byVerb(1), "", "", ""})
	rep.note("Fan-out: the passes are counted from the Delete call until no pass started for %s; they include the passes woken by the start of the holder's deletion, by the Lease's deletion and creation, and by each parked object's own status write (its condition names the new holder).", s.quiet)
}

// waitParkedBehind waits until every one of the n fan-out objects fan-i
// other than holder is Parked with a condition naming holder, read from the
// operator's cache (no request), and returns when.
func waitParkedBehind(t *testing.T, r *rig, n int, holder string, within time.Duration) time.Time {
	t.Helper()
	suffix, want := "/"+holder+".", n
	if strings.HasPrefix(holder, "fan-") && holder != "fan-holder" {
		want-- // the winner is one of them
	}
	deadline := time.Now().Add(within)
	for {
		list := &ClaimantList{}
		if err := r.client.List(context.Background(), list, client.InNamespace(r.ns)); err != nil {
			t.Fatal(err)
		}
		parked := 0
		for _, c := range list.Items {
			if !strings.HasPrefix(c.Name, "fan-") || c.Name == "fan-holder" || c.Name == holder {
				continue
			}
			cond := meta.FindStatusCondition(c.Status.Conditions, string(conditions.Claimed))
			if cond != nil && cond.Reason == string(conditions.ReasonParked) && strings.HasSuffix(cond.Message, suffix) {
				parked++
			}
		}
		if parked == want {
			return time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d fan-out objects parked behind %s after %s", parked, want, holder, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitAnyGranted waits until one of the n fan-out objects was granted at or
// after start and returns it and when.
func waitAnyGranted(t *testing.T, r *rig, n int, start time.Time, within time.Duration) (string, time.Time) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for i := range n {
			name := fmt.Sprintf("fan-%d", i)
			if at, ok := r.inner.grantedAt(name); ok && !at.Before(start) {
				return name, at
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no fan-out object was granted within %s", within)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Given holders with a waiter each, when another client removes a holder's
// record (a person, kubectl claims release) or takes it over for the waiter
// (another replica whose liveness judged the holder dead), then the holder's
// condition stops saying it holds the key within lossTarget.
func lossToParked(t *testing.T, s sizes, rep *report) {
	ctx := context.Background()
	n := s.lossRuns
	r := newRig(t, env.Namespace(t), rigOptions{controller: true, wake: true})
	pairs(t, r, 2*n, s.workers)
	dc := direct(t)

	// The first n pairs: the Lease deleted as kubectl claims release does,
	// fenced on the UID and resourceVersion it read. The holder still
	// exists, names the key and acts for it, so the waiter must not get
	// it: the holder's next pass creates the record again.
	var reacquiredIn latencies
	waiterWon := 0
	for i := range n {
		holder := fmt.Sprintf("holder-%d", i)
		key := fmt.Sprintf("key-%d", i)
		l := &coordinationv1.Lease{}
		if err := dc.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: recordName(t, r, key)}, l); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := dc.Delete(ctx, l, client.Preconditions{UID: ptr.To(l.UID), ResourceVersion: ptr.To(l.ResourceVersion)}); err != nil {
			t.Fatal(err)
		}
		// The holder's first pass after the Delete claims the key again.
		run := r.inner.waitRunAfter(t, holder, start, anyRun, 30*time.Second)
		rec, err := r.mw.Claimer().Current(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Exists && rec.Holder.Name != holder {
			waiterWon++
			t.Errorf("%s: the waiter %s got the key while its holder still acts for it", key, rec.Holder.Name)
			continue
		}
		reacquiredIn = append(reacquiredIn, run.at.Sub(start))
	}
	// The next n pairs: a second Claimer, as another replica would run,
	// whose liveness says the holder is dead, takes the record over for
	// the waiter with one Update fenced on what it read.
	replica := &updateClock{}
	wc, err := client.New(replica.wrap(env.Config), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	other, err := claim.New(wc, wc, r.mw.Claimer().Config(), claim.WithBackend(lease.Backend),
		claim.WithLiveness(claim.LivenessFunc(func(context.Context, claim.Record) (bool, error) { return false, nil })))
	if err != nil {
		t.Fatal(err)
	}
	var takenOver latencies
	for i := n; i < 2*n; i++ {
		holder, successor := fmt.Sprintf("holder-%d", i), fmt.Sprintf("successor-%d", i)
		w := &Claimant{}
		if err := dc.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: successor}, w); err != nil {
			t.Fatal(err)
		}
		self, err := other.HolderOf(w)
		if err != nil {
			t.Fatal(err)
		}
		if _, o, err := other.Acquire(ctx, fmt.Sprintf("key-%d", i), self); wantReason(o, err, claim.ReasonTakenOver) != nil {
			t.Fatal(wantReason(o, err, claim.ReasonTakenOver))
		}
		start := replica.lastUpdate()
		// A pass that read the record before the Update may still run
		// granted; the pass the Update's event causes must not.
		run := r.inner.waitRunAfter(t, holder, start, parkedRun, 30*time.Second)
		takenOver = append(takenOver, run.at.Sub(start))
		r.inner.waitGranted(t, successor, 30*time.Second)
	}

	scen := fmt.Sprintf("8 Loss to parked, %d runs each", n)
	rep.add(row{scen, "Lease deleted by another client (kubectl claims release) while its holder acts → holder's next pass (it claims the key again)",
		fmt.Sprintf("%s; the waiter got the key in %d of %d runs", reacquiredIn, waiterWon, n), "",
		"the waiter never gets it", verdict(waiterWon == 0, fmt.Sprintf("%d of %d", waiterWon, n))})
	rep.add(row{scen, "Lease taken over by another replica's fenced Update → holder's told pass (loss to stopped)", takenOver.String(), "",
		"p99 ≤ " + ms(lossTarget), lossVerdict(takenOver)})
	rep.note("Loss to parked: a holder that still exists, names its key and may act for it claims it again when its record is deleted by hand; a waiter asks first whether an object naming the key may still act for it (docs/middleware.md, the acting window), so it never wins that race.")
}

func lossVerdict(l latencies) string {
	if len(l) == 0 {
		return "not measured: no run lost the key"
	}
	return verdict(l.pct(99) <= lossTarget, fmt.Sprintf("p99 %s", ms(l.pct(99))))
}

// updateClock notes when a client last sent an Update (PUT), so that a
// latency can start at the write itself rather than at the read before it.
type updateClock struct {
	mu   sync.Mutex
	last time.Time
}

func (u *updateClock) wrap(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodPut {
				u.mu.Lock()
				u.last = time.Now()
				u.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	}
	return cfg
}

func (u *updateClock) lastUpdate() time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.last
}
