package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/internal/testclaimant"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// lossTarget bounds how long a holder whose record was removed or taken
// over may keep saying it holds the key.
const lossTarget = 2 * time.Second

// Fan-out targets: one release to the parked objects of a key, with the
// settings docs/operations.md recommends for many waiters.
const (
	// fanOutSettleTarget bounds the time from the holder's Delete until
	// every other parked object settled: its condition names the new
	// holder, or, under DiscloseNone, the last pass the release caused has
	// started.
	fanOutSettleTarget = 2 * time.Second
	// fanOutGrantTarget bounds the time until the successor is granted.
	fanOutGrantTarget = 100 * time.Millisecond
	// fanOutEventsTarget bounds the events one release records: on the
	// successor and the old holder, not per waiter.
	fanOutEventsTarget = 3
	// recommendedWorkers is the MaxConcurrentReconciles docs/operations.md
	// recommends for a kind with many waiters on one key.
	recommendedWorkers = 4
)

// recommended is the rig of the settings docs/operations.md recommends for
// a kind with many waiters on one key, and their description.
var recommended = rigOptions{controller: true, wake: true, workers: recommendedWorkers, unlimited: true, disclosure: claimmw.DiscloseNone}

const recommendedSetting = "4 workers, no client rate limit, DiscloseNone (recommended)"

// Given s.fanOut objects parked on one key behind one holder, and
// s.bystanders objects holding keys of their own, when the holder is
// deleted (its finalizer releases the key), then one parked object is
// granted, the others settle Parked behind it, and no bystander is
// reconciled: a record's change wakes only the objects naming its key.
// It runs with the controller's defaults (one worker), with the
// recommended settings, and with the recommended settings beside many
// bystanders and few waiters.
func fanOut(t *testing.T, s sizes, rep *report) {
	fanOutRun(t, rep, s, s.fanOut, s.bystanders, rigOptions{controller: true, wake: true}, "1 worker (the default)")
	fanOutRun(t, rep, s, s.fanOut, s.bystanders, rigOptions{controller: true, wake: true, workers: recommendedWorkers, unlimited: true},
		fmt.Sprintf("%d workers, no client rate limit", recommendedWorkers))
	fanOutRun(t, rep, s, s.fanOut, s.bystanders, recommended, recommendedSetting)
	fanOutRun(t, rep, s, s.fanOutFew, s.bystandersMany, recommended, recommendedSetting)
	rep.note("Fan-out: the passes are counted from the Delete call until no pass started for %s; they include the passes woken by the holder's deletion, by the Lease's deletion and creation (the first waiter in creation order at once, the others once its pass ended: docs/middleware.md, Wake-ups), and, where conditions name the holder, by each parked object's own status write (its condition names the new holder, so each waiter's condition changes once). Under DiscloseNone a waiter's condition does not name the holder and does not change: the others have settled when the last pass the release caused has started. Status writes and events are what the operator process sent for the release.", s.quiet)
}

// fanOutRun is one run of scenario 7 with parked objects on one key and
// bystanders on keys of their own, its controller set up by o.
func fanOutRun(t *testing.T, rep *report, s sizes, parked, bystanders int, o rigOptions, setting string) {
	ctx := context.Background()
	dc := env.TestClient(t)
	r := newRig(t, env.Namespace(t), o)
	const key = "fan-key"

	// Given
	if err := dc.Create(ctx, newClaimant(r.ns, "fan-holder", key)); err != nil {
		t.Fatal(err)
	}
	r.inner.waitGranted(t, "fan-holder", time.Minute)
	if err := parallel(bystanders, s.workers, func(i int) error {
		return dc.Create(ctx, newClaimant(r.ns, fmt.Sprintf("bystander-%d", i), fmt.Sprintf("bystander-key-%d", i)))
	}); err != nil {
		t.Fatal(err)
	}
	if err := parallel(parked, s.workers, func(i int) error {
		return dc.Create(ctx, newClaimant(r.ns, fmt.Sprintf("fan-%d", i), key))
	}); err != nil {
		t.Fatal(err)
	}
	for i := range bystanders {
		r.inner.waitGranted(t, fmt.Sprintf("bystander-%d", i), 5*time.Minute)
	}
	named := o.disclosure != claimmw.DiscloseNone
	waitParkedBehind(t, r, parked, "fan-holder", named, 5*time.Minute)
	r.passes.waitQuiet(t, s.quiet, 5*time.Minute)

	// When
	apiBefore := r.api.snapshot()
	start := time.Now()
	if err := dc.Delete(ctx, newClaimant(r.ns, "fan-holder")); err != nil {
		t.Fatal(err)
	}

	// Then
	winner, granted := waitAnyGranted(t, r, parked, start, 5*time.Minute)
	var settled time.Time
	if named {
		settled = waitParkedBehind(t, r, parked, winner, named, 5*time.Minute)
	}
	last := r.passes.waitQuiet(t, s.quiet, 5*time.Minute)
	if !named {
		settled = last
		waitParkedBehind(t, r, parked, winner, named, 5*time.Minute)
	}
	api := r.api.since(apiBefore)
	var total, parkedPasses, bystanderPasses, holderPasses int
	passes := r.passes.since(start)
	per := make([]int, 0, parked)
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
	for i := range parked {
		per = append(per, passes[fmt.Sprintf("fan-%d", i)])
	}
	if bystanderPasses != 0 {
		t.Errorf("one release on %q reconciled objects that do not name it %d times", key, bystanderPasses)
	}
	statusWrites := api.sum(func(k call) bool { return k.verb == verbPatch && k.resource == "claimants/status" && !k.rejected })
	refused := api.sum(func(k call) bool { return k.verb == verbPatch && k.resource == "claimants/status" && k.rejected })
	events := api.of(verbCreate, "events")
	// Every parked object's condition changed once (it names the new
	// holder); the successor's and the holder's once more each. Under
	// DiscloseNone only the successor's and the holder's.
	changed := parked + 1
	if !named {
		changed = 2
	}

	// The releases that follow, each of the holder granted by the one
	// before, are timed to the successor's grant: one release is one
	// sample, and its time varies with what the other waiters' passes do.
	grants := latencies{granted.Sub(start)}
	holder := winner
	for i := 1; i < s.fanOutReleases && i < parked; i++ {
		at := time.Now()
		if err := dc.Delete(ctx, newClaimant(r.ns, holder)); err != nil {
			t.Fatal(err)
		}
		next, g := waitAnyGranted(t, r, parked, at, 5*time.Minute)
		grants = append(grants, g.Sub(at))
		waitParkedBehind(t, r, parked-i, next, named, 5*time.Minute)
		r.passes.waitQuiet(t, s.quiet, 5*time.Minute)
		holder = next
	}

	scen := fmt.Sprintf("7 Fan-out, %d parked on one key, %d bystanders, %s", parked, bystanders, setting)
	rep.add(row{scen, "reconciles caused by one release (holder deleted): total; the holder; the parked objects (per object)",
		fmt.Sprintf("%d; %d; %d (%s)", total, holderPasses, parkedPasses, spread(per)), "", "", ""})
	rep.add(row{scen, "reconciles of the bystanders (objects not naming the key)", fmt.Sprintf("%d of %d objects", bystanderPasses, bystanders), "", "0",
		verdict(bystanderPasses == 0, fmt.Sprintf("%d passes", bystanderPasses))})
	rep.add(row{scen, fmt.Sprintf("Delete → one successor granted, %d releases in a row (the first is the release above)", len(grants)),
		fmt.Sprintf("%s; first %s", grants, ms(grants[0])), "", "p50 ≤ " + ms(fanOutGrantTarget),
		verdict(grants.pct(50) <= fanOutGrantTarget, "p50 "+ms(grants.pct(50)))})
	settleVerdict := "—"
	if o.workers == recommendedWorkers && o.unlimited && !named {
		settleVerdict = verdict(settled.Sub(start) <= fanOutSettleTarget, ms(settled.Sub(start)))
	}
	rep.add(row{scen, "Delete → all others settled Parked (naming it, unless DiscloseNone); last pass started",
		fmt.Sprintf("%s; %s", ms(settled.Sub(start)), ms(last.Sub(start))), "", "settled ≤ " + ms(fanOutSettleTarget) + " (recommended settings)", settleVerdict})
	rep.add(row{scen, "status writes per release (refused by the optimistic lock and written again); objects whose shown condition changed", fmt.Sprintf("%d (%d); %d", statusWrites, refused, changed), "",
		"writes ≤ changed", verdict(statusWrites <= changed, fmt.Sprintf("%d writes", statusWrites))})
	rep.add(row{scen, "events per release", strconv.Itoa(events), "", fmt.Sprintf("≤ %d (successor and old holder)", fanOutEventsTarget),
		verdict(events <= fanOutEventsTarget, fmt.Sprintf("%d events", events))})
	rep.add(row{scen, "API requests caused by the release (operator process)", api.byVerb(1), "", "", ""})
}

// waitParkedBehind waits until every one of the n fan-out objects fan-i
// other than holder is Parked, with a condition naming holder when named
// (under DiscloseNone conditions name no holder), read from the operator's
// cache (no request), and returns when.
func waitParkedBehind(t *testing.T, r *rig, n int, holder string, named bool, within time.Duration) time.Time {
	t.Helper()
	suffix, want := "/"+holder+".", n
	if !named {
		suffix = ""
	}
	if strings.HasPrefix(holder, "fan-") && holder != "fan-holder" {
		want-- // the winner is one of them
	}
	var at time.Time
	// Read-only, and polled every 20 ms: without copying, so that the
	// observer does not take the CPU of the process it measures.
	envtest.EventuallyEvery(t, within, 20*time.Millisecond, func() (bool, string) {
		list := &testclaimant.ClaimantList{}
		if err := r.client.List(context.Background(), list, client.InNamespace(r.ns), client.UnsafeDisableDeepCopy); err != nil {
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
		at = time.Now()
		return parked == want, fmt.Sprintf("%d of %d fan-out objects parked behind %s", parked, want, holder)
	})
	return at
}

// waitAnyGranted waits until one of the n fan-out objects was granted at or
// after start and returns it and when.
func waitAnyGranted(t *testing.T, r *rig, n int, start time.Time, within time.Duration) (string, time.Time) {
	t.Helper()
	var name string
	var at time.Time
	envtest.EventuallyEvery(t, within, 2*time.Millisecond, func() (bool, string) {
		for i := range n {
			name = fmt.Sprintf("fan-%d", i)
			if granted, ok := r.inner.grantedAt(name); ok && !granted.Before(start) {
				at = granted
				return true, ""
			}
		}
		return false, "no fan-out object was granted"
	})
	return name, at
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
	dc := env.TestClient(t)

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
		w := &testclaimant.Claimant{}
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

// erasedStopTook is how long the holder's pass told to stop using a key
// takes in the erased-key handover: long enough that the record is
// deleted while it runs.
const erasedStopTook = 300 * time.Millisecond

// Given holders with a waiter each, when a holder gives its key up (its
// spec names no key, or another key, instead) and, while its told pass still stops the key's
// workloads, another client deletes the key's record (a person, kubectl
// claims release --force), then the waiter is granted the key only after
// the told pass returned success, and soon after it.
func erasedHandover(t *testing.T, s sizes, rep *report) {
	ctx := context.Background()
	n := s.lossRuns
	// Several workers, so that the waiter's passes run while the told
	// pass does: with one, the controller's queue alone would keep the
	// waiter from acting before the told pass returned.
	r := newRig(t, env.Namespace(t), rigOptions{controller: true, wake: true, workers: recommendedWorkers})
	pairs(t, r, n, s.workers)
	r.inner.setStopTook(erasedStopTook)
	dc := env.TestClient(t)

	var fromDelete, fromStopped latencies
	early := 0
	for i := range n {
		holder, successor, key := fmt.Sprintf("holder-%d", i), fmt.Sprintf("successor-%d", i), fmt.Sprintf("key-%d", i)
		h := &testclaimant.Claimant{}
		if err := dc.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: holder}, h); err != nil {
			t.Fatal(err)
		}
		// Half the holders name no key any more, half another key.
		h.Spec.Keys = nil
		if i%2 == 1 {
			h.Spec.Keys = []string{fmt.Sprintf("other-key-%d", i)}
		}
		edited := time.Now()
		if err := dc.Update(ctx, h); err != nil {
			t.Fatal(err)
		}
		told := r.inner.waitRunAfter(t, holder, edited, releasingRun, 30*time.Second)
		deleted, gone := deleteRecord(t, dc, r, key)
		if gone {
			// Released, or taken, before this client could delete it: a
			// miss if the told pass had not returned by then.
			if stopped, ok := r.inner.stoppedAt(holder); ok && !stopped.Before(told.at) && stopped.Before(deleted) {
				t.Fatalf("%s: the holder's told pass returned and released the record before it could be deleted; the run does not measure what it says", key)
			}
			early++
			t.Errorf("%s: the record was gone before its holder's told pass returned", key)
			r.inner.waitGranted(t, successor, 30*time.Second)
			continue
		}
		granted := r.inner.waitGranted(t, successor, 30*time.Second)
		// The key is freed when the successor's record is written, which
		// may be before its first granted pass starts.
		written, ok := r.api.createdAfter("leases", deleted)
		if !ok {
			t.Fatalf("%s: %s was granted but no record of it was created after the deletion", key, successor)
		}
		stopped, ok := r.inner.stoppedAt(holder)
		if !ok || stopped.Before(told.at) || written.Before(stopped) || granted.Before(stopped) {
			early++
			t.Errorf("%s: %s's record was written %s and it acted %s after the deletion, before its holder's told pass returned", key, successor, ms(written.Sub(deleted)), ms(granted.Sub(deleted)))
			continue
		}
		if deleted.After(stopped) {
			t.Fatalf("%s: the record was deleted %s after the told pass returned; the run does not measure what it says", key, ms(deleted.Sub(stopped)))
		}
		fromDelete = append(fromDelete, granted.Sub(deleted))
		fromStopped = append(fromStopped, granted.Sub(stopped))
	}

	scen := fmt.Sprintf("8 Loss to parked, %d runs each", n)
	rep.add(row{scen, fmt.Sprintf("erased-key handover: Lease deleted by another client while its holder's told pass (%s) stops the key it gave up (its spec names no key, or another one) → successor granted; told pass returned → successor granted", ms(erasedStopTook)),
		fmt.Sprintf("%s; %s; key freed (granted, or its record gone) before the told pass returned in %d of %d runs", fromDelete, fromStopped, early, n), "",
		"never before the told pass returned; then p99 ≤ " + ms(erasedGrantTarget),
		erasedVerdict(early, n, fromStopped)})
	rep.note("Erased-key handover: a waiter woken by the record's deletion while the holder's told pass runs stays parked, since the holder may still act for the key (docs/middleware.md, the acting window); the holder's successful told pass wakes it.")
}

// deleteRecord deletes key's Lease as kubectl claims release --force does:
// read, then delete fenced on that read's UID and version, again when the
// record changed in between. It returns when the Delete that succeeded was
// sent, or gone, with when it was read so, when no record was there to
// delete.
func deleteRecord(t *testing.T, dc client.Client, r *rig, key string) (at time.Time, gone bool) {
	t.Helper()
	ctx := context.Background()
	for range 10 {
		l := &coordinationv1.Lease{}
		at = time.Now()
		if err := dc.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: recordName(t, r, key)}, l); apierrors.IsNotFound(err) {
			return at, true
		} else if err != nil {
			t.Fatal(err)
		}
		at = time.Now()
		err := dc.Delete(ctx, l, client.Preconditions{UID: ptr.To(l.UID), ResourceVersion: ptr.To(l.ResourceVersion)})
		switch {
		case err == nil:
			return at, false
		case apierrors.IsNotFound(err):
			return at, true
		case !apierrors.IsConflict(err):
			t.Fatal(err)
		}
	}
	t.Fatalf("%s: the record changed under every one of 10 fenced Deletes", key)
	return time.Time{}, false
}

// erasedGrantTarget bounds the time from the holder's told pass returning
// until its waiter is granted an erased key, as for a handover.
const erasedGrantTarget = 100 * time.Millisecond

func erasedVerdict(early, n int, fromStopped latencies) string {
	if early > 0 {
		return verdict(false, fmt.Sprintf("freed early in %d of %d", early, n))
	}
	if len(fromStopped) == 0 {
		return "not measured"
	}
	return verdict(fromStopped.pct(99) <= erasedGrantTarget, fmt.Sprintf("p99 %s", ms(fromStopped.pct(99))))
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

// churnCycles is how many times scenario 7b creates and deletes its
// non-holder.
const churnCycles = 3

// Given s.bystanders holders in tenant namespace b, each holding a key of
// its own, when a tenant in namespace a creates, lets park, and deletes an
// object naming all their keys, churnCycles times, then no holder in b is
// reconciled: the churned object holds nothing, so no record names it and
// its deletion wakes nobody.
func nonHolderChurn(t *testing.T, s sizes, rep *report) {
	ctx := context.Background()
	dc := env.TestClient(t)
	a, b := env.Namespace(t), env.Namespace(t)
	holders := max(s.bystanders, 1)
	// The churner names every held key, more than the middleware's default
	// limit at full size.
	r := newRig(t, env.Namespace(t), rigOptions{controller: true, wake: true, tenants: []string{a, b}, maxKeys: max(holders, claimmw.DefaultMaxKeys)})

	// Given
	keys := make([]string, holders)
	for i := range keys {
		keys[i] = fmt.Sprintf("churn-key-%d", i)
	}
	if err := parallel(holders, s.workers, func(i int) error {
		return dc.Create(ctx, newClaimant(b, fmt.Sprintf("churn-holder-%d", i), keys[i]))
	}); err != nil {
		t.Fatal(err)
	}
	for i := range holders {
		r.inner.waitGranted(t, fmt.Sprintf("churn-holder-%d", i), 5*time.Minute)
	}
	r.passes.waitQuiet(t, s.quiet, 5*time.Minute)

	// When
	start := time.Now()
	for c := range churnCycles {
		name := fmt.Sprintf("churner-%d", c)
		if err := dc.Create(ctx, newClaimant(a, name, keys...)); err != nil {
			t.Fatal(err)
		}
		envtest.EventuallyEvery(t, time.Minute, 20*time.Millisecond, func() (bool, string) {
			got := &testclaimant.Claimant{}
			if err := env.APIReader.Get(ctx, client.ObjectKey{Namespace: a, Name: name}, got); err != nil {
				t.Fatal(err)
			}
			return conditionOf(got) == string(conditions.ReasonParked), fmt.Sprintf("%s not parked: its conditions are %+v", name, got.Status.Conditions)
		})
		if err := dc.Delete(ctx, newClaimant(a, name)); err != nil {
			t.Fatal(err)
		}
	}
	r.passes.waitQuiet(t, s.quiet, 5*time.Minute)

	// Then
	caused := 0
	for name, n := range r.passes.since(start) {
		if strings.HasPrefix(name, "churn-holder-") {
			caused += n
		}
	}
	if caused != 0 {
		t.Errorf("%d create/delete cycles of a non-holder in another namespace caused %d passes of %d holders", churnCycles, caused, holders)
	}
	scen := fmt.Sprintf("7b Churn, a non-holder naming %d held keys of another namespace", holders)
	rep.add(row{scen, fmt.Sprintf("passes caused in other namespaces by %d create/delete cycles of a non-holder", churnCycles),
		strconv.Itoa(caused), "", "0", verdict(caused == 0, fmt.Sprintf("%d passes", caused))})
}
