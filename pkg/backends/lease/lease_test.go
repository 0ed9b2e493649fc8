package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/backendtest"
	"github.com/ocf-claim/claim/pkg/claim"
)

const key = "elasticsearch|https://es.data.svc:9200"

// writes counts the writes a client makes.
type writes struct{ n atomic.Int64 }

func (w *writes) wrap(c client.Client) client.Client {
	count := func() { w.n.Add(1) }
	return interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			count()
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			count()
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			count()
			return c.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			count()
			return c.Delete(ctx, obj, opts...)
		},
	})
}

// holder creates a ConfigMap to stand for a holder object and returns its
// Holder.
func holder(t *testing.T, ns, name string) claim.Holder {
	t.Helper()
	return backendtest.ConfigMapHolder(t, env.Client, ns, name)
}

func deleteHolder(t *testing.T, h claim.Holder) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: h.Namespace, Name: h.Name}}
	if err := env.Client.Delete(context.Background(), cm); err != nil {
		t.Fatalf("deleting holder %s: %v", h, err)
	}
}

func newClaimer(t *testing.T, ns string, reader client.Reader, writer client.Client, opts ...claim.Option) *claim.Claimer {
	t.Helper()
	if reader == nil {
		reader = env.APIReader
	}
	if writer == nil {
		writer = env.TestClient(t)
	}
	c, err := claim.New(reader, writer, claim.Config{Namespace: ns}, opts...)
	if err != nil {
		t.Fatalf("claim.New: %v", err)
	}
	return c
}

func acquire(t *testing.T, c *claim.Claimer, k string, self claim.Holder) claim.Outcome {
	t.Helper()
	_, o, err := c.Acquire(context.Background(), k, self)
	if err != nil {
		t.Fatalf("Acquire(%q, %s): %v", k, self, err)
	}
	return o
}

func wantReason(t *testing.T, o claim.Outcome, r claim.Reason) {
	t.Helper()
	if o.Reason != r {
		t.Fatalf("outcome %s (%q), want %s", o.Reason, o.Message, r)
	}
}

func leaseOf(t *testing.T, c *claim.Claimer, k string) *coordinationv1.Lease {
	t.Helper()
	cfg := c.Config()
	var l coordinationv1.Lease
	if err := env.APIReader.Get(context.Background(), client.ObjectKey{Namespace: cfg.Namespace, Name: cfg.NameFunc(k)}, &l); err != nil {
		t.Fatalf("reading Lease of %q: %v", k, err)
	}
	return &l
}

// stillHolds fails t with failure unless h holds key through c.
func stillHolds(t *testing.T, c *claim.Claimer, h claim.Holder, failure string) {
	t.Helper()
	if held, err := c.Holds(context.Background(), key, h); err != nil || !held {
		t.Fatalf("%s (Holds = %v, %v)", failure, held, err)
	}
}

// touchLease edits a label of k's Lease through w, so that a write
// conditional on what was read of it before is refused.
func touchLease(ctx context.Context, t *testing.T, w client.Client, c *claim.Claimer, k string) error {
	t.Helper()
	l := leaseOf(t, c, k)
	l.Labels["touched"] = "yes"
	return w.Update(ctx, l)
}

func TestFirstClaimantWinsAndReentryWritesNothing(t *testing.T) {
	ns := env.Namespace(t)
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	var w writes
	writer := env.TestClient(t)
	c := newClaimer(t, ns, nil, w.wrap(writer))

	// Given a claims the free key
	first := acquire(t, c, key, a)
	wantReason(t, first, claim.ReasonAcquired)
	if first.Token.IsZero() || !first.Granted() {
		t.Fatalf("grant without token: %+v", first)
	}
	// When b claims it
	got := acquire(t, c, key, b)
	// Then b is told it is held elsewhere, naming a
	wantReason(t, got, claim.ReasonHeldElsewhere)
	if !got.Holder.Is(a) || !strings.Contains(got.Message, a.String()) {
		t.Fatalf("outcome names %s (%q), want %s", got.Holder, got.Message, a)
	}
	// And a re-entering is Held with the same token and no write at all
	before := w.n.Load()
	again := acquire(t, c, key, a)
	wantReason(t, again, claim.ReasonHeld)
	if again.Token != first.Token {
		t.Fatalf("re-entry token %s, want %s", again.Token, first.Token)
	}
	if n := w.n.Load() - before; n != 0 {
		t.Fatalf("re-entry made %d writes, want 0", n)
	}
	// And a parked claimant does not post a rejected Create either
	before = w.n.Load()
	wantReason(t, acquire(t, c, key, b), claim.ReasonHeldElsewhere)
	if n := w.n.Load() - before; n != 0 {
		t.Fatalf("parked pass made %d writes, want 0", n)
	}
}

func TestTakeoverOfADeletedHolder(t *testing.T) {
	ns := env.Namespace(t)
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	c := newClaimer(t, ns, nil, nil)
	first := acquire(t, c, key, a)

	// Given the holder is deleted
	deleteHolder(t, a)
	// When b claims the key
	got := acquire(t, c, key, b)
	// Then b takes it over with a larger token and one more transition
	wantReason(t, got, claim.ReasonTakenOver)
	if !got.Previous.Is(a) {
		t.Fatalf("previous = %s, want %s", got.Previous, a)
	}
	if cmp, _ := got.Token.Compare(first.Token); cmp <= 0 {
		t.Fatalf("takeover token %s not after %s", got.Token, first.Token)
	}
	l := leaseOf(t, c, key)
	if *l.Spec.LeaseTransitions != 1 || l.Annotations[backends.DefaultHolderUIDAnnotation] != string(b.UID) {
		t.Fatalf("Lease after takeover: transitions %d, holder %s", *l.Spec.LeaseTransitions, l.Annotations[backends.DefaultHolderUIDAnnotation])
	}
}

func TestTakeoverOfAHolderRecreatedUnderTheSameName(t *testing.T) {
	ns := env.Namespace(t)
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	c := newClaimer(t, ns, nil, nil)
	acquire(t, c, key, a)

	// Given the holder is deleted and recreated under its name (a new UID)
	deleteHolder(t, a)
	a2 := holder(t, ns, "a")
	// When b claims the key
	got := acquire(t, c, key, b)
	// Then the recorded holder counts as gone, though its name exists
	wantReason(t, got, claim.ReasonTakenOver)
	// And the recreated object is a different holder, parked behind b
	wantReason(t, acquire(t, c, key, a2), claim.ReasonHeldElsewhere)
}

// hookLiveness answers "dead" and runs mutate before answering, so the
// world changes between the liveness check and the takeover write.
func hookLiveness(mutate func()) claim.Liveness {
	return claim.LivenessFunc(func(context.Context, claim.Record) (bool, error) {
		mutate()
		return false, nil
	})
}

func TestTakeoverLosesToAChangeOfTheLeaseBetweenReadAndWrite(t *testing.T) {
	ns := env.Namespace(t)
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	acquire(t, newClaimer(t, ns, nil, nil), key, a)

	// Given a Liveness that judges a dead while someone edits the Lease
	var c *claim.Claimer
	c = newClaimer(t, ns, nil, nil, claim.WithLiveness(hookLiveness(func() {
		if err := touchLease(context.Background(), t, env.Client, c, key); err != nil {
			t.Errorf("editing Lease mid-call: %v", err)
		}
	})))
	// When b tries to take over
	_, o, err := c.Acquire(context.Background(), key, b)
	// Then the fenced write is refused, reported as a conflict, and a keeps
	// the claim
	if !errors.Is(err, backends.ErrConflict) {
		t.Fatalf("Acquire: outcome %s, error %v; want ErrConflict", o.Reason, err)
	}
	if got := leaseOf(t, c, key).Annotations[backends.DefaultHolderUIDAnnotation]; got != string(a.UID) {
		t.Fatalf("holder after refused takeover = %s, want %s", got, a.UID)
	}
}

func TestAHolderThatReappearsBetweenLivenessAndWriteKeepsItsClaim(t *testing.T) {
	ns := env.Namespace(t)
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	ca := newClaimer(t, ns, nil, nil)
	first := acquire(t, ca, key, a)

	// Given b's Liveness judges a dead, and a, very much alive, releases and
	// re-acquires the key before b writes
	cb := newClaimer(t, ns, nil, nil, claim.WithLiveness(hookLiveness(func() {
		if err := ca.Release(context.Background(), a); err != nil {
			t.Errorf("release mid-call: %v", err)
		}
		acquire(t, ca, key, a)
	})))
	// When b tries to take over
	_, _, err := cb.Acquire(context.Background(), key, b)
	// Then b's write, fenced on the old Lease's UID and version, is refused
	// and a keeps its claim
	if !errors.Is(err, backends.ErrConflict) {
		t.Fatalf("Acquire: %v, want ErrConflict", err)
	}
	stillHolds(t, ca, a, "a no longer holds")
	if now := acquire(t, ca, key, a); now.Token == first.Token {
		t.Fatalf("re-acquired grant kept the old token %s", now.Token)
	}
}

func TestTakeoverLostToAThirdClaimantNamesTheWinner(t *testing.T) {
	ns := env.Namespace(t)
	a, b, third := holder(t, ns, "a"), holder(t, ns, "b"), holder(t, ns, "third")
	acquire(t, newClaimer(t, ns, nil, nil), key, a)
	deleteHolder(t, a)

	// Given b judges a dead while the third claimant takes over first
	other := newClaimer(t, ns, nil, nil)
	cb := newClaimer(t, ns, nil, nil, claim.WithLiveness(hookLiveness(func() {
		wantReason(t, acquire(t, other, key, third), claim.ReasonTakenOver)
	})))
	// When b's takeover write lands on the changed Lease
	got := acquire(t, cb, key, b)
	// Then b is parked behind the winner, named, rather than told a is live
	wantReason(t, got, claim.ReasonHeldElsewhere)
	if !got.Holder.Is(third) {
		t.Fatalf("winner named %s, want %s", got.Holder, third)
	}
}

func TestLivenessErrorKeepsTheHolder(t *testing.T) {
	ns := env.Namespace(t)
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	acquire(t, newClaimer(t, ns, nil, nil), key, a)
	boom := errors.New("holder kind unreadable")
	c := newClaimer(t, ns, nil, nil, claim.WithLiveness(claim.LivenessFunc(func(context.Context, claim.Record) (bool, error) {
		return false, boom
	})))
	// When liveness cannot judge the holder
	_, _, err := c.Acquire(context.Background(), key, b)
	// Then the error is returned and the holder keeps the key
	if !errors.Is(err, boom) {
		t.Fatalf("Acquire error = %v, want %v", err, boom)
	}
	stillHolds(t, c, a, "holder lost its claim to a liveness error")
}

func TestClosedHandoverGateWaits(t *testing.T) {
	ns := env.Namespace(t)
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	acquire(t, newClaimer(t, ns, nil, nil), key, a)
	deleteHolder(t, a)
	open := false
	c := newClaimer(t, ns, nil, nil, claim.WithHandoverGate(claim.GateFunc(func(context.Context, string, claim.Holder) (bool, string, error) {
		return open, "pod a-0 still runs", nil
	})))
	// Given a dead holder whose pods still run
	got := acquire(t, c, key, b)
	wantReason(t, got, claim.ReasonWaitingForHandover)
	if !strings.Contains(got.Message, "pod a-0 still runs") {
		t.Fatalf("message %q does not say what it waits for", got.Message)
	}
	// When the pods are gone
	open = true
	// Then b takes over
	wantReason(t, acquire(t, c, key, b), claim.ReasonTakenOver)
}

func TestTwentyClaimantsRaceOneWinner(t *testing.T) {
	ns := env.Namespace(t)
	const n = 20
	holders := make([]claim.Holder, n)
	claimers := make([]*claim.Claimer, n)
	for i := range n {
		holders[i] = holder(t, ns, fmt.Sprintf("h%02d", i))
		reader := env.TestClient(t)
		claimers[i] = newClaimer(t, ns, reader, nil)
	}
	// When 20 claimants with separate clients acquire one key at once
	outcomes := make([]claim.Outcome, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, outcomes[i], errs[i] = claimers[i].Acquire(context.Background(), key, holders[i])
		})
	}
	close(start)
	wg.Wait()
	// Then exactly one is granted and every other names it
	var winner claim.Holder
	granted := 0
	for i, o := range outcomes {
		if errs[i] != nil {
			t.Fatalf("claimant %d: %v", i, errs[i])
		}
		if o.Granted() {
			granted++
			winner = holders[i]
		}
	}
	if granted != 1 {
		t.Fatalf("%d claimants granted, want 1", granted)
	}
	for i, o := range outcomes {
		if !o.Granted() && (o.Reason != claim.ReasonHeldElsewhere || !o.Holder.Is(winner)) {
			t.Fatalf("claimant %d: %s naming %s, want HeldElsewhere naming %s", i, o.Reason, o.Holder, winner)
		}
	}
}

func TestALaggingCacheNeverDecides(t *testing.T) {
	ns := env.Namespace(t)
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	ctx := context.Background()
	// Given a cache that synced before a took the key and lags since
	lagging, err := env.NewLaggingCache(ctx, &coordinationv1.LeaseList{})
	if err != nil {
		t.Fatal(err)
	}
	lagging.Freeze()
	acquire(t, newClaimer(t, ns, nil, nil), key, a)
	name := backends.HashName(backends.DefaultPrefix, key)
	if err := lagging.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &coordinationv1.Lease{}); !apierrors.IsNotFound(err) {
		t.Fatalf("lagging cache sees the Lease (%v); the test needs it to lag", err)
	}

	t.Run("given the protocol reads uncached then b is told the key is held", func(t *testing.T) {
		got := acquire(t, newClaimer(t, ns, nil, nil), key, b)
		wantReason(t, got, claim.ReasonHeldElsewhere)
		if !got.Holder.Is(a) {
			t.Fatalf("names %s, want %s", got.Holder, a)
		}
	})
	t.Run("given the lagging cache is wrongly passed as reader then Create still refuses a second grant", func(t *testing.T) {
		c := newClaimer(t, ns, lagging, nil)
		_, o, err := c.Acquire(ctx, key, b)
		if o.Granted() {
			t.Fatalf("double grant through a lagging reader: %+v", o)
		}
		if !errors.Is(err, claim.ErrRaced) {
			t.Fatalf("Acquire error = %v, want ErrRaced", err)
		}
		if held, _ := newClaimer(t, ns, nil, nil).Holds(ctx, key, a); !held {
			t.Fatal("a lost its claim")
		}
	})
}

func TestACrashBetweenAcquireAndReleaseLeaksNothing(t *testing.T) {
	ns := env.Namespace(t)
	a := holder(t, ns, "a")
	keys := []string{"k1", "k2", "k3"}
	// Given a claimer that acquired three keys and was dropped without
	// releasing (a crashed process)
	crashed := newClaimer(t, ns, nil, nil)
	for _, k := range keys {
		wantReason(t, acquire(t, crashed, k, a), claim.ReasonAcquired)
	}
	// When a new claimer sweeps for a, keeping k2
	restarted := newClaimer(t, ns, nil, nil)
	if err := restarted.Release(context.Background(), a, "k2"); err != nil {
		t.Fatal(err)
	}
	// Then exactly the others are freed
	for _, k := range keys {
		held, err := restarted.Holds(context.Background(), k, a)
		if err != nil {
			t.Fatal(err)
		}
		if held != (k == "k2") {
			t.Fatalf("after sweep keeping k2: holds %q = %v", k, held)
		}
	}
	// And a sweep without keep leaves no Lease at all
	if err := restarted.Release(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	var list coordinationv1.LeaseList
	if err := env.APIReader.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Fatalf("%d Leases left after the final sweep", len(list.Items))
	}
}

func TestReleaseNeverTouchesAnotherHoldersClaim(t *testing.T) {
	ns := env.Namespace(t)
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	c := newClaimer(t, ns, nil, nil)
	acquire(t, c, key, a)
	// When b sweeps
	if err := c.Release(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	// Then a still holds
	stillHolds(t, c, a, "b's sweep released a's claim")
}

func TestReleaseOfAChangedLeaseIsAnError(t *testing.T) {
	ns := env.Namespace(t)
	a := holder(t, ns, "a")
	base := newClaimer(t, ns, nil, nil)
	acquire(t, base, key, a)
	// Given a writer that edits the Lease right before each Delete, so the
	// Delete's precondition no longer holds
	writer := env.TestClient(t)
	racing := interceptor.NewClient(writer, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if err := touchLease(ctx, t, c, base, key); err != nil {
				return err
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
	c := newClaimer(t, ns, nil, racing)
	// When the sweep runs
	err := c.Release(context.Background(), a)
	// Then it fails with a conflict (a finalizer keeps its place) and the
	// Lease survives
	if !errors.Is(err, backends.ErrConflict) {
		t.Fatalf("Release error = %v, want ErrConflict", err)
	}
	stillHolds(t, base, a, "claim gone after a refused release")
}

func TestForeignLeasesBlockAndSurvive(t *testing.T) {
	ns := env.Namespace(t)
	a := holder(t, ns, "a")
	c := newClaimer(t, ns, nil, nil)
	full := map[string]string{
		backends.DefaultKeyAnnotation:             key,
		backends.DefaultHolderNamespaceAnnotation: ns,
		backends.DefaultHolderNameAnnotation:      "x",
		backends.DefaultHolderUIDAnnotation:       string(a.UID),
	}
	without := func(k string) map[string]string {
		m := map[string]string{}
		for kk, v := range full {
			if kk != k {
				m[kk] = v
			}
		}
		return m
	}
	wrongKey := without("")
	wrongKey[backends.DefaultKeyAnnotation] = "another-key"
	tests := []struct {
		name        string
		annotations map[string]string
		identity    string
	}{
		{"given no annotations then it is foreign", nil, "a"},
		{"given a missing holder UID then it is foreign", without(backends.DefaultHolderUIDAnnotation), ""},
		{"given a missing holder namespace then it is foreign", without(backends.DefaultHolderNamespaceAnnotation), ""},
		{"given another key (a hash collision or a hand-made Lease) then it is foreign", wrongKey, ""},
		{"given only a holderIdentity spelling our format then it is foreign", nil, "ConfigMap/" + ns + "/a"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := fmt.Sprintf("%s-%d", key, i)
			if tt.annotations != nil && tt.annotations[backends.DefaultKeyAnnotation] == key {
				tt.annotations[backends.DefaultKeyAnnotation] = k
			}
			l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
				Namespace: ns, Name: backends.HashName(backends.DefaultPrefix, k), Annotations: tt.annotations,
				// Labelled as a's so that a's sweep finds it.
				Labels: map[string]string{backends.DefaultHolderUIDLabel: string(a.UID)},
			}}
			if tt.identity != "" {
				l.Spec.HolderIdentity = ptr.To(tt.identity)
			}
			if err := env.Client.Create(context.Background(), l); err != nil {
				t.Fatal(err)
			}
			// When a claims the key
			got := acquire(t, c, k, a)
			// Then the foreign Lease blocks, is never self, and is not
			// taken over
			wantReason(t, got, claim.ReasonForeign)
			if held, _ := c.Holds(context.Background(), k, a); held {
				t.Fatal("a foreign Lease counted as held")
			}
			// And a's sweep leaves it alone
			if err := c.Release(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			var after coordinationv1.Lease
			if err := env.APIReader.Get(context.Background(), client.ObjectKeyFromObject(l), &after); err != nil {
				t.Fatalf("foreign Lease after sweep: %v", err)
			}
			if after.ResourceVersion != l.ResourceVersion {
				t.Fatal("foreign Lease was written")
			}
		})
	}
}

func TestAMigratedOperatorKeepsItsExistingLeases(t *testing.T) {
	ns := env.Namespace(t)
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	// Given a Lease written by a hand-written claim: its own prefix, its own
	// annotation keys, and a label by holder name
	legacy := claim.Config{
		Namespace: ns,
		Prefix:    "camunda-storage-",
		Annotations: backends.Annotations{
			Key:             "camunda.io/claim-key",
			HolderNamespace: "camunda.io/holder-namespace",
			HolderName:      "camunda.io/holder-name",
			HolderUID:       "camunda.io/holder-uid",
		},
		HolderLabels: func(h claim.Holder) map[string]string { return map[string]string{"camunda.io/holder": h.Name} },
	}
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns,
			Name:      backends.HashName("camunda-storage-", key),
			Labels:    map[string]string{"camunda.io/holder": "a"},
			Annotations: map[string]string{
				"camunda.io/claim-key":        key,
				"camunda.io/holder-namespace": ns,
				"camunda.io/holder-name":      "a",
				"camunda.io/holder-uid":       string(a.UID),
			},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(ns + "/a")},
	}
	if err := env.Client.Create(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	writer := env.TestClient(t)
	c, err := claim.New(env.APIReader, writer, legacy)
	if err != nil {
		t.Fatal(err)
	}
	// When the ported operator acquires for both holders
	// Then the existing holder re-enters and the other is parked: nothing
	// is double-granted across the upgrade
	wantReason(t, acquire(t, c, key, a), claim.ReasonHeld)
	wantReason(t, acquire(t, c, key, b), claim.ReasonHeldElsewhere)
	// And the sweep finds it by the legacy label
	if err := c.Release(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if held, _ := c.Holds(context.Background(), key, a); held {
		t.Fatal("legacy Lease not released by the sweep")
	}
}

func TestNewRejectsBadConfiguration(t *testing.T) {
	writer := env.TestClient(t)
	_, err := claim.New(env.APIReader, writer, claim.Config{})
	if err == nil || !strings.Contains(err.Error(), "Namespace") {
		t.Fatalf("NewClaimer without namespace: %v, want an error naming Namespace", err)
	}
}

// TestTheSeedConstructorStoresLeases: Given the call the proposal shows,
// claim.New(reader, writer, Config{Namespace, Normalize, Prefix, Labels})
// with no backend option, When a holder acquires a key and a second holder
// contends for it, Then the Claimer works on a real API server: the record is
// one Lease in the namespace, named from the prefix and the normalized key,
// carrying the labels, and the second holder is refused.
func TestTheSeedConstructorStoresLeases(t *testing.T) {
	ns := env.Namespace(t)
	lower := func(k string) (string, error) { return strings.ToLower(k), nil }
	c, err := claim.New(env.APIReader, env.Client, claim.Config{
		Namespace: ns,
		Normalize: lower,
		Prefix:    "seed-",
		Labels:    map[string]string{"app.kubernetes.io/managed-by": "seed-operator"},
	})
	if err != nil {
		t.Fatalf("claim.New without a backend option: %v", err)
	}
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	wantReason(t, acquire(t, c, "Elasticsearch|HTTPS://ES.data.svc:9200", a), claim.ReasonAcquired)
	wantReason(t, acquire(t, c, "elasticsearch|https://es.data.svc:9200", b), claim.ReasonHeldElsewhere)

	var leases coordinationv1.LeaseList
	if err := env.APIReader.List(context.Background(), &leases, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	want := backends.HashName("seed-", "elasticsearch|https://es.data.svc:9200")
	if len(leases.Items) != 1 || leases.Items[0].Name != want {
		t.Fatalf("Leases in %s: %v, want exactly %s", ns, leaseNames(leases), want)
	}
	if got := leases.Items[0].Labels["app.kubernetes.io/managed-by"]; got != "seed-operator" {
		t.Fatalf("Lease label managed-by = %q, want seed-operator", got)
	}
}

func leaseNames(l coordinationv1.LeaseList) []string {
	out := make([]string, 0, len(l.Items))
	for _, i := range l.Items {
		out = append(out, i.Name)
	}
	return out
}
