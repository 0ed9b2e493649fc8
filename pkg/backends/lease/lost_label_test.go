package lease_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/expiry"
)

// sent counts the objects the API server sends a reader in answer to its
// Lists.
type sent struct {
	client.Reader
	n atomic.Int64
}

func (s *sent) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := s.Reader.List(ctx, list, opts...)
	s.n.Add(int64(meta.LenList(list)))
	return err
}

// A holder's Lease whose holder label is gone (removed by hand, or written
// under an older HolderLabels) is still its record: the holder's uncached
// listings find it, at every freshness, and Restamp labels it again. The
// listing that finds it is filtered by the API server: it sends no Lease of
// another holder and none outside Config.Labels (a leader-election Lease
// in the claim namespace), so while no record lacks its label a listing
// sends exactly the holder's records.
func TestAHoldersListingsFindItsLeaseWithoutTheHolderLabelAndSendNothingElse(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	reader := &sent{Reader: env.APIReader}
	writer := env.TestClient(t)
	c, err := claim.New(reader, writer, claim.Config{Namespace: ns, Labels: map[string]string{"app": "claims"}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	// Given a holds k1 and k2, b holds k3, and the namespace has a Lease
	// that is no claim record
	acquireK1K2ForAAndK3ForB(t, c, a, b)
	leader := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "operator-leader-election"}}
	if err := env.Client.Create(ctx, leader); err != nil {
		t.Fatal(err)
	}
	listed := func(t *testing.T, list func() ([]claim.Record, error)) ([]string, int64) {
		t.Helper()
		before := reader.n.Load()
		recs, err := list()
		if err != nil {
			t.Fatal(err)
		}
		return keysOf(recs), reader.n.Load() - before
	}
	// When a lists its holdings, Then it gets k1 and k2 and is sent
	// nothing else
	keys, n := listed(t, func() ([]claim.Record, error) { return c.Holdings(ctx, a) })
	if diff := cmp.Diff([]string{"k1", "k2"}, keys); diff != "" || n != 2 {
		t.Fatalf("holdings of a (-want +got):\n%s\nsent %d Leases, want 2", diff, n)
	}
	// When k2's Lease loses its holder label, and b's k3 too
	for _, k := range []string{"k2", "k3"} {
		l := leaseOf(t, c, k)
		delete(l.Labels, backends.DefaultHolderUIDLabel)
		if err := env.Client.Update(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stamp"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	// Then a's listings, consistent and at least as fresh as a later
	// write, still find k2, unlabelled, and never b's k3
	for name, list := range map[string]func() ([]claim.Record, error){
		"Holdings":             func() ([]claim.Record, error) { return c.Holdings(ctx, a) },
		"HoldingsNotOlderThan": func() ([]claim.Record, error) { return c.HoldingsNotOlderThan(ctx, a, cm.ResourceVersion) },
	} {
		recs, err := list()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{"k1", "k2"}, keysOf(recs)); diff != "" || !recs[1].Unlabelled {
			t.Fatalf("%s of a after k2 lost its label (-want +got):\n%s\nk2 unlabelled %t, want true", name, diff, recs[1].Unlabelled)
		}
	}
	// When a stamps k2 again
	recs, err := c.Holdings(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Restamp(ctx, a, recs[1]); err != nil {
		t.Fatal(err)
	}
	// Then its listing finds k2 labelled, and is sent its two Leases and
	// b's unlabelled k3, which it drops
	keys, n = listed(t, func() ([]claim.Record, error) { return c.Holdings(ctx, a) })
	if diff := cmp.Diff([]string{"k1", "k2"}, keys); diff != "" || n != 3 {
		t.Fatalf("holdings of a after the stamp (-want +got):\n%s\nsent %d Leases, want 3", diff, n)
	}
	if l := leaseOf(t, c, "k2"); l.Labels[backends.DefaultHolderUIDLabel] != string(a.UID) || l.Labels["app"] != "claims" {
		t.Fatalf("labels of k2 after the stamp: %v", l.Labels)
	}
}

// The cached listing of a holder's records finds a Lease without its
// holder label too, once the cache holds it: a process that starts resumes
// the renewals of what its holders hold from that listing.
func TestCachedHoldingsFindALeaseWithoutTheHolderLabelThatTheCacheHolds(t *testing.T) {
	ns := env.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cached, err := env.NewCachedClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c := newClaimer(t, ns, nil, nil, claim.WithCachedReader(cached))
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	// Given a holds k1 and k2, and b holds k3
	acquireK1K2ForAAndK3ForB(t, c, a, b)
	// When k2's and k3's Leases lose their holder label
	for _, k := range []string{"k2", "k3"} {
		l := leaseOf(t, c, k)
		delete(l.Labels, backends.DefaultHolderUIDLabel)
		if err := env.Client.Update(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	// Then a's cached listing, once the cache shows the edit, finds k1 and
	// k2, unlabelled, and not b's k3
	envtest.Eventually(t, 10*time.Second, func() (bool, string) {
		recs, err := c.CachedHoldings(ctx, a)
		if err != nil {
			return false, err.Error()
		}
		keys := keysOf(recs)
		return cmp.Equal([]string{"k1", "k2"}, keys) && recs[1].Unlabelled,
			fmt.Sprintf("cached holdings of a: %q (%+v)", keys, recs)
	})
}

// acquireK1K2ForAAndK3ForB has a acquire k1 and k2, and b acquire k3.
func acquireK1K2ForAAndK3ForB(t *testing.T, c *claim.Claimer, a, b claim.Holder) {
	t.Helper()
	for _, g := range []struct {
		key string
		h   claim.Holder
	}{{"k1", a}, {"k2", a}, {"k3", b}} {
		wantReason(t, acquire(t, c, g.key, g.h), claim.ReasonAcquired)
	}
}

// The Leases written before claim.Config.Labels were set, which a Lease
// cache restricted by them does not hold, are listed uncached once for all
// holders, by holder, from a listing the API server filters: of the
// namespace's other Leases only those without the labels are sent, and
// only records of the Claimer's set are kept.
func TestTheRecordsWithoutTheClaimLabelsAreListedByHolderInOneFilteredRead(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	claimerOf := claimersIn(t, ns)
	labels := map[string]string{"app": "claims"}
	before := claimerOf(claim.Config{Set: "widgets"}, env.APIReader)
	other := claimerOf(claim.Config{Set: "gadgets"}, env.APIReader)
	reader := &sent{Reader: env.APIReader}
	after := claimerOf(claim.Config{Set: "widgets", Labels: labels}, reader)
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	// Given, before the labels, a held k1 and b k3, another set's b held
	// k4; since, a holds k2 with the labels; and the namespace has a
	// Lease that is no claim record
	wantReason(t, acquire(t, before, "k1", a), claim.ReasonAcquired)
	wantReason(t, acquire(t, before, "k3", b), claim.ReasonAcquired)
	wantReason(t, acquire(t, other, "k4", b), claim.ReasonAcquired)
	wantReason(t, acquire(t, after, "k2", a), claim.ReasonAcquired)
	leader := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "operator-leader-election"}}
	if err := env.Client.Create(ctx, leader); err != nil {
		t.Fatal(err)
	}
	// When the Claimer with the labels lists what lacks them
	n := reader.n.Load()
	got, err := after.UnlabelledHoldings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Then it finds a's k1 and b's k3, by holder, and is sent the four
	// Leases without the labels
	byHolder := map[string][]string{}
	for uid, recs := range got {
		byHolder[string(uid)] = keysOf(recs)
	}
	want := map[string][]string{string(a.UID): {"k1"}, string(b.UID): {"k3"}}
	if diff := cmp.Diff(want, byHolder); diff != "" || reader.n.Load()-n != 4 {
		t.Fatalf("records without the claim labels by holder UID (-want +got):\n%s\nsent %d Leases, want 4", diff, reader.n.Load()-n)
	}
	// And a Claimer without labels, whose records any cache holds, lists
	// nothing
	if got, err := before.UnlabelledHoldings(ctx); err != nil || got != nil {
		t.Fatalf("records without the claim labels of a Claimer without labels: %v, %v; want none", got, err)
	}
}

// A starting process lists every record of its claim set once, by holder,
// whatever labels each carries: records written before Config.Labels were
// set, and records under another HolderLabels, are found and marked
// Unlabelled (to be stamped); another set's records and Leases that are no
// claim records are not.
func TestEveryRecordOfTheSetIsListedByHolderWhateverItsLabels(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	claimerOf := claimersIn(t, ns)
	labels := map[string]string{"app": "claims"}
	byName := func(h claim.Holder) map[string]string { return map[string]string{"example.com/holder-name": h.Name} }
	before := claimerOf(claim.Config{Set: "widgets"}, env.APIReader)
	renamed := claimerOf(claim.Config{Set: "widgets", Labels: labels, HolderLabels: byName}, env.APIReader)
	after := claimerOf(claim.Config{Set: "widgets", Labels: labels}, env.APIReader)
	other := claimerOf(claim.Config{Set: "gadgets", Labels: labels}, env.APIReader)
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	// Given a holds k1 from before the labels, k5 under another holder
	// label and k2 as the Claimer writes today; b holds k3, and k4 in
	// another set; and the namespace has a Lease that is no claim record
	for _, g := range []struct {
		c   *claim.Claimer
		key string
		h   claim.Holder
	}{{before, "k1", a}, {renamed, "k5", a}, {after, "k2", a}, {after, "k3", b}, {other, "k4", b}} {
		wantReason(t, acquire(t, g.c, g.key, g.h), claim.ReasonAcquired)
	}
	leader := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "operator-leader-election", Labels: labels}}
	if err := env.Client.Create(ctx, leader); err != nil {
		t.Fatal(err)
	}
	// When today's Claimer lists every record of its set
	got, ok, err := after.RecordsByHolder(ctx)
	if err != nil || !ok {
		t.Fatalf("listing every record: ok %t, %v", ok, err)
	}
	// Then it finds a's k1, k2 and k5 and b's k3, those it does not write
	// as they are marked to be stamped
	type found struct {
		Key        string
		Unlabelled bool
	}
	byHolder := map[string][]found{}
	for uid, recs := range got {
		for _, r := range recs {
			byHolder[string(uid)] = append(byHolder[string(uid)], found{r.Key, r.Unlabelled})
		}
	}
	want := map[string][]found{
		string(a.UID): {{"k1", true}, {"k2", false}, {"k5", true}},
		string(b.UID): {{"k3", false}},
	}
	if diff := cmp.Diff(want, byHolder); diff != "" {
		t.Fatalf("every record of the set by holder UID (-want +got):\n%s", diff)
	}
}

// claimersIn returns a constructor of Claimers in ns that read through the
// reader given and write through one client: Claimers of releases with
// other Configs writing the same records.
func claimersIn(t *testing.T, ns string) func(claim.Config, client.Reader) *claim.Claimer {
	t.Helper()
	writer := env.TestClient(t)
	return func(cfg claim.Config, reader client.Reader) *claim.Claimer {
		t.Helper()
		cfg.Namespace = ns
		c, err := claim.New(reader, writer, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// TestTwoReleasesWithOtherHolderLabelsEachKeepTheOthersLabelOnASteadyLease:
// in a rolling upgrade that changes HolderLabels, both releases reconcile the
// same holder. The first of them to find its label missing adds it beside the
// other's, and from then on neither finds anything to write: a re-entry or a
// renewal by either leaves both labels on. A takeover writes the new
// holder's labels alone, so no listing by the former holder's label finds
// the Lease.
func TestTwoReleasesWithOtherHolderLabelsEachKeepTheOthersLabelOnASteadyLease(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	const nameLabel = "example.com/holder-name"
	byName := func(h claim.Holder) map[string]string { return map[string]string{nameLabel: h.Name} }
	older := newClaimer(t, ns, nil, nil)
	writer := env.TestClient(t)
	newer, err := claim.New(env.APIReader, writer, claim.Config{Namespace: ns, HolderLabels: byName})
	if err != nil {
		t.Fatal(err)
	}
	a, b := holder(t, ns, "a"), holder(t, ns, "b")
	both := map[string]string{backends.DefaultHolderUIDLabel: string(a.UID), nameLabel: "a"}
	// Given a holds k through the older release
	wantReason(t, acquire(t, older, "k", a), claim.ReasonAcquired)
	// When the newer release's pass for a finds its label missing
	wantReason(t, acquire(t, newer, "k", a), claim.ReasonHeld)
	// Then it added its label and kept the older one's
	stamped := leaseOf(t, older, "k")
	if diff := cmp.Diff(both, stamped.Labels); diff != "" {
		t.Fatalf("labels after the newer release's pass (-want +got):\n%s", diff)
	}
	// When both releases pass again and renew
	for _, c := range []*claim.Claimer{older, newer, older, newer} {
		wantReason(t, acquire(t, c, "k", a), claim.ReasonHeld)
	}
	// Then neither wrote the Lease
	if v := leaseOf(t, older, "k").ResourceVersion; v != stamped.ResourceVersion {
		t.Fatalf("the Lease was written again (version %s, then %s) while nothing changed; labels %v", stamped.ResourceVersion, v, leaseOf(t, older, "k").Labels)
	}
	for _, c := range []*claim.Claimer{older, newer} {
		if _, err := expiry.Renew(ctx, c, "k", a); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(both, leaseOf(t, c, "k").Labels); diff != "" {
			t.Fatalf("labels after a renewal (-want +got):\n%s", diff)
		}
	}
	// When b takes k over from a, gone, through the older release
	deleteHolder(t, a)
	wantReason(t, acquire(t, older, "k", b), claim.ReasonTakenOver)
	// Then the Lease carries b's labels of the older release alone
	if diff := cmp.Diff(map[string]string{backends.DefaultHolderUIDLabel: string(b.UID)}, leaseOf(t, older, "k").Labels); diff != "" {
		t.Fatalf("labels after the takeover (-want +got):\n%s", diff)
	}
}
