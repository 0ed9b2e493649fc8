package claimmw_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
	"github.com/ocf-claim/claim/pkg/expiry"
)

// The renewal timing of the tests that renew: a lease lasts renewDuration,
// is renewed every renewEvery and given up renewDeadline after the last
// renewal.
const (
	renewDuration = 30 * time.Second
	renewEvery    = 5 * time.Second
	renewDeadline = 20 * time.Second
)

// renewing returns s with a middleware that renews on clk with that timing
// and claims that judge liveness by Expiry of renewDuration on clk.
func renewing(t *testing.T, clk *testingclock.FakeClock, s setup) setup {
	t.Helper()
	exp, err := expiry.New(renewDuration, clk)
	if err != nil {
		t.Fatal(err)
	}
	s.opts = append([]claimmw.Option{claimmw.WithRenewal(expiry.KeeperConfig{Duration: renewDuration, RenewEvery: renewEvery, RenewDeadline: renewDeadline, Clock: clk})}, s.opts...)
	s.claimOpts = append([]claim.Option{claim.WithLiveness(exp), claim.WithClock(clk)}, s.claimOpts...)
	return s
}

func TestAHolderThatCannotRenewStopsActingAndAnExpiryContenderWaitsTheWholeDuration(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(time.Now())
	f := start(t, renewing(t, clk, setup{
		opts:    []claimmw.Option{claimmw.WhileParked(claimmw.RunInnerWhileParked)}, // each parked pass of b is visible
		workers: 2,                                                                  // a's pass blocks one worker
	}))
	// Given a holds k on time-based liveness, and its inner pass acts until
	// its context ends
	passes := make(chan context.Context, 1)
	f.inner.setHook(func(ctx context.Context, name string, c call) (reconcile.Result, error) {
		if name != "a" || !c.state.Granted {
			return reconcile.Result{}, nil
		}
		select {
		case passes <- ctx:
		default:
		}
		select {
		case <-ctx.Done():
			return reconcile.Result{}, context.Cause(ctx)
		case <-time.After(20 * time.Second):
			return reconcile.Result{}, errors.New("a's pass was never cancelled")
		}
	})
	f.createWidget(t, "a", "k")
	var pass context.Context
	select {
	case pass = <-passes:
	case <-time.After(10 * time.Second):
		t.Fatal("a's inner pass never ran")
	}
	a, _ := f.widget(t, "a")
	// And b names k and is parked, judging a by its record's changes
	f.createAndWait(t, "b", conditions.ReasonParked, "k")
	bPasses := func() int { return len(f.inner.callsOf("b")) }

	// When a's renewals start failing and renew ticks pass short of the deadline
	f.writes.failRenewalsOf.Store(a.UID)
	clk.Step(renewEvery)
	eventually(t, wakeWithin, func() (bool, string) {
		return f.writes.failedRenewals.Load() >= 1, "no renewal of a was attempted"
	})
	clk.Step(renewDeadline - renewEvery - time.Second)
	// Then a still acts, and b, asked again, is still parked
	seen := bPasses()
	f.touch(t, "b")
	eventually(t, wakeWithin, func() (bool, string) { return bPasses() > seen, "b was not reconciled" })
	if err := pass.Err(); err != nil {
		t.Fatalf("a's pass ended before its renew deadline: %v", context.Cause(pass))
	}
	if got := f.claimed(t, "b").Reason; got != string(conditions.ReasonParked) {
		t.Fatalf("b before the deadline: %s, want Parked", got)
	}

	// When the renew deadline passes
	clk.Step(2 * time.Second)
	// Then a's pass is cancelled, with the renew deadline as its cause
	select {
	case <-pass.Done():
	case <-time.After(wakeWithin):
		t.Fatal("a's pass was not cancelled after its renew deadline")
	}
	if cause := context.Cause(pass); !errors.Is(cause, expiry.ErrRenewDeadline) {
		t.Errorf("a's pass ended with %v, want expiry.ErrRenewDeadline", cause)
	}
	// And b, asked again before the lease duration, is still parked
	seen = bPasses()
	f.touch(t, "b")
	eventually(t, wakeWithin, func() (bool, string) { return bPasses() > seen, "b was not reconciled" })
	if got := f.claimed(t, "b").Reason; got != string(conditions.ReasonParked) {
		t.Fatalf("b %s after a's deadline, before the duration: %s, want Parked", renewDeadline, got)
	}

	// When the lease duration has passed since b saw the record change
	clk.Step(renewDuration - renewDeadline)
	f.touch(t, "b")
	// Then b takes k over
	f.waitForReason(t, "b", conditions.ReasonClaimed, wakeWithin)
	rec := f.record(t, "k")
	b, _ := f.widget(t, "b")
	if rec.Holder.UID != b.UID {
		t.Errorf("record of k held by %s, want b", rec.Holder)
	}
	// And a ends parked on b
	cond := f.waitForReason(t, "a", conditions.ReasonParked, wakeWithin)
	mustContain(t, "a's message", cond.Message, fmt.Sprintf("Widget %s/b", f.ns))
}

func TestAHolderThatCannotRenewIsToldToStopBeforeAContenderMayJudgeItExpired(t *testing.T) {
	t.Parallel()
	clk := testingclock.NewFakeClock(time.Now())
	f := start(t, renewing(t, clk, setup{}))
	// Given a holds k, and its granted pass returned: its workloads run on
	f.createAndWait(t, "a", conditions.ReasonClaimed, "k")
	a, _ := f.widget(t, "a")
	told := func() int {
		n := 0
		for _, c := range f.inner.callsOf("a") {
			if !c.state.Granted {
				n++
			}
		}
		return n
	}
	// When its renewals fail until the renew deadline passes, and nothing
	// else happens to a or to k
	f.writes.failRenewalsOf.Store(a.UID)
	for range renewDeadline/renewEvery + 1 {
		clk.Step(renewEvery)
		time.Sleep(50 * time.Millisecond)
	}
	// Then a is told to stop before the lease duration runs out, and says
	// why
	eventually(t, wakeWithin, func() (bool, string) { return told() > 0, "a was never told to stop after its renew deadline" })
	cond := f.claimed(t, "a")
	if cond.Status == metav1.ConditionTrue {
		t.Errorf("a after its renew deadline: %s/%s, want it no longer Claimed", cond.Status, cond.Reason)
	}
	// And once it can renew again, it holds and acts for k again
	f.writes.failRenewalsOf.Store(types.UID(""))
	f.waitForReason(t, "a", conditions.ReasonClaimed, 30*time.Second)
}

// A parked object keeps the first of its keys while it waits for the next,
// and that record stays renewed until it is deleted, after a restart too:
// a pass that cannot write its condition must not skip the renewals, or the
// record expires although the operator never stopped.
func TestAParkedObjectWhoseStatusWritesFailKeepsItsHeldKeyRenewedAcrossARestart(t *testing.T) {
	ns := env.Namespace(t)
	s := shortRenewal(t)
	f, stop := startIn(t, ns, s)
	f.createWidget(t, "first", "z")
	f.waitForReason(t, "first", conditions.ReasonClaimed, wakeWithin)
	f.createWidget(t, "second", "z")
	f.waitForReason(t, "second", conditions.ReasonParked, wakeWithin)
	f.parksKeepingItsFirstKey(t, "holder", "a", "z")

	// While the operator is down, z moves to second: the holder's condition
	// changes in its first pass after the restart, and that write fails.
	stop()
	f.takeOverFor(t, "z", "second")
	s.failStatusOf = "holder"
	f, _ = startIn(t, ns, s)
	eventually(t, wakeWithin, func() (bool, string) {
		return f.writes.failedStatus.Load() > 0, "the holder's status write was never refused"
	})
	restarted := time.Now()
	eventually(t, 2*time.Second, func() (bool, string) {
		got := f.renewTimeOf(t, "a")
		return got.After(restarted), fmt.Sprintf("a was last renewed at %v, before the restart at %v", got, restarted)
	})
}

// A process that starts renews what its objects hold before any of their
// passes: its queue may reach a holder only after a contender's count of
// the lease duration has run out (thousands of objects, a slow API server),
// and the holder, whose workloads outlived the old process, must not expire
// meanwhile. Its record expires only once no process renews it.
func TestARestartedOperatorRenewsWhatItsObjectsHoldBeforeTheirFirstPass(t *testing.T) {
	ns := env.Namespace(t)
	s := shortRenewal(t)
	f, stop := startIn(t, ns, s)
	// Given a holds k on time-based liveness and b waits for it
	f.holdsAndWaits(t, "a", "k", "b")

	// When the operator restarts, and the new process does not get to a's
	// first pass for longer than a lease
	s.workers = 2
	f, restarted := restartHoldingBack(t, ns, stop, s, named("a"))

	// Then the new process renews k all the same
	eventually(t, 2*time.Second, func() (bool, string) {
		got := f.renewTimeOf(t, "k")
		return got.After(restarted), fmt.Sprintf("k was last renewed at %v, before the restart at %v", got, restarted)
	})
	// And b does not take k over, though more than a lease passes
	f.notTakenOver(t, restarted, 4*time.Second, map[string]string{"b": "k"})
	rec, err := f.mw.Claimer().Current(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	if a := f.holderOf(t, "a"); !rec.Exists || !rec.Holder.Is(a) {
		t.Fatalf("k's record is %+v, want it held by a", rec)
	}
}

// Every record an object still holds stays renewed until it is deleted
// (docs/middleware.md, the expiry route), also one whose holder label is
// gone (removed by hand, or written under an older HolderLabels) and whose
// key the object stopped naming: the object may still act for it until a
// pass for its new keys succeeds, and a contender that judges the record
// expired takes it over without asking that holder.
func TestARecordWithoutItsHolderLabelStaysRenewedWhileItsHolderMayStillActForIt(t *testing.T) {
	ns := env.Namespace(t)
	f, stop := startIn(t, ns, shortRenewal(t))
	// Given papa holds k on time-based liveness and whiskey waits for it
	f.holdsAndWaits(t, "papa", "k", "whiskey")
	// And, while the operator is down, k's Lease loses its holder label and
	// papa's spec moves to j
	stop()
	f.stripHolderLabel(t, "k")
	f.setKeys(t, "papa", "j")
	// When the operator starts again, and papa's passes that no longer grant
	// it k fail: its workloads of k take time to stop
	s := shortRenewal(t)
	s.innerFail = func(name string, c call) error {
		if name == "papa" && (!c.state.Granted || !grants(c.state, "k")) {
			return errNotStopped
		}
		return nil
	}
	f, _ = startIn(t, ns, s)
	f.waitForGrantedPass(t, "papa", "j")
	// Then whiskey does not get k while papa may still act for it, however
	// many lease durations pass
	f.neverClaimed(t, "whiskey", 8*time.Second)
}

// The renewals a starting process resumes reach every held record within a
// lease duration, however many records its objects hold and however long
// each renewal takes: a contender's pass runs from the start, and counts
// the lease duration from its first look at the record.
func TestARestartedOperatorRenewsEveryRecordItsObjectsHoldBeforeAContendersCountOfTheLeaseDurationRunsOut(t *testing.T) {
	ns := env.Namespace(t)
	s := renewalOf(t, 5*time.Second)
	f, stop := startIn(t, ns, s)
	// Given eight holders each hold a key on time-based liveness (5 s), and
	// a contender waits for each
	const n = 8
	for i := range n {
		f.holdsAndWaits(t, fmt.Sprintf("a%d", i), fmt.Sprintf("k%d", i), fmt.Sprintf("b%d", i))
	}

	// When the operator restarts on an API server that takes 900 ms to
	// answer a Lease write (eight records at 900 ms, 7.2 s one after
	// another, stand for thousands at a few milliseconds each), and the new
	// process does not get to the holders' first passes for longer than a
	// lease
	s.workers = 2 * n
	s.beforeLeaseUpdate = func(*coordinationv1.Lease) { time.Sleep(900 * time.Millisecond) }
	f, restarted := restartHoldingBack(t, ns, stop, s, func(name string) bool { return strings.HasPrefix(name, "a") })

	// Then no contender takes a key over while its holder's renewals are due
	// from the restarted operator
	waiters := map[string]string{}
	for i := range n {
		waiters[fmt.Sprintf("b%d", i)] = fmt.Sprintf("k%d", i)
	}
	f.notTakenOver(t, restarted, 12*time.Second, waiters)
}

// The upgrade that adds claim.Config.Labels (and restricts the manager's
// Lease cache to them, lease.CacheByObject) is a restart: the renewals the
// new process resumes reach the records its objects hold from before, which
// do not carry those labels yet, before a contender's count of the lease
// duration runs out.
func TestAnOperatorRestartedWithClaimLabelsRenewsTheRecordsWrittenWithoutThemBeforeTheirHoldersFirstPass(t *testing.T) {
	ns := env.Namespace(t)
	s := shortRenewal(t)
	f, stop := startIn(t, ns, s)
	// Given a holds k on time-based liveness and b waits for it, under a
	// release that writes no claim labels
	f.holdsAndWaits(t, "a", "k", "b")

	// When the operator restarts with claim labels, its Lease cache
	// restricted to them, and does not get to a's first pass for longer
	// than a lease
	labels := map[string]string{"app.example.com/claims": "widgets"}
	s.claimCfg = &claim.Config{Labels: labels}
	s.leaseLabels = labels
	s.workers = 2
	f, restarted := restartHoldingBack(t, ns, stop, s, named("a"))

	// Then the new process renews k all the same, and b does not take it
	// over, though more than a lease passes
	f.notTakenOver(t, restarted, 6*time.Second, map[string]string{"b": "k"})
}

// An upgrade that changes the value claim.Config.HolderLabels gives under
// the same label key (a port that selected a holder's records by its name
// moving to its UID, as docs/porting.md advises) is a restart: the renewals
// the new process resumes reach the records its objects hold from before,
// labelled with the old values, before a contender's count of the lease
// duration runs out (docs/middleware.md: every record the object still
// holds is renewed "after a restart", so it expires only when the operator
// itself stopped renewing).
func TestAnOperatorRestartedWithOtherHolderLabelValuesRenewsTheRecordsLabelledWithTheOldOnesBeforeTheirHoldersFirstPass(t *testing.T) {
	ns := env.Namespace(t)
	const holderLabel = "example.com/claim-holder"
	s := shortRenewal(t)
	s.claimCfg = &claim.Config{HolderLabels: func(h claim.Holder) map[string]string { return map[string]string{holderLabel: h.Name} }}
	f, stop := startIn(t, ns, s)
	// Given a holds k on time-based liveness and b waits for it, under a
	// release whose holder label carries the holder's name
	f.holdsAndWaits(t, "a", "k", "b")

	// When the operator restarts with the holder's UID under that label,
	// and does not get to a's first pass for longer than a lease
	s.claimCfg = &claim.Config{HolderLabels: func(h claim.Holder) map[string]string { return map[string]string{holderLabel: string(h.UID)} }}
	s.workers = 2
	f, restarted := restartHoldingBack(t, ns, stop, s, named("a"))

	// Then the new process renews k all the same, and b does not take it
	// over while a's workloads still run, though more than a lease passes
	f.notTakenOver(t, restarted, 6*time.Second, map[string]string{"b": "k"})
}

// The renewals a starting process resumes outlast a write the API server
// refuses once (a 503 while it is busy with the rollout that restarted the
// operator, or a conflict with the old process's last renewal): the
// holder's record stays renewed, and a contender does not take it over
// while its first pass is still to come (docs/middleware.md: every record
// is renewed "after a restart", so it expires only when the operator itself
// stopped renewing).
func TestARestartedOperatorKeepsRenewingWhatItsObjectsHoldAfterARenewalTheAPIServerRefusedOnce(t *testing.T) {
	ns := env.Namespace(t)
	s := shortRenewal(t)
	f, stop := startIn(t, ns, s)
	// Given a holds k on time-based liveness and b waits for it
	f.holdsAndWaits(t, "a", "k", "b")
	a := f.holderOf(t, "a")

	// When the operator restarts, the API server refuses the first renewal
	// of a's record the new process sends and accepts every write after
	// it, and the new process does not get to a's first pass for longer
	// than a lease
	s.workers = 2
	s.failRenewalsOf = a.UID
	f, restarted := restartHoldingBack(t, ns, stop, s, named("a"))
	eventually(t, 2*time.Second, func() (bool, string) {
		return f.writes.failedRenewals.Load() >= 1, "the restarted operator sent no renewal of a's record"
	})
	f.writes.failRenewalsOf.Store(types.UID(""))

	// Then b does not take k over while a's workloads still run, though
	// more than a lease passes
	f.notTakenOver(t, restarted, 6*time.Second, map[string]string{"b": "k"})
}

// restartHoldingBack stops the operator (stop) and starts it again in ns
// with s, where the passes of the Widgets heldBack names do not get past
// their first read until the test ends: a queue that reaches those objects
// only after a contender's count of the lease duration ran out. It returns
// the new fixture and when it started.
func restartHoldingBack(t *testing.T, ns string, stop func(), s setup, heldBack func(name string) bool) (*fixture, time.Time) {
	t.Helper()
	stop()
	released := make(chan struct{})
	s.beforeWidgetGet = func(key client.ObjectKey) {
		if heldBack(key.Name) {
			<-released
		}
	}
	restarted := time.Now()
	f, _ := startIn(t, ns, s)
	t.Cleanup(func() { close(released) }) // before the manager stops: cleanups run last first
	return f, restarted
}

// named is the heldBack of restartHoldingBack for the Widget name.
func named(name string) func(string) bool { return func(n string) bool { return n == name } }

// notTakenOver asserts the Then "no waiter takes its key over for d while
// the holder's renewals are due from the operator restarted at restarted":
// waiters maps each waiter to the key it waits for.
func (f *fixture) notTakenOver(t *testing.T, restarted time.Time, d time.Duration, waiters map[string]string) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for waiter, key := range waiters {
			if c := f.claimed(t, waiter); c.Reason == string(conditions.ReasonClaimed) {
				t.Fatalf("%s took %s over while its holder's renewals were due from the restarted operator (%s last renewed at %v, restart at %v): %+v",
					waiter, key, key, f.renewTimeOf(t, key), restarted, c)
			}
		}
	}
}

// While the API server refuses a holder's renewals (a webhook, a quota), its
// record is renewed again at most once per RenewEvery, however many passes
// the holder gets meanwhile: each pass that finds a renewal refused must not
// leave one more background retry behind (goroutines and writes growing
// with the holder's passes until the renewals close).
func TestRefusedRenewalsAreTriedOncePerRenewEveryHoweverManyPassesTheHolderGets(t *testing.T) {
	t.Parallel()
	f := start(t, shortRenewal(t))
	// Given a holds k on time-based liveness, and the API server refuses
	// every renewal of a's record from now on
	f.createAndWait(t, "a", conditions.ReasonClaimed, "k")
	f.writes.failRenewalsOf.Store(f.holderOf(t, "a").UID)
	t.Cleanup(func() { f.writes.failRenewalsOf.Store(types.UID("")) })
	time.Sleep(3 * time.Second)
	// When a gets 20 passes (its spec or labels change)
	for range 20 {
		f.touch(t, "a")
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	// Then its record is renewed about once per RenewEvery (300 ms): at
	// most 20 tries in 3 s, counting those of its passes
	before := f.writes.failedRenewals.Load()
	time.Sleep(3 * time.Second)
	if n := f.writes.failedRenewals.Load() - before; n > 20 {
		t.Errorf("%d renewals of a's record in 3 s while the API server refuses them (RenewEvery 300 ms)", n)
	}
}
