package claimmw_test

// The deletion path (docs/middleware.md "Deletion"): a deletion pass is told
// the keys its object still holds, keeps them until a pass succeeds, hands
// them to the waiter once the object is gone (with or without the
// middleware's finalizer), and finds every record of the object without
// waiting for the API server's watch cache.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// Promise 1 and the wake-ups: a holder removed without its finalizer (a
// person removed it by hand) leaves a record naming a gone holder; the
// waiter is woken by the deletion and takes the key over.
func TestAHolderDeletedWithoutItsFinalizerHandsTheKeyToTheWaiter(t *testing.T) {
	f := start(t, setup{})
	ctx := context.Background()
	// Given a holds k and b waits for it
	f.aHoldsKAndBWaits(t)
	// When a person deletes a and strips its finalizer at once
	f.deleteWidgetAsync(t, "a")
	if w, err := f.widget(t, "a"); err == nil {
		w.Finalizers = nil
		if err := direct(t).Update(ctx, w); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			t.Fatal(err)
		}
	}
	// Then b takes k over within seconds, with a greater token
	f.waitForReason(t, "b", conditions.ReasonClaimed, wakeWithin)
	b, _ := f.widget(t, "b")
	if rec := f.record(t, "k"); !rec.Ours() || rec.Holder.UID != b.UID {
		t.Errorf("record of k = %+v, want b's", rec)
	}
}

// Promise 8: on the deletion path the inner reconciler gets the keys the
// object still holds (read uncached), and they are released, even when a
// person removed the middleware's finalizer by hand while another finalizer
// keeps the object and the object still holds k.
func TestTheDeletionPathWithoutOurFinalizerStillReportsAndReleasesHeldKeys(t *testing.T) {
	f := start(t, setup{})
	failing := f.failDeletionPassesOf("a")
	failing.Store(false)
	// Given a holds k, with another controller's finalizer as well
	f.createAndWait(t, "a", conditions.ReasonClaimed, "k")
	f.edit(t, "a", func(w *testcrd.Widget) { w.Finalizers = append(w.Finalizers, "example.com/other") })
	f.createAndWait(t, "b", conditions.ReasonParked, "k")
	// When a is deleted, its first deletion passes fail, and meanwhile a
	// person removes the middleware's finalizer
	failing.Store(true)
	a := f.deleteWidgetAsync(t, "a")
	eventually(t, 5*time.Second, func() (bool, string) {
		return len(deletionCalls(f, "a")) > 0, "no deletion pass of a"
	})
	f.edit(t, "a", func(w *testcrd.Widget) { w.Finalizers = []string{"example.com/other"} })
	failing.Store(false)
	n := len(deletionCalls(f, "a"))
	f.touch(t, "a")
	eventually(t, 5*time.Second, func() (bool, string) {
		return len(deletionCalls(f, "a")) > n, "no deletion pass of a after the finalizer was removed"
	})
	time.Sleep(time.Second)
	// Then the first deletion pass since told a it still holds k (later
	// passes, after the release, rightly hold nothing), and k went to b
	if s := deletionCalls(f, "a")[n]; len(s.Grants) != 1 || s.Grants[0].Key != "k" {
		t.Errorf("deletion pass of a while it holds k: %+v, want Grants [k]", s)
	}
	if rec := f.record(t, "k"); rec.Exists && rec.Holder.UID == a.UID {
		t.Errorf("record of k is still a's while a is being deleted and b waits: %+v; b: %+v", rec, f.claimed(t, "b"))
	}
}

// Promise 8: FencedClient works on the deletion path, with the grants the
// object still holds (docs/middleware.md "Deletion").
func TestFencedClientWorksOnTheDeletionPath(t *testing.T) {
	f := start(t, setup{})
	var mu sync.Mutex
	var errs []error
	f.inner.setHook(func(ctx context.Context, name string, c call) (reconcile.Result, error) {
		// A cleanup that writes only for the keys it still holds: the
		// deletion path may run more than once, and later passes hold none
		if !c.state.Deleting || len(c.state.Grants) == 0 {
			return reconcile.Result{}, nil
		}
		fc, err := claimmw.FencedClient(ctx)
		if err == nil {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "cleanup-" + name}}
			err = fc.Create(ctx, cm)
		}
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		return reconcile.Result{}, err
	})
	// Given a holds k
	f.createAndWait(t, "a", conditions.ReasonClaimed, "k")
	// When a is deleted
	f.deleteWidgetAsync(t, "a")
	// Then its deletion pass writes through a fenced client, and a is gone
	eventually(t, 10*time.Second, func() (bool, string) {
		_, err := f.widget(t, "a")
		mu.Lock()
		defer mu.Unlock()
		return apierrors.IsNotFound(err), fmt.Sprintf("a: %v; fenced writes of the deletion passes: %v", err, errs)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(errs) == 0 || errs[0] != nil {
		t.Errorf("fenced writes of the deletion passes: %v", errs)
	}
}

// watchCacheLag is an uncached reader for the middleware whose Lease
// listings at resourceVersion "0" (the API server's watch cache as it is,
// which may lag etcd: "any" version may be served) answer, once at holds a
// resourceVersion, as that cache did at that revision. The answer is the
// API server's own, read at that exact resourceVersion.
type watchCacheLag struct {
	at atomic.Value // string
}

func (l *watchCacheLag) reader(t *testing.T) client.Reader {
	t.Helper()
	return interceptor.NewClient(env.TestClient(t), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			at, _ := l.at.Load().(string)
			if _, isLease := list.(*coordinationv1.LeaseList); isLease && at != "" {
				if lo := (&client.ListOptions{}).ApplyOptions(opts); lo.Raw != nil && lo.Raw.ResourceVersion == "0" {
					opts = append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: at, ResourceVersionMatch: metav1.ResourceVersionMatchExact}})
				}
			}
			return c.List(ctx, list, opts...)
		},
	})
}

// leaseVersion returns the resourceVersion of key's Lease as the API server
// has it now: a revision at which a listing shows the record as it is.
func (f *fixture) leaseVersion(t *testing.T, key string) string {
	t.Helper()
	return f.leaseOf(t, key).ResourceVersion
}

func TestAKeyAnObjectReleasedBeforeItsDeletionIsNotGivenToItsDeletionPassWhileAnotherObjectActsForIt(t *testing.T) {
	t.Parallel()
	lag := &watchCacheLag{}
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithAPIReader(lag.reader(t))}})
	w := recordWindows(f, "k1")
	// Given alpha held k1 while bravo waited, and moved to k2: its pass
	// told to give k1 up succeeded, k1 was released, and bravo acts for it
	heldByAlpha := f.alphaGaveK1UpToBravo(t, w)
	// When alpha is deleted while the API server's watch cache still shows
	// the Leases as they were when alpha held k1
	lag.at.Store(heldByAlpha)
	f.deleteWidget(t, "alpha")
	// Then no deletion pass of alpha was given k1 (its cleanup drops what
	// k1 is used for) while bravo acts for it
	w.noOverlap(t)
}

// The wake-up of a holder removed without its finalizer must not depend on
// the keys its spec names at the end: a holder whose keys cannot be
// computed keeps the record of the key it held (renewed, without acting),
// and once it is gone without a deletion pass, nothing else changes that
// record. Its waiter must be woken by the deletion all the same, and take
// the key over, rather than wait for its parked requeue.
func TestAHolderWithUnknownKeysDeletedWithoutItsFinalizerHandsTheKeyItKeptToTheWaiter(t *testing.T) {
	f := start(t, setup{})
	ctx := context.Background()
	// Given alpha holds k and bravo waits for it
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	alpha, _ := f.widget(t, "alpha")
	// And alpha's spec gets a reference its keys function cannot resolve:
	// it keeps k's record without acting for it
	f.setKeys(t, "alpha", "k", failKeysFuncKey)
	f.waitForReason(t, "alpha", conditions.ReasonInvalidKey, wakeWithin)
	if rec := f.record(t, "k"); !rec.Exists || rec.Holder.UID != alpha.UID {
		t.Fatalf("record of k while alpha's keys are unknown: exists %t, holder %s; want alpha's", rec.Exists, rec.Holder)
	}
	kept := f.leaseUID(t, "k")
	// When a person strips alpha's finalizer and deletes it: no deletion
	// pass runs, and k's record is never released (bravo, woken by the
	// deletion, may already have taken the same Lease over)
	eventually(t, 5*time.Second, func() (bool, string) {
		w, err := f.widget(t, "alpha")
		if err != nil {
			return false, err.Error()
		}
		w.Finalizers = nil
		err = direct(t).Update(ctx, w)
		return err == nil, fmt.Sprintf("stripping alpha's finalizer: %v", err)
	})
	if err := direct(t).Delete(ctx, alpha); err != nil {
		t.Fatal(err)
	}
	f.waitGone(t, "alpha", 5*time.Second)
	if got := f.leaseUID(t, "k"); got != kept {
		t.Fatalf("k's Lease after alpha is gone: UID %q, want %q: the record alpha kept was released, not taken over", got, kept)
	}
	// Then bravo, woken by alpha's deletion, takes k over within seconds
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
}

// leaseUID returns the UID of key's Lease, "" when there is none.
func (f *fixture) leaseUID(t *testing.T, key string) types.UID {
	t.Helper()
	l := &coordinationv1.Lease{}
	err := env.APIReader.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: f.mw.Claimer().Config().NameFunc(key)}, l)
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return l.UID
}

// The deletion path's window ends when a deletion pass succeeds, and a
// deletion pass whose workloads are still going away says so the way
// docs/middleware.md (Deletion) tells it to: "stop or delete them in your
// deletion pass (return an error or a requeue until they are gone), as the
// window ends when that pass succeeds". Its keys stay held while its passes
// return a requeue, and go to the next holder after the pass that returns
// neither.
func TestADeletionPassThatReturnsARequeueKeepsItsKeysUntilItsWorkloadsAreGone(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given a holds k and b waits for it
	f.aHoldsKAndBWaits(t)
	// And a's deletion passes return a requeue while its workloads of k
	// are still going away
	gone := f.deletionPassesAskToRunAgain("a")
	// When a is deleted
	f.deleteWidgetAsync(t, "a")
	eventually(t, wakeWithin, func() (bool, string) {
		return len(deletionCalls(f, "a")) > 0, "no deletion pass of a"
	})
	// Then b does not get k while a's workloads of k still run, and once
	// they are gone, b gets k
	f.claimedOnlyOnceStopped(t, "b", 3*time.Second, func() { gone.Store(true) })
}

// A deletion pass that succeeded says Released (it acts for no key) before
// it releases what it was given; when that release fails and the object's
// status writes are refused from then on (an admission policy, missing
// RBAC), a process that would give it the record once more (one restarted
// since: the process that saw the release fail releases it untold) cannot
// say it acts for the record again first: the record goes untold, so the
// key does not stay held from its waiter, and the object not kept, for as
// long as the writes fail.
func TestARecordWhoseReleaseFailedAfterItsDeletionPassSucceededGoesWhileTheObjectsStatusWritesAreRefused(t *testing.T) {
	t.Parallel()
	f, stop := startIn(t, env.Namespace(t), setup{})
	// Given a holds k and b waits for it
	f.aHoldsKAndBWaits(t)
	// And a was deleted, its deletion pass given k succeeded and said
	// Released, and the release of k failed
	f.writes.failLeaseDeletes.Store(true)
	f.deleteWidgetAsync(t, "a")
	f.releaseFailedOnceItSaid(t, "a", func(c metav1.Condition) bool { return c.Reason == string(conditions.ReasonReleased) })
	// When the operator restarts, and every status write of a is refused
	first := f
	stop()
	f, _ = startIn(t, f.ns, setup{failStatusOf: "a"})
	// Then b gets k, and a goes
	f.waitForReason(t, "b", conditions.ReasonClaimed, wakeWithin)
	f.statusWritesWereRefused(t, "a")
	f.waitGone(t, "a", wakeWithin)
	// And a's deletion pass was given k once: the pass that succeeded
	given := func(f *fixture) int {
		return len(slices.DeleteFunc(deletionCalls(f, "a"), func(s claimmw.State) bool { return len(s.Grants) == 0 }))
	}
	if n, m := given(first), given(f); n != 1 || m != 0 {
		t.Errorf("a's deletion passes given k: %d before the restart and %d after it, want 1 and 0", n, m)
	}
}

// releaseFailedOnceItSaid waits until name's claim condition says what
// says accepts and a release was tried: the pass that knew the record goes
// succeeded, and (Lease deletes failing) its release failed.
func (f *fixture) releaseFailedOnceItSaid(t *testing.T, name string, says func(metav1.Condition) bool) {
	t.Helper()
	eventually(t, wakeWithin, func() (bool, string) {
		c := f.claimed(t, name)
		return says(c) && f.writes.snapshot()["delete Lease"] >= 1, fmt.Sprintf("%s: %+v; Lease deletes tried: %d", name, c, f.writes.snapshot()["delete Lease"])
	})
}

// statusWritesWereRefused fails t unless the fixture refused a status
// write, as releaseFailsOnceItSays has it refuse name's: else the test did
// not reach the failure it is about.
func (f *fixture) statusWritesWereRefused(t *testing.T, name string) {
	t.Helper()
	if f.writes.failedStatus.Load() == 0 {
		t.Fatalf("%s's status writes were never refused: the test did not reach the failure it is about", name)
	}
}

// A deletion pass given no record protects no key: an object that holds
// nothing goes once its pass returned no error, whatever Result it returned
// (a reconciler that always asks to run again, for a periodic resync, is
// not kept for ever).
func TestAnObjectThatHoldsNothingGoesThoughItsDeletionPassAsksToRunAgain(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given a holds k and b waits for it, holding nothing
	f.aHoldsKAndBWaits(t)
	// And every deletion pass asks to run again
	f.inner.setHook(func(_ context.Context, _ string, c call) (reconcile.Result, error) {
		if c.state.Deleting {
			return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, nil
		}
		return reconcile.Result{}, nil
	})
	// When b is deleted
	f.deleteWidgetAsync(t, "b")
	// Then it is gone
	f.waitGone(t, "b", 10*time.Second)
}

// TestADeletionPassWhoseCacheStillShowsItMayActSaysSoInTheAPIServerBeforeItActs:
// a deletion pass given records acts for their keys, so before it acts the API
// server must say the object may act: a waiter's check before it acts reads
// the object there. A cache that still shows the object's Claimed condition
// from before a told pass succeeded (and wrote that it acts for nothing) must
// not let the deletion pass skip that write.
func TestADeletionPassWhoseCacheStillShowsItMayActSaysSoInTheAPIServerBeforeItActs(t *testing.T) {
	t.Parallel()
	f := start(t, setup{workers: 2})
	w := recordWindows(f, "k")
	// Given alpha held k while bravo waited, and the cache's view of alpha
	// then is kept
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	claimedThen := f.widgetNow(t, "alpha")
	// And alpha's keys became unknown: it keeps k's record, its told pass
	// succeeded, and the API server says it acts for nothing
	f.setKeys(t, "alpha", "k", failKeysFuncKey)
	f.waitForReason(t, "alpha", conditions.ReasonInvalidKey, wakeWithin)
	// When alpha is deleted and its deletion pass reads, from a cache that
	// has not shown its writes since, the Claimed condition of then
	release := f.deleteSeenStale(t, "alpha", claimedThen)
	w.whenActs("alpha", func() {
		// And while that pass acts for k, a person deletes k's record,
		// which wakes bravo
		f.writes.staleWidget.Store((*testcrd.Widget)(nil))
		if err := f.deleteRecordOf(context.Background(), "k"); err != nil {
			t.Errorf("deleting alpha's record of k: %v", err)
			return
		}
		w.waitActed("bravo", 3*time.Second)
	})
	release()
	f.waitGone(t, "alpha", 10*time.Second)
	if !w.waitActed("bravo", 10*time.Second) {
		t.Fatalf("bravo never acted for k after alpha was gone: passes %q; bravo %+v", w.passes, f.claimed(t, "bravo"))
	}
	// Then bravo did not act for k while alpha's deletion pass did
	w.noOverlap(t)
	if !w.acted("alpha") {
		t.Fatalf("alpha's deletion pass was never given k: passes %q", w.passes)
	}
}

// A deletion pass of an object that may still act for a key (its condition
// says so) is inside its acting window even when the key's record was
// deleted from outside, so that it is given no record: while that pass asks
// to run again (its workloads of the key are still going away) and the
// object is not gone, no other object acts for the key.
func TestADeletionPassThatAsksToRunAgainKeepsAKeyWhoseRecordWasDeletedFromOutsideFromOthers(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given a holds k, with another controller's finalizer as well, and b
	// waits for it
	f.createKeptWidget(t, "a", "k")
	f.waitForReason(t, "a", conditions.ReasonClaimed, wakeWithin)
	f.createAndWait(t, "b", conditions.ReasonParked, "k")
	// And a's deletion passes ask to run again while its workloads of k are
	// still going away
	gone := f.deletionPassesAskToRunAgain("a")
	// When a is deleted, and once its deletion pass was given k, a person
	// deletes k's record
	f.deleteWidgetAsync(t, "a")
	f.waitForDeletionPassGiven(t, "a", "k")
	f.deleteLease(t, "k")
	// Then b does not get k while a's deletion passes ask to run again,
	// and once a's workloads are gone, b gets k
	f.claimedOnlyOnceStopped(t, "b", 3*time.Second, func() { gone.Store(true) })
}

// deletionPassesAskToRunAgain makes name's deletion passes ask to run again,
// as while its workloads are still going away, until the returned flag is
// set; every other pass succeeds.
func (f *fixture) deletionPassesAskToRunAgain(name string) *atomic.Bool {
	return f.passesAskToRunAgain(name, 200*time.Millisecond, func(s claimmw.State) bool { return s.Deleting })
}

// A deletion pass given no record decides from the condition whether the
// object may still act for a key: a cache that still shows a condition from
// before the object acted (Parked, from before the Claimed write its cache
// has not shown yet) must not let the finalizer come off while that pass
// asks to run again and the API server says the object may act, nor let a
// waiter act for the key meanwhile.
func TestADeletionPassWhoseCacheStillShowsItParkedKeepsTheFinalizerWhileItAsksToRunAgain(t *testing.T) {
	t.Parallel()
	f := start(t, setup{workers: 2})
	t.Cleanup(func() { f.writes.staleWidget.Store((*testcrd.Widget)(nil)) })
	// Given alpha waited for k while zulu held it, and the cache's view of
	// alpha then is kept
	f.createAndWait(t, "zulu", conditions.ReasonClaimed, "k")
	f.createAndWait(t, "alpha", conditions.ReasonParked, "k")
	parkedThen := f.widgetNow(t, "alpha")
	// And alpha then got k and acts for it, and bravo waits for k
	f.setKeys(t, "zulu")
	f.waitForReason(t, "alpha", conditions.ReasonClaimed, wakeWithin)
	f.createAndWait(t, "bravo", conditions.ReasonParked, "k")
	// And alpha's deletion passes ask to run again while its workloads of k
	// are still going away
	gone := f.deletionPassesAskToRunAgain("alpha")
	// When alpha is deleted, and its deletion pass reads, from a cache that
	// has not shown its Claimed write, the Parked condition of then; and a
	// person deletes k's record first, so that the pass is given no record
	release := f.deleteSeenStale(t, "alpha", parkedThen)
	f.deleteLease(t, "k")
	release()
	eventually(t, wakeWithin, func() (bool, string) {
		return len(deletionCalls(f, "alpha")) > 0, "no deletion pass of alpha"
	})
	// Then alpha is not gone, and bravo does not get k, while alpha's
	// deletion passes ask to run again
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(25 * time.Millisecond) {
		if _, err := f.widget(t, "alpha"); apierrors.IsNotFound(err) {
			t.Fatalf("alpha is gone while its deletion passes asked to run again and the API server said it may act for k: deletion passes %+v; bravo %+v", deletionCalls(f, "alpha"), f.claimed(t, "bravo"))
		}
		if c := f.claimed(t, "bravo"); c.Status == metav1.ConditionTrue {
			t.Fatalf("bravo is Claimed while alpha's deletion passes ask to run again: %+v; alpha %+v", c, f.claimed(t, "alpha"))
		}
	}
	// When alpha's workloads are gone, alpha goes and bravo gets k
	f.writes.staleWidget.Store((*testcrd.Widget)(nil))
	gone.Store(true)
	f.waitGone(t, "alpha", 10*time.Second)
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
}

// The deletion path's listings: no deletion pass waits for the API server's
// watch cache to catch up with etcd, and no record of the object is left
// behind for it.

// leaseLists notes every List of Leases by label selector an operator
// process sends: the listings of one holder's records.
type leaseLists struct {
	mu    sync.Mutex
	lists []leaseList
	// deletes are when the process sent each Delete of a Lease.
	deletes []time.Time
}

type leaseList struct {
	at              time.Time
	selector        string
	resourceVersion string
}

// config returns env.Config with leaseLists watching its requests.
func (l *leaseLists) config() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			q := req.URL.Query()
			if req.Method == http.MethodDelete && strings.Contains(req.URL.Path, "/leases/") {
				l.mu.Lock()
				l.deletes = append(l.deletes, time.Now())
				l.mu.Unlock()
			}
			if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/leases") && q.Get("watch") != "true" && q.Get("labelSelector") != "" {
				l.mu.Lock()
				l.lists = append(l.lists, leaseList{at: time.Now(), selector: q.Get("labelSelector"), resourceVersion: q.Get("resourceVersion")})
				l.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	}
	return cfg
}

// consistentSince returns the listings sent since start that named uid in
// their selector and asked for no resourceVersion: consistent reads, which
// wait for the watch cache to catch up with etcd.
func (l *leaseLists) consistentSince(start time.Time, uid string) []leaseList {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []leaseList
	for _, x := range l.lists {
		if !x.at.Before(start) && strings.Contains(x.selector, uid) && x.resourceVersion == "" {
			out = append(out, x)
		}
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// beforeDelete returns the listings sent at or after start and before the
// first Delete of a Lease sent after start, and whether one was sent.
func (l *leaseLists) beforeDelete(start time.Time) ([]leaseList, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.IndexFunc(l.deletes, func(at time.Time) bool { return !at.Before(start) })
	if i < 0 {
		return nil, false
	}
	var out []leaseList
	for _, x := range l.lists {
		if !x.at.Before(start) && x.at.Before(l.deletes[i]) {
			out = append(out, x)
		}
	}
	return out, true
}

func TestDeletingAHolderReleasesItsKeyBeforeAnyListOfItsLeasesAndWithoutAConsistentOne(t *testing.T) {
	t.Parallel()
	lists := &leaseLists{}
	f := start(t, setup{config: lists.config()})
	// Given alpha holds k and bravo waits for it
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	alpha := f.widgetNow(t, "alpha")
	// When alpha is deleted
	start := time.Now()
	if err := direct(t).Delete(context.Background(), alpha); err != nil {
		t.Fatal(err)
	}
	// Then bravo gets k and alpha is gone
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
	eventually(t, wakeWithin, func() (bool, string) {
		_, err := f.widget(t, "alpha")
		return err != nil, "alpha is still there"
	})
	// and alpha's record of k was deleted before any List of alpha's
	// Leases was sent: its first deletion pass reads its records from the
	// manager's cache and by name (a List filters every Lease of the
	// namespace, tens of milliseconds at ten thousand, while bravo waits)
	got, deleted := lists.beforeDelete(start)
	if !deleted {
		t.Fatal("no Lease was deleted after alpha's deletion")
	}
	for _, l := range got {
		// Other objects' passes may list their own (bravo's first pass
		// does while its cache shows no condition of it).
		if strings.Contains(l.selector, string(alpha.UID)) {
			t.Errorf("a List of alpha's Leases was sent %s after its deletion, before its record was deleted: selector %q, resourceVersion %q",
				l.at.Sub(start), l.selector, l.resourceVersion)
		}
	}
	// and no deletion pass of alpha sent a consistent List of its records
	// (each waits up to 100 ms for the watch cache after a write of
	// another resource)
	if got := lists.consistentSince(start, string(alpha.UID)); len(got) > 0 {
		t.Errorf("alpha's deletion passes sent %d consistent Lists of its records: %+v", len(got), got)
	}
}

func TestTheDeletionPathFindsRecordsWrittenForTheObjectJustBeforeItsDeletion(t *testing.T) {
	t.Parallel()
	f := start(t, setup{})
	// Given alpha holds k and bravo waits for it
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	// and another operator process wrote a record of a key neither names for
	// each of them, just before both are deleted (the watch cache may not
	// have it yet when their first deletion passes list)
	other, err := claim.New(env.APIReader, direct(t), f.mw.Claimer().Config(), claim.WithBackend(lease.Backend))
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]string{"alpha": "extra-a", "bravo": "extra-b"} {
		w := f.widgetNow(t, name)
		h, err := other.HolderOf(w)
		if err != nil {
			t.Fatal(err)
		}
		if _, o, err := other.Acquire(context.Background(), key, h); err != nil || !o.Granted() {
			t.Fatalf("writing %s's record of %s: %+v, %v", name, key, o, err)
		}
	}
	// When both are deleted
	for _, name := range []string{"alpha", "bravo"} {
		w := f.widgetNow(t, name)
		if err := direct(t).Delete(context.Background(), w); err != nil {
			t.Fatal(err)
		}
	}
	// Then both are gone, each record was told to a pass of its holder
	// (a deletion pass, or one that gave it up if it came before the
	// deletion), and none outlived them
	eventually(t, wakeWithin, func() (bool, string) {
		_, aerr := f.widget(t, "alpha")
		_, berr := f.widget(t, "bravo")
		return aerr != nil && berr != nil, "alpha or bravo is still there"
	})
	for name, key := range map[string]string{"alpha": "extra-a", "bravo": "extra-b"} {
		if !toldToStop(f.inner.callsOf(name), key) {
			t.Errorf("no pass of %s was told to stop using %s", name, key)
		}
	}
	for _, key := range []string{"k", "extra-a", "extra-b"} {
		if f.leaseExists(t, key) {
			t.Errorf("the record of %s outlived its holder", key)
		}
	}
}

// toldToStop reports whether one of calls was told to stop using key: a
// deletion pass given it, or a pass giving it up.
func toldToStop(calls []call, key string) bool {
	for _, c := range calls {
		told := c.state.Releasing
		if c.state.Deleting {
			told = append(told, c.state.Grants...)
		}
		for _, g := range told {
			if g.Key == key {
				return true
			}
		}
	}
	return false
}

func TestTheDeletionPathTellsTheInnerReconcilerWhichKeysTheObjectStillHolds(t *testing.T) {
	f := start(t, setup{opts: []claimmw.Option{claimmw.WhileParked(claimmw.RunInnerWhileParked)}})
	ctx := context.Background()
	// Given alpha holds k and bravo is parked on it
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	var fencedErr error
	f.inner.setHook(func(ctx context.Context, name string, c call) (reconcile.Result, error) {
		if name == "alpha" && c.state.Deleting && len(c.state.Grants) > 0 {
			_, fencedErr = claimmw.FencedClient(ctx)
		}
		return reconcile.Result{}, nil
	})
	token := f.tokenOf(t, "k")
	// When the parked bravo is deleted
	f.deleteWidget(t, "bravo")
	// Then its inner deletion pass sees Deleting and no grant: it must not
	// clean up k, which alpha holds
	last := f.lastCall(t, "bravo", func(c call) bool { return c.state.Deleting })
	if len(last.state.Grants) != 0 || last.state.Granted {
		t.Errorf("bravo's deletion pass: %+v, want Deleting without grants", last.state)
	}
	// When the holder alpha is deleted
	f.deleteWidget(t, "alpha")
	// Then its (first) deletion pass holds k with its token, and can build a
	// fenced client; a later pass, after the release, rightly holds none
	last = f.firstCall(t, "alpha", func(c call) bool { return c.state.Deleting })
	if len(last.state.Grants) != 1 || last.state.Grants[0].Key != "k" || last.state.Grants[0].Token != token {
		t.Errorf("alpha's deletion pass grants %+v, want k with token %s", last.state.Grants, token)
	}
	if fencedErr != nil {
		t.Errorf("FencedClient on the deletion path: %v", fencedErr)
	}
	eventually(t, wakeWithin, func() (bool, string) { return !f.leaseExists(t, "k"), "k still held after alpha's deletion" })
	_ = ctx
}

// A holder that acted for its key, deleted while its operator was down,
// is given that key in its deletion pass after the restart, although
// another object that names the key now and never held it is Stopping
// (for a key it held before its spec changed): its deletion pass is the
// cleanup of what it did for the key, and the record is no record it
// "holds without ever having acted for it".
func TestAHolderThatActedIsGivenItsKeyInItsDeletionPassAfterARestartWhileAnObjectThatNeverHeldTheKeyIsStopping(t *testing.T) {
	t.Parallel()
	ns := env.Namespace(t)
	// Given alpha holds k and acts for it, and charlie, which held j and
	// acted for it, names k instead and is Stopping
	f, stop, again := alphaHoldsKWhileCharlieStopsForJ(t, ns)
	// When the operator stops, alpha is deleted meanwhile (its finalizer
	// keeps it), and the operator starts again
	stop()
	f.deleteWidgetAsync(t, "alpha")
	f2 := again()
	// Then alpha's deletion pass is given k, before k's record is released
	eventually(t, wakeWithin, func() (bool, string) {
		_, err := f2.widget(t, "alpha")
		return apierrors.IsNotFound(err) || slices.ContainsFunc(deletionCalls(f2, "alpha"), func(s claimmw.State) bool { return grants(s, "k") }),
			fmt.Sprintf("alpha: %v; its deletion passes: %+v", err, deletionCalls(f2, "alpha"))
	})
	if !slices.ContainsFunc(deletionCalls(f2, "alpha"), func(s claimmw.State) bool { return grants(s, "k") }) {
		t.Errorf("alpha acted for k, yet no deletion pass of it was given k (its cleanup of k never ran); its deletion passes: %+v; record of k exists: %t; charlie: %+v",
			deletionCalls(f2, "alpha"), f2.leaseExists(t, "k"), f2.claimed(t, "charlie"))
	}
}

// A key the object stopped naming just before its deletion, whose record the
// manager's Lease cache has not shown yet when the first deletion pass lists
// (a cache that lags; the record was written long before), and whose record a
// person deletes while that pass runs: the waiter must not act for the key
// before a pass of the object told to stop using it succeeded, while the
// object is still there (docs/middleware.md: a key is never in use by two
// objects; an object acts for a key from its first granted pass until a pass
// told to stop returned success, or until it is gone).
func TestAWaiterDoesNotActForAKeyTheDeletedObjectStoppedNamingBeforeTheObjectWasToldToStopIt(t *testing.T) {
	t.Parallel()
	f := start(t, setup{workers: 2})
	// The revision before alpha's records were written.
	var before coordinationv1.LeaseList
	if err := env.APIReader.List(context.Background(), &before, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	waiterActsOnlyAfterTheDeletedObjectWasTold(t, f, true, func() {
		// the manager's Lease cache lags (it has not shown alpha's records yet)
		f.writes.leaseListsAt.Store(before.ResourceVersion)
		t.Cleanup(func() { f.writes.leaseListsAt.Store("") })
	})
}

// The same with a Lease cache restricted by claim.Config.Labels
// (lease.CacheByObject) and no lag: a person removed those labels from b's
// record (its holder label is still there), so the cache does not hold it.
func TestAWaiterDoesNotActForAKeyTheDeletedObjectStoppedNamingBeforeTheObjectWasToldToStopItWhenItsRecordLostTheClaimLabels(t *testing.T) {
	t.Parallel()
	s := labelledSetup()
	s.workers = 2
	f := start(t, s)
	waiterActsOnlyAfterTheDeletedObjectWasTold(t, f, true, func() { f.dropClaimLabel(t, "b") })
}

// dropClaimLabel removes the claim label "team" (labelledSetup's) from
// key's record, as a person might, and returns once the manager's Lease
// cache, restricted by that label, no longer shows the record.
func (f *fixture) dropClaimLabel(t *testing.T, key string) {
	t.Helper()
	l := f.leaseOf(t, key)
	delete(l.Labels, "team")
	if err := direct(t).Update(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, func() (bool, string) {
		err := f.client.Get(context.Background(), client.ObjectKeyFromObject(l), &coordinationv1.Lease{})
		return apierrors.IsNotFound(err), fmt.Sprintf("the manager's cache still shows %s's record: %v", key, err)
	})
}

// waiterActsOnlyAfterTheDeletedObjectWasTold: alpha holds a and b, bravo
// waits for b; alpha stops naming b (when stopNamingB) and is deleted
// before its next pass,
// after hide made b's record invisible to the manager's Lease cache; a
// person deletes b's record while alpha's first deletion pass runs.
func waiterActsOnlyAfterTheDeletedObjectWasTold(t *testing.T, f *fixture, stopNamingB bool, hide func()) {
	// Given alpha holds a and b, and bravo waits for b
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "a", "b")
	f.createAndWait(t, "bravo", conditions.ReasonParked, "b")

	var (
		mu         sync.Mutex
		alphaTold  bool // a pass of alpha told to stop using b succeeded
		erased     bool
		violations []string
	)
	f.inner.setHook(func(ctx context.Context, name string, c call) (reconcile.Result, error) {
		switch name {
		case "alpha":
			told := namesKey(c.state.Releasing, "b") || c.state.Deleting && namesKey(c.state.Grants, "b")
			mu.Lock()
			first := c.state.Deleting && !erased
			later := c.state.Deleting && erased
			if first {
				erased = true
			}
			mu.Unlock()
			if later {
				// Alpha's later deletion passes take their time (its
				// workloads stop slowly): bravo's passes, on the other
				// worker, run meanwhile (bravo is edited: a requeue or any
				// event of it would do).
				f.touch(t, "bravo")
				time.Sleep(1500 * time.Millisecond)
			}
			if first {
				// A person deletes b's record while alpha's first deletion
				// pass runs.
				f.deleteLease(t, "b")

			}
			if told {
				mu.Lock()
				alphaTold = true
				mu.Unlock()
			}
		case "bravo":
			if c.state.Granted && namesKey(c.state.Grants, "b") {
				_, err := f.widget(t, "alpha")
				mu.Lock()
				if err == nil && !alphaTold {
					violations = append(violations, fmt.Sprintf("bravo acts for b (granted pass %+v) while alpha is still there and no pass of alpha told to stop using b has succeeded (alpha's passes: %s)", c.state, describe(f.inner.callsOf("alpha"))))
				}
				mu.Unlock()
			}
		}
		return reconcile.Result{}, nil
	})

	// When alpha stops naming b and is deleted before its next pass, and the
	// manager's Lease cache does not show b's record
	release := f.holdBackPasses("alpha")
	if stopNamingB {
		f.setKeys(t, "alpha", "a")
	}
	hide()
	f.deleteWidgetAsync(t, "alpha")
	release()

	// Then alpha goes, and bravo acts for b only after alpha was told to stop
	// using b (or was gone)
	f.waitGone(t, "alpha", 20*time.Second)
	// (A record the cache does not hold wakes nobody when it goes: bravo is
	// asked to run once alpha is gone. This does not decide the check below,
	// which is made in bravo's passes themselves.)
	f.touch(t, "bravo")
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, 20*time.Second)
	mu.Lock()
	defer mu.Unlock()
	for _, v := range violations {
		t.Error(v)
	}
}

func describe(calls []call) string {
	var out []string
	for _, c := range calls {
		out = append(out, fmt.Sprintf("{Deleting:%v Granted:%v Grants:%v Releasing:%v}", c.state.Deleting, c.state.Granted, keysOfGrants(c.state.Grants), keysOfGrants(c.state.Releasing)))
	}
	return fmt.Sprint(out)
}

func keysOfGrants(gs []claimmw.Grant) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Key)
	}
	return out
}

// calledFrom reports whether fn is on the caller's stack.
func calledFrom(fn string) bool {
	pcs := make([]uintptr, 64)
	n := runtime.Callers(2, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		fr, more := frames.Next()
		if strings.HasSuffix(fr.Function, fn) {
			return true
		}
		if !more {
			return false
		}
	}
}

// Alpha holds a and b and keeps naming both (its condition says Claimed for
// exactly a and b, so its first deletion pass lists from the manager's
// cache). b's record lost the claim labels, so a Lease cache restricted by
// them does not hold it. The keys function (one that reads more than the
// spec, e.g. a ConfigMap) fails once, transiently, while that first
// deletion pass reads each named key by name: were the failure ignored
// there, b's record would be read neither from the cache nor by name, while
// the checks before and after (cacheListsEnough, on the cached and the uncached
// object) computed the keys fine. A person deletes b's record while that
// pass runs. bravo, waiting for b, must not act for b before a pass of alpha
// told to stop using b succeeded, while alpha is still there.
func TestAWaiterDoesNotActForANamedKeyWhenTheKeysFunctionFailsOnceWhileTheDeletionPassReadsKeysByName(t *testing.T) {
	t.Parallel()
	var armed atomic.Bool
	keys := func(ctx context.Context, obj client.Object) ([]string, error) {
		w := obj.(*testcrd.Widget)
		if w.Name == "alpha" && w.DeletionTimestamp != nil && calledFrom("claimmw.(*Middleware).deletionHoldings") && armed.CompareAndSwap(true, false) {
			return nil, errors.New("reading the storage ConfigMap: etcdserver: request timed out")
		}
		return specKeys(ctx, obj)
	}
	s := labelledSetup()
	s.workers = 2
	s.opts = []claimmw.Option{claimmw.WithKeys(keys)}
	f := start(t, s)
	waiterActsOnlyAfterTheDeletedObjectWasTold(t, f, false, func() {
		// b's record loses the claim labels, and the manager's cache
		// drops it; the keys function fails once in alpha's deletion pass
		f.dropClaimLabel(t, "b")
		armed.Store(true)
	})
	if armed.Load() {
		t.Errorf("the keys function never failed in alpha's deletion pass (it was not called from deletionHoldings)")
	}
}
