package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
)

// client-go's documented defaults, which a user reaching for leader
// election per key would keep.
const (
	leLeaseDuration = 15 * time.Second
	leRenewDeadline = 10 * time.Second
	leRetryPeriod   = 2 * time.Second
)

// Given K keys held by leader electors at their default timings, and K keys
// held by our middleware, when nothing changes for a window, then the
// electors renew every key every retry period while our holders write
// nothing.
func leaderElection(t *testing.T, s sizes, rep *report) {
	ns := env.Namespace(t)
	ctx := context.Background()
	k := s.leKeys

	ours := newRig(t, ns, rigOptions{controller: true, wake: true})
	dc := env.TestClient(t)
	for i := range k {
		if err := dc.Create(ctx, newClaimant(ns, fmt.Sprintf("held-%d", i), fmt.Sprintf("our-key-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range k {
		ours.inner.waitGranted(t, fmt.Sprintf("held-%d", i), time.Minute)
	}

	theirs := &counter{}
	cs, err := kubernetes.NewForConfig(theirs.wrap(env.Config))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	leading := make(chan struct{}, k)
	for i := range k {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("elected-key-%d", i)},
				Client:     cs.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: fmt.Sprintf("elector-%d", i)},
			},
			LeaseDuration: leLeaseDuration,
			RenewDeadline: leRenewDeadline,
			RetryPeriod:   leRetryPeriod,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { leading <- struct{}{} },
				OnStoppedLeading: func() {},
			},
			Name: fmt.Sprintf("elected-key-%d", i),
		})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); le.Run(runCtx) }()
	}
	for range k {
		select {
		case <-leading:
		case <-time.After(time.Minute):
			t.Fatal("an elector did not lead within a minute")
		}
	}
	// Our holders' own grant passes (status, events) are over before the
	// window opens.
	time.Sleep(time.Second)
	oursBefore, theirsBefore := ours.api.snapshot(), theirs.snapshot()
	time.Sleep(s.window)
	oursD, theirsD := ours.api.since(oursBefore), theirs.since(theirsBefore)

	perMin := func(writes int) float64 { return float64(writes) / float64(k) / s.window.Minutes() }
	if oursD.writes() != 0 {
		t.Errorf("our idle holders wrote: %s", oursD.byVerb(1))
	}
	if theirsD.writes() == 0 {
		t.Errorf("leader electors wrote nothing in %s: the window does not see a renewal", s.window)
	}
	rep.add(row{fmt.Sprintf("(a) leaderelection LeaseLock per key, %d keys, %s window", k, s.window),
		"API writes per held key per minute (extrapolated)",
		fmt.Sprintf("%.1f (%s in window)", perMin(oursD.writes()), oursD.byVerb(1)),
		fmt.Sprintf("%.1f (%s in window)", perMin(theirsD.writes()), theirsD.byVerb(1)),
		"ours 0", verdict(oursD.writes() == 0, "see the counts")})
}

// Annotations of the hand-written claim.
const (
	handHolderUID  = "example.com/holder-uid"
	handHolderName = "example.com/holder-name"
	handPrefix     = "hand-"
	handRequeue    = 30 * time.Second
)

// handClaim is the hand-written claim operators carry today, re-implemented
// from its description for comparison, not as an API: Create first; on
// AlreadyExists read and judge; take a dead holder's key over by a Delete
// fenced on UID and resourceVersion, then Create again; at most two rounds.
type handClaim struct {
	c  client.Client
	ns string
}

// pass is one reconcile's claim step; granted reports whether self holds
// the key afterwards.
func (h handClaim) pass(ctx context.Context, key string, self claim.Holder) (bool, error) {
	name := backends.HashName(handPrefix, key)
	for range 2 {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name, Annotations: map[string]string{
				handHolderUID: string(self.UID), handHolderName: self.Name,
			}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(self.Name)},
		}
		err := h.c.Create(ctx, l)
		if err == nil {
			return true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("creating claim Lease %s: %w", name, err)
		}
		cur := &coordinationv1.Lease{}
		if err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: name}, cur); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, fmt.Errorf("reading claim Lease %s: %w", name, err)
		}
		uid := types.UID(cur.Annotations[handHolderUID])
		if uid == self.UID {
			return true, nil
		}
		alive, err := h.alive(ctx, cur.Annotations[handHolderName], uid)
		if err != nil || alive {
			return false, err
		}
		err = h.c.Delete(ctx, cur, client.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return false, fmt.Errorf("deleting claim Lease %s of a gone holder: %w", name, err)
		}
	}
	return false, errors.New("claim Lease kept changing")
}

func (h handClaim) alive(ctx context.Context, name string, uid types.UID) (bool, error) {
	cm := &corev1.ConfigMap{}
	err := h.c.Get(ctx, client.ObjectKey{Namespace: h.ns, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading holder %s: %w", name, err)
	}
	return cm.UID == uid, nil
}

// Given the hand-written claim, when a steady holder and a parked claimant
// pass, and a successor takes over a deleted holder's key, then each pass
// posts a rejected Create and a takeover writes three times.
func handwritten(t *testing.T, s sizes, rep *report, res *results) {
	ns := env.Namespace(t)
	ctx := context.Background()
	api := &counter{}
	c, err := client.New(api.wrap(env.Config), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	h := handClaim{c: c, ns: ns}
	cr := newClaimerRig(t, ns) // for HolderOf only
	n := s.opRuns
	hs := holders(t, cr.cl, ns, "hand", 2, 2)
	holder, parked := hs[0], hs[1]
	mustPass := func(key string, self claim.Holder, want bool) {
		t.Helper()
		got, err := h.pass(ctx, key, self)
		if err != nil || got != want {
			t.Fatalf("hand-written pass of %s for %s: granted %v, %v; want %v", key, self.Name, got, err, want)
		}
	}
	mustPass("hand-key", holder, true)

	var steady, park op
	for range n {
		_ = steady.time(api, func() error { mustPass("hand-key", holder, true); return nil })
		_ = park.time(api, func() error { mustPass("hand-key", parked, false); return nil })
	}
	dead := holders(t, cr.cl, ns, "hand-dead", n, s.workers)
	dc := env.TestClient(t)
	for i := range n {
		mustPass(fmt.Sprintf("hand-inherited-%d", i), dead[i], true)
		if err := dc.Delete(ctx, newConfigMap(ns, dead[i].Name)); err != nil {
			t.Fatal(err)
		}
	}
	var takeover op
	for i := range n {
		_ = takeover.time(api, func() error { mustPass(fmt.Sprintf("hand-inherited-%d", i), parked, true); return nil })
	}
	if park.calls.rejected() != n {
		t.Errorf("hand-written parked passes: %s, want one rejected Create each", park.calls.byVerb(n))
	}
	per := func(o op, f func(counts) int) string { return ratio(f(o.calls), n) }
	rep.add(row{fmt.Sprintf("(b) hand-written claim, %d passes", n), "writes per steady holder pass (rejected)",
		fmt.Sprintf("%.2g", res.steadyWritesPerPass), per(steady, counts.writes) + " (" + per(steady, counts.rejected) + ")", "", ""})
	rep.add(row{fmt.Sprintf("(b) hand-written claim, %d passes", n), "writes per parked pass (rejected)",
		fmt.Sprintf("%.2g", res.parkedWritesPerPass), per(park, counts.writes) + " (" + per(park, counts.rejected) + ")", "0 rejected", verdict(res.parkedWritesPerPass == 0, "ours writes while parked")})
	rep.add(row{fmt.Sprintf("(b) hand-written claim, %d takeovers", n), "writes per takeover (rejected); latency",
		fmt.Sprintf("%.2g (0); p50 %s", res.takeoverWrites, ms(res.takeoverP50)),
		per(takeover, counts.writes) + " (" + per(takeover, counts.rejected) + "); " + takeover.lat.String(), "", ""})
	rep.add(row{"(b) hand-written claim", "handover latency, 30 s requeue (computed: U[0, 30 s) + one takeover pass)",
		fmt.Sprintf("p50 %s, p99 %s (wake-up, measured in 4)", ms(res.wakeP50), ms(res.wakeP99)),
		fmt.Sprintf("p50 %s, p99 %s", ms(handRequeue/2+takeover.lat.pct(50)), ms(handRequeue*99/100+takeover.lat.pct(99))), "", ""})
}
