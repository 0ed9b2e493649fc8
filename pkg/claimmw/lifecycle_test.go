package claimmw_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// wakeWithin is how soon a wake-up must land; the requeue intervals of
// every fixture are an hour.
const wakeWithin = 5 * time.Second

func TestDeletingTheHolderWakesTheParkedWidgetBeforeItsRequeue(t *testing.T) {
	f := start(t, setup{})
	ctx := context.Background()
	// Given a holds k and b is parked on it, with a parked requeue of an hour
	f.aHoldsKAndBWaits(t)
	// When a is deleted
	a := f.widgetNow(t, "a")
	deleted := time.Now()
	if err := direct(t).Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	// Then b is Claimed within seconds, woken by the release of a's Lease
	f.waitForReason(t, "b", conditions.ReasonClaimed, wakeWithin)
	t.Logf("b claimed %s after a was deleted", time.Since(deleted).Round(time.Millisecond))
	// And a is gone, its finalizer removed after its release
	f.waitGone(t, "a", wakeWithin)
	// And the Lease of k now names b
	rec, err := f.mw.Claimer().Current(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := f.widget(t, "b")
	if !rec.Ours() || rec.Holder.UID != b.UID {
		t.Errorf("record of k = %+v, want held by b (%s)", rec, b.UID)
	}
}

// holderLabel marks the test's pods as belonging to a claim holder.
const holderLabel = "example.com/claim-holder-uid"

func TestHandoverGateHoldsTheTakeoverWhileALabelledPodRuns(t *testing.T) {
	gate := claimmw.PodsGone(env.APIReader, func(_ string, previous claim.Holder) map[string]string {
		return map[string]string{holderLabel: string(previous.UID)}
	})
	f := start(t, setup{claimOpts: []claim.Option{claim.WithHandoverGate(gate)}})
	ctx := context.Background()
	c := direct(t)
	// Given key k held by an object that is gone without releasing it (an
	// operator that crashed, or a forced delete), whose pod still runs
	old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "old-holder"}}
	if err := c.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	oldHolder, err := f.mw.Claimer().HolderOf(old)
	if err != nil {
		t.Fatal(err)
	}
	if _, o, err := f.mw.Claimer().Acquire(ctx, "k", oldHolder); err != nil || !o.Granted() {
		t.Fatalf("old holder acquiring k: %+v, %v", o, err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "old-worker", Labels: map[string]string{holderLabel: string(old.UID)}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "w", Image: "example.invalid/w"}}},
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	// When b names k
	f.createWidget(t, "b", "k")
	// Then b waits for the handover, naming the old holder and its pod
	cond := f.waitForReason(t, "b", conditions.ReasonWaitingForHandover, 10*time.Second)
	mustContain(t, "b's message", cond.Message, "ConfigMap "+f.ns+"/old-holder", "pod "+f.ns+"/old-worker")
	if n := len(f.inner.callsOf("b")); n != 0 {
		t.Errorf("inner reconciler ran %d times for b while waiting", n)
	}
	// When the pod is gone (no kubelet: deleting the unscheduled pod removes it)
	if err := c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// Then b takes k over within seconds, woken by the pod's deletion
	f.waitForReason(t, "b", conditions.ReasonClaimed, wakeWithin)
	rec, err := f.mw.Claimer().Current(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Transitions != 1 {
		t.Errorf("record of k has %d transitions, want 1 (a takeover, not a fresh grant)", rec.Transitions)
	}
}

func TestChangingTheKeyReleasesTheOldClaimOnlyAfterTheInnerPassSucceeded(t *testing.T) {
	f := start(t, setup{})
	ctx := context.Background()
	// Given a holds k1, and an inner reconciler that fails its first pass on k2
	f.createAndWait(t, "a", conditions.ReasonClaimed, "k1")
	var mu sync.Mutex
	var oldLeaseAtK2Pass []bool
	f.inner.setFail(func(name string, c call) error {
		grants := claimmw.GrantsFrom(ctxWith(c.state))
		if name != "a" || len(grants) != 1 || grants[0].Key != "k2" {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		oldLeaseAtK2Pass = append(oldLeaseAtK2Pass, f.leaseExists(t, "k1"))
		if len(oldLeaseAtK2Pass) == 1 {
			return errors.New("injected: moving the workloads failed")
		}
		return nil
	})
	// When a changes its key to k2
	a := f.widgetNow(t, "a")
	a.Spec.Keys = []string{"k2"}
	if err := direct(t).Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	// Then the Lease of k1 is released eventually
	eventually(t, 10*time.Second, func() (bool, string) {
		return !f.leaseExists(t, "k1"), "Lease of k1 still exists"
	})
	// And it still existed during the failed pass and the successful pass
	// that followed: it went only after the inner pass succeeded
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]bool{true, true}, oldLeaseAtK2Pass[:2]); diff != "" {
		t.Errorf("k1's Lease existed during the k2 passes (-want +got):\n%s", diff)
	}
	if !f.leaseExists(t, "k2") {
		t.Error("Lease of k2 is missing")
	}
	mustContain(t, "a's condition", f.claimed(t, "a").Message, `"k2"`)
}

func TestDeletingAWidgetWhoseSweepFailsKeepsTheFinalizerUntilTheCauseIsFixed(t *testing.T) {
	f := start(t, setup{})
	ctx := context.Background()
	// Given a holds k, and Lease deletes that fail
	f.createAndWait(t, "a", conditions.ReasonClaimed, "k")
	f.writes.failLeaseDeletes.Store(true)
	// When a is deleted
	f.deleteWidgetAsync(t, "a")
	// Then after failed release attempts a is still there, being deleted,
	// with its finalizer, and the Lease is still there
	eventually(t, 10*time.Second, func() (bool, string) {
		n := f.writes.snapshot()["delete Lease"]
		return n >= 2, fmt.Sprintf("%d Lease deletes attempted, want 2", n)
	})
	a, err := f.widget(t, "a")
	if err != nil {
		t.Fatalf("a after failed sweeps: %v", err)
	}
	if a.DeletionTimestamp == nil || !slices.Contains(a.Finalizers, string(claimmw.DefaultFinalizer)) {
		t.Fatalf("a after failed sweeps: deletion %v, finalizers %v; want being deleted with %s", a.DeletionTimestamp, a.Finalizers, claimmw.DefaultFinalizer)
	}
	if !f.leaseExists(t, "k") {
		t.Fatal("Lease of k gone although its delete failed")
	}
	// When the cause is fixed
	f.writes.failLeaseDeletes.Store(false)
	// Then deletion finishes and no Lease is left
	f.waitGone(t, "a", 10*time.Second)
	var leases coordinationv1.LeaseList
	if err := env.APIReader.List(ctx, &leases, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 0 {
		t.Errorf("%d Leases left after deletion, want 0", len(leases.Items))
	}
}

func TestASteadyPassOfAHolderWritesNothing(t *testing.T) {
	f := start(t, setup{})
	ctx := context.Background()
	// Given a holds k and its first pass is done
	f.createAndWait(t, "a", conditions.ReasonClaimed, "k")
	eventually(t, 5*time.Second, func() (bool, string) {
		return len(f.inner.callsOf("a")) > 0, "inner never ran for a"
	})
	time.Sleep(300 * time.Millisecond) // let the echo of its own status write pass too
	before, calls := f.writes.snapshot(), len(f.inner.callsOf("a"))
	// When a is reconciled again with nothing changed (a label edit triggers it)
	a := f.widgetNow(t, "a")
	a.Labels = map[string]string{"touched": "yes"}
	if err := direct(t).Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() (bool, string) {
		return len(f.inner.callsOf("a")) > calls, "no new pass of a"
	})
	time.Sleep(200 * time.Millisecond)
	// Then the pass wrote no status, no finalizer and no claim
	if diff := cmp.Diff(before, f.writes.snapshot()); diff != "" {
		t.Errorf("writes of a steady pass (-before +after):\n%s", diff)
	}
}

func TestKeysThatCannotBeUsedGiveClearConditions(t *testing.T) {
	f := start(t, setup{})
	for _, tc := range []struct {
		name    string
		keys    []string
		message []string
	}{
		{"keyfunc-error", []string{"k", failKeysFuncKey}, []string{"Computing claim keys", "no such backend"}},
		{"empty-key", []string{""}, []string{"key is empty"}},
		{"control-character", []string{"bad\u0007key"}, []string{"control character"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Given a Widget whose keys cannot be used
			f.createWidget(t, tc.name, tc.keys...)
			// Then its condition is InvalidKey with the reason in words
			c := f.waitForReason(t, tc.name, conditions.ReasonInvalidKey, 10*time.Second)
			if c.Status != metav1.ConditionFalse {
				t.Errorf("status %s, want False", c.Status)
			}
			mustContain(t, "message", c.Message, tc.message...)
			// And its inner reconciler never ran and it claimed nothing
			if n := len(f.inner.callsOf(tc.name)); n != 0 {
				t.Errorf("inner ran %d times", n)
			}
			if f.leaseExists(t, "k") {
				t.Error("Lease of k exists although the key set was invalid")
			}
		})
	}
}

func TestAForeignRecordBlocksUntilAPersonRemovesIt(t *testing.T) {
	f := start(t, setup{})
	ctx := context.Background()
	c := direct(t)
	// Given a Lease under k's record name that the claim did not write
	foreign := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: f.mw.Claimer().Config().NameFunc("k")}}
	if err := c.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	// When a names k
	f.createWidget(t, "a", "k")
	// Then a is blocked with Foreign, naming the Lease, and its inner never ran
	cond := f.waitForReason(t, "a", conditions.ReasonForeign, 10*time.Second)
	mustContain(t, "a's message", cond.Message, `"k"`, foreign.Name)
	if n := len(f.inner.callsOf("a")); n != 0 {
		t.Errorf("inner ran %d times for the blocked a", n)
	}
	// When a person deletes the foreign Lease
	if err := c.Delete(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	// Then a is woken and claims k within seconds
	f.waitForReason(t, "a", conditions.ReasonClaimed, wakeWithin)
}

// A key an object gives up is kept while the handover gate says its
// workloads of the key still run; the passes that ask the gate again write
// no status while nothing changes, whether the object still waits for
// another key or holds the ones it names now.
func aKeyTheGateKeepsCostsNoStatusWritePerPass(t *testing.T, newKeys ...string) {
	t.Helper()
	gate := claimmw.PodsGone(env.APIReader, func(_ string, previous claim.Holder) map[string]string {
		return map[string]string{holderLabel: string(previous.UID)}
	})
	f := start(t, setup{claimOpts: []claim.Option{claim.WithHandoverGate(gate)}})
	ctx := context.Background()
	// Given z holds j, and x holds k and runs a pod of it
	f.createAndWait(t, "z", conditions.ReasonClaimed, "j")
	x := f.createWidget(t, "x", "k")
	f.waitForReason(t, "x", conditions.ReasonClaimed, wakeWithin)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "x-worker", Labels: map[string]string{holderLabel: string(x.UID)}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "w", Image: "example.invalid/w"}}},
	}
	if err := direct(t).Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// When x stops naming k, and its pass told to give k up succeeds
	f.setKeys(t, "x", newKeys...)
	f.waitForInnerCall(t, "x", "a pass told to give k up", func(s claimmw.State) bool {
		return namesKey(s.Releasing, "k")
	})
	time.Sleep(time.Second) // the pass and its writes end
	if !f.leaseExists(t, "k") {
		t.Fatal("k was released while a pod of x's still runs: the gate did not keep it")
	}
	// Then the passes that ask the gate again write no status
	before := f.writes.snapshot()
	for range 3 {
		f.touch(t, "x")
		time.Sleep(500 * time.Millisecond)
	}
	after := f.writes.snapshot()
	for _, w := range []string{"update/status Widget", "patch/status Widget"} {
		if d := after[w] - before[w]; d != 0 {
			t.Errorf("%d %s writes while the gate kept k and nothing changed", d, w)
		}
	}
	if !f.leaseExists(t, "k") {
		t.Fatal("k was released while a pod of x's still runs")
	}
	// And once the pod is gone, x's next pass releases k
	if err := direct(t).Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	f.touch(t, "x")
	eventually(t, wakeWithin, func() (bool, string) { return !f.leaseExists(t, "k"), "k is still held" })
}

func TestAKeyAGrantedObjectGivesUpCostsNoStatusWritePerPassWhileTheHandoverGateKeepsIt(t *testing.T) {
	t.Parallel()
	aKeyTheGateKeepsCostsNoStatusWritePerPass(t, "l")
}

func TestAKeyAParkedObjectGivesUpCostsNoStatusWritePerPassWhileTheHandoverGateKeepsIt(t *testing.T) {
	t.Parallel()
	aKeyTheGateKeepsCostsNoStatusWritePerPass(t, "j")
}
