package claimmw_test

// Wake-ups (docs/middleware.md "Wake-ups"): a record event or a deletion
// wakes the objects it blocks, under any spelling of their keys, and no
// object of another namespace or claim set.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// passCounter is an inner reconciler that counts its passes per namespace.
type passCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (p *passCounter) Reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = map[string]int{}
	}
	p.n[req.Namespace]++
	return reconcile.Result{}, nil
}

func (p *passCounter) in(ns string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n[ns]
}

// logLines is a logger that keeps every line it is given.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{})
}

func (l *logLines) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func (l *logLines) contain(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// tenantRig is one middleware whose manager caches Leases in every
// namespace (the record cache not restricted to the claim namespace), with
// records in a claim namespace of their own and tenants in two others.
type tenantRig struct {
	claims, a, b string
	passes       *passCounter
	logs         *logLines
	mw           *claimmw.Middleware
}

func startTenantRig(t *testing.T, restrictLeases bool, funcs *interceptor.Funcs, extra ...claimmw.Option) *tenantRig {
	t.Helper()
	r := &tenantRig{claims: env.Namespace(t), a: env.Namespace(t), b: env.Namespace(t), passes: &passCounter{}, logs: &logLines{}}
	opts := env.ManagerOptions()
	opts.Logger = r.logs.logger()
	if funcs != nil {
		opts.NewClient = intercepted(*funcs)
	}
	// Widgets are cached in the rig's namespaces only: other tests leave
	// Widgets behind (envtest removes no namespace) naming the same keys,
	// and a rig reconciling them would race them for its keys. The Lease
	// cache is what the rig leaves unrestricted.
	byObject := map[client.Object]cache.ByObject{&testcrd.Widget{}: {Namespaces: map[string]cache.Config{r.claims: {}, r.a: {}, r.b: {}}}}
	if restrictLeases {
		byObject[&coordinationv1.Lease{}] = lease.CacheByObject(r.claims, nil)
	}
	opts.Cache = cache.Options{ByObject: byObject}
	mgr, err := ctrl.NewManager(rest.CopyConfig(env.Config), opts)
	if err != nil {
		t.Fatal(err)
	}
	r.mw, err = claimmw.Wrap(r.passes, append(widgetMiddleware(mgr, claim.Config{Namespace: r.claims}, specKeys), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.mw.SetupWithManager(mgr, ctrl.NewControllerManagedBy(mgr).For(&testcrd.Widget{})); err != nil {
		t.Fatal(err)
	}
	envtest.RunManager(t, mgr)
	return r
}

func (r *tenantRig) claimedIn(t *testing.T, ns, name string) metav1.Condition {
	t.Helper()
	w := &testcrd.Widget{}
	if err := env.APIReader.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, w); err != nil {
		return metav1.Condition{}
	}
	for _, c := range w.Status.Conditions {
		if c.Type == string(conditions.Claimed) {
			return c
		}
	}
	return metav1.Condition{}
}

func (r *tenantRig) waitReason(t *testing.T, ns, name string, reason conditions.Reason) {
	t.Helper()
	eventually(t, 20*time.Second, func() (bool, string) {
		c := r.claimedIn(t, ns, name)
		return c.Reason == string(reason), fmt.Sprintf("%s/%s: %s %s", ns, name, c.Reason, c.Message)
	})
}

// settle waits until no pass has run in ns for quiet.
func (r *tenantRig) settle(t *testing.T, ns string, quiet time.Duration) {
	t.Helper()
	last, since := r.passes.in(ns), time.Now()
	eventually(t, time.Minute, func() (bool, string) {
		if n := r.passes.in(ns); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= quiet, fmt.Sprintf("passes in %s keep running (%d)", ns, last)
	})
}

// quietPasses waits until no pass has run in namespace b for 2 s and
// returns how many ran there so far.
func (r *tenantRig) quietPasses(t *testing.T) int {
	t.Helper()
	r.settle(t, r.b, 2*time.Second)
	return r.passes.in(r.b)
}

// victimHolds creates Widget victim in namespace b naming victim-key, waits
// until it holds the key, and returns quietPasses.
func (r *tenantRig) victimHolds(t *testing.T) int {
	t.Helper()
	createIn(t, r.b, "victim", "victim-key")
	r.waitReason(t, r.b, "victim", conditions.ReasonClaimed)
	return r.quietPasses(t)
}

// victimRecord reads the record of victim-key, uncached.
func (r *tenantRig) victimRecord(t *testing.T) coordinationv1.Lease {
	t.Helper()
	var rec coordinationv1.Lease
	name := r.mw.Claimer().Config().NameFunc("victim-key")
	if err := env.APIReader.Get(context.Background(), client.ObjectKey{Namespace: r.claims, Name: name}, &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// createAndUpdate creates l and then updates it writes times, with a holder
// identity of writer-0, writer-1, ... each time.
func createAndUpdate(t *testing.T, l *coordinationv1.Lease, writes int, writer string) {
	t.Helper()
	ctx, dc := context.Background(), direct(t)
	if err := dc.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	for i := range writes {
		l.Spec.HolderIdentity = ptr.To(fmt.Sprintf("%s-%d", writer, i))
		if err := dc.Update(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
}

// createIn creates Widget ns/name naming keys, through a client of its own.
func createIn(t *testing.T, ns, name string, keys ...string) *testcrd.Widget {
	t.Helper()
	w := &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: testcrd.WidgetSpec{Keys: keys}}
	if err := direct(t).Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestDeletingANonHolderWakesNoObjectInAnotherNamespace is the bench row
// "passes caused in other namespaces by N create/delete cycles of a
// non-holder": a tenant that creates and deletes, again and again, an
// object naming other tenants' held keys holds nothing, so no record names
// it and its deletion wakes nobody. It used to wake every object naming its
// keys, in every namespace: three cycles ran 27-29 passes of 8 holders.
func TestDeletingANonHolderWakesNoObjectInAnotherNamespace(t *testing.T) {
	const holders, cycles = 4, 3
	r := startTenantRig(t, false, nil)
	ctx := context.Background()
	dc := direct(t)
	// Given holders in namespace b, each holding a key
	keys := make([]string, holders)
	for i := range keys {
		keys[i] = fmt.Sprintf("victim-key-%d", i)
		createIn(t, r.b, fmt.Sprintf("holder-%d", i), keys[i])
	}
	for i := range keys {
		r.waitReason(t, r.b, fmt.Sprintf("holder-%d", i), conditions.ReasonClaimed)
	}
	before := r.quietPasses(t)
	// When a tenant in namespace a creates and deletes, N times, an object naming all their keys
	for c := range cycles {
		name := fmt.Sprintf("churn-%d", c)
		w := createIn(t, r.a, name, keys...)
		r.waitReason(t, r.a, name, conditions.ReasonParked)
		if err := dc.Delete(ctx, w); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, func() (bool, string) {
			err := env.APIReader.Get(ctx, client.ObjectKeyFromObject(w), &testcrd.Widget{})
			return err != nil, fmt.Sprintf("%s still exists", name)
		})
	}
	// Then no holder in namespace b ran a pass
	if got := r.quietPasses(t) - before; got != 0 {
		t.Errorf("passes caused in another namespace by %d create/delete cycles of a non-holder = %d, want 0", cycles, got)
	}
	// And the claims are untouched
	for i := range keys {
		if c := r.claimedIn(t, r.b, fmt.Sprintf("holder-%d", i)); c.Reason != string(conditions.ReasonClaimed) {
			t.Errorf("holder-%d: %s %s", i, c.Reason, c.Message)
		}
	}
}

// TestLeasesOutsideTheClaimNamespaceWakeNobody: with a Lease cache not
// restricted to the claim namespace, a tenant's own Lease writes (leader
// election needs it to write Leases) whose annotations name a claim key and
// a holder must not wake that holder: the record handler ignores records
// outside the claim namespace.
func TestLeasesOutsideTheClaimNamespaceWakeNobody(t *testing.T) {
	const writes = 10
	r := startTenantRig(t, false, nil)
	// Given a victim in namespace b holding a key
	before := r.victimHolds(t)
	// When a tenant writes a Lease in its own namespace, again and again, whose annotations copy the victim's record
	rec := r.victimRecord(t)
	forged := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: r.a, Name: rec.Name, Annotations: rec.Annotations}}
	createAndUpdate(t, forged, writes, "leader")
	if err := direct(t).Delete(context.Background(), forged); err != nil {
		t.Fatal(err)
	}
	// Then the victim ran no pass
	if got := r.quietPasses(t) - before; got != 0 {
		t.Errorf("%d writes of a Lease outside the claim namespace caused %d passes of the holder it names, want 0", writes+2, got)
	}
}

// TestSetupWarnsWhenTheRecordCacheIsNotRestricted: SetupWithManager says so
// in the manager's log when the Lease cache serves namespaces other than the
// claim namespace, and is silent when it is restricted to it.
func TestSetupWarnsWhenTheRecordCacheIsNotRestricted(t *testing.T) {
	wide := startTenantRig(t, false, nil)
	if !wide.logs.contain(claimmw.RecordCacheNotRestricted) {
		t.Errorf("a cluster-wide Lease cache was not warned about; log:\n%s", wide.logs.all())
	}
	narrow := startTenantRig(t, true, nil)
	if narrow.logs.contain(claimmw.RecordCacheNotRestricted) {
		t.Errorf("a Lease cache restricted to the claim namespace was warned about")
	}
}

// TestRecordsOfAnotherClaimSetWakeOnlyWhatTheyBlock: a record in the claim
// namespace written by another claim set (another middleware's
// configuration) wakes only the objects whose key's record it sits at, never
// the key or the holder its annotations name.
func TestRecordsOfAnotherClaimSetWakeOnlyWhatTheyBlock(t *testing.T) {
	const writes = 10
	r := startTenantRig(t, true, nil)
	// Given a victim in namespace b holding a key
	before := r.victimHolds(t)
	// When another claim set writes, again and again, a record under another name whose annotations copy the victim's
	ann := map[string]string{}
	maps.Copy(ann, r.victimRecord(t).Annotations)
	ann[r.mw.Claimer().Config().Annotations.Set] = "another-set"
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: r.claims, Name: "another-set-record", Annotations: ann}}
	createAndUpdate(t, other, writes, "writer")
	// Then the victim ran no pass
	if got := r.quietPasses(t) - before; got != 0 {
		t.Errorf("%d writes of another claim set's record caused %d passes of the holder it names, want 0", writes+1, got)
	}
}

// TestDeletingANonHolderWakesNoYielderInAnotherNamespaceUnderFairness: with
// WithFairness, a deleted object wakes the objects that yield a free key to
// it. A tenant's short-lived objects naming a key are younger than every
// object that yields the key to an older sibling, so nobody yields to them:
// creating and deleting them again and again must cost an object of another
// tenant, yielding to someone else, no pass. The inner reconciler runs in
// every pass here (RunInnerWhileParked), so that each pass is counted.
func TestDeletingANonHolderWakesNoYielderInAnotherNamespaceUnderFairness(t *testing.T) {
	const cycles = 3
	// No record is ever created (the older object must not take k when a
	// pass of it gets that far), and every write of the older object fails.
	funcs := refuseWritesOf("stuck")
	funcs.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*coordinationv1.Lease); ok {
			return apierrors.NewForbidden(coordinationv1.Resource("leases"), obj.GetName(), errors.New("injected: no record may be created"))
		}
		return c.Create(ctx, obj, opts...)
	}
	r := startTenantRig(t, true, funcs, claimmw.WithFairness(), claimmw.WithFairnessGrace(10*time.Minute), claimmw.WhileParked(claimmw.RunInnerWhileParked))
	ctx := context.Background()
	dc := direct(t)
	// Given an older object in namespace a that never gets a condition, and
	// a younger one in namespace b that yields the free key k to it. The rig
	// watches Widgets in every namespace, and other tests leave Widgets
	// naming "k" behind (envtest removes no namespace): the key is this
	// test's own.
	const k = "yielded-key"
	createIn(t, r.a, "stuck", k)
	time.Sleep(1100 * time.Millisecond) // creation times have a one-second resolution
	createIn(t, r.b, "victim", k)
	r.waitReason(t, r.b, "victim", conditions.ReasonNotFirst)
	before := r.quietPasses(t)
	// When a tenant in namespace a creates and deletes an object naming k, again and again
	for i := range cycles {
		name := fmt.Sprintf("noise-%d", i)
		w := createIn(t, r.a, name, k)
		r.waitReason(t, r.a, name, conditions.ReasonNotFirst)
		if err := dc.Delete(ctx, w); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, func() (bool, string) {
			err := dc.Get(ctx, client.ObjectKeyFromObject(w), &testcrd.Widget{})
			return apierrors.IsNotFound(err), fmt.Sprintf("%s still there: %v", name, err)
		})
	}
	// Then the object in namespace b ran no pass
	if n := r.quietPasses(t) - before; n != 0 {
		t.Errorf("%d create/delete cycles of a non-holder in namespace a ran %d passes in namespace b, want 0", cycles, n)
	}
}

// Keys are NFC-normalized, so "café" (NFC) and "cafe"+U+0301 (NFD) are one
// key, on the wake-up path too: the object parked on the NFD spelling is
// woken when the NFC holder lets go (the key index and the record agree on
// the normalized key).
func TestTheNFDSpellingOfAKeyIsWokenWhenItsNFCHolderGoes(t *testing.T) {
	f := start(t, setup{})
	// Given a holds "café" and b, naming the NFD spelling, is parked on it
	f.createAndWait(t, "a", conditions.ReasonClaimed, "caf\u00e9")
	f.createAndWait(t, "b", conditions.ReasonParked, "cafe\u0301")
	// When a is deleted
	f.deleteWidgetAsync(t, "a")
	// Then b is woken and takes the key (no resync: requeue is an hour)
	f.waitForReason(t, "b", conditions.ReasonClaimed, wakeWithin)
}

// TestWhenAKeyIsFreedTheFirstWaiterTakesItBeforeTheOthersAreWoken: the
// release of a key wakes the first of the objects waiting for it (by
// creation time, then name) alone; the others are woken once its pass
// ended, so they do not race it for the key nor hold up its grant.
func TestWhenAKeyIsFreedTheFirstWaiterTakesItBeforeTheOthersAreWoken(t *testing.T) {
	// Given h holds k and w1, w2, w3 wait for it, with four workers, and
	// the others held back behind a freed key's first waiter for up to a
	// minute (a loaded machine may take longer than a second for w1's pass)
	f := start(t, setup{workers: 4, opts: []claimmw.Option{claimmw.WithHerdWaitForTest(time.Minute)}})
	f.createAndWait(t, "h", conditions.ReasonClaimed, "k")
	for _, w := range []string{"w1", "w2", "w3"} {
		f.createAndWait(t, w, conditions.ReasonParked, "k")
	}
	// And the passes their own writes caused have run
	time.Sleep(time.Second)
	// And w1's Create of the key's record answered only after 300 ms
	var mu sync.Mutex
	var creators []string
	f.writes.beforeLeaseCreate.Store(func(l *coordinationv1.Lease) {
		name := l.Annotations[backends.DefaultHolderNameAnnotation]
		mu.Lock()
		creators = append(creators, name)
		mu.Unlock()
		if name == "w1" {
			time.Sleep(300 * time.Millisecond)
		}
	})
	// When h is deleted and releases k
	if err := direct(t).Delete(context.Background(), f.widgetNow(t, "h")); err != nil {
		t.Fatal(err)
	}
	// Then w1 is granted k, and no other waiter tried to create its record
	f.waitForReason(t, "w1", conditions.ReasonClaimed, 10*time.Second)
	for _, w := range []string{"w2", "w3"} {
		f.waitForReason(t, w, conditions.ReasonParked, 10*time.Second)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(creators, []string{"w1"}) {
		t.Errorf("Lease creates after the release came from %q, want from w1 alone", creators)
	}
}

// TestWhenTheFirstWaiterCannotTakeAFreedKeyTheNextIsGrantedItWithoutWaiting:
// the first waiter woken alone for a freed key may not take it (it waits
// for a smaller key first): the next waiter is woken when its pass ended,
// not after a requeue.
func TestWhenTheFirstWaiterCannotTakeAFreedKeyTheNextIsGrantedItWithoutWaiting(t *testing.T) {
	// Given h holds k, g holds a, w1 waits for a (it names a and k), and w2
	// waits for k; requeues an hour apart, and the others held back behind
	// a freed key's first waiter for an hour at most
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithHerdWaitForTest(time.Hour)}})
	f.createAndWait(t, "h", conditions.ReasonClaimed, "k")
	f.createAndWait(t, "g", conditions.ReasonClaimed, "a")
	f.createAndWait(t, "w1", conditions.ReasonParked, "a", "k")
	f.createAndWait(t, "w2", conditions.ReasonParked, "k")
	// When h is deleted and releases k
	if err := direct(t).Delete(context.Background(), f.widgetNow(t, "h")); err != nil {
		t.Fatal(err)
	}
	// Then w2 is granted k, and w1 still waits
	f.waitForReason(t, "w2", conditions.ReasonClaimed, 10*time.Second)
	f.waitForReason(t, "w1", conditions.ReasonParked, time.Second)
}

// requestLog notes every request an operator process sends: method, path
// and answer, in the order they were answered.
type requestLog struct {
	mu   sync.Mutex
	reqs []string
}

func (l *requestLog) config() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			code := 0
			if resp != nil {
				code = resp.StatusCode
			}
			if req.URL.Query().Get("watch") != "true" {
				l.mu.Lock()
				l.reqs = append(l.reqs, fmt.Sprintf("%s %s %d", req.Method, req.URL.Path, code))
				l.mu.Unlock()
			}
			return resp, err
		})
	}
	return cfg
}

func (l *requestLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs)
}

// TestAWaiterThatTakesAFreedKeySaysClaimedWithoutReadingItselfFirst: a
// parked object that creates a freed key's record says Claimed in a write
// locked on the object as its cache shows it, and does not read itself
// from the API server between the two.
func TestAWaiterThatTakesAFreedKeySaysClaimedWithoutReadingItselfFirst(t *testing.T) {
	t.Parallel()
	reqs := &requestLog{}
	f := start(t, setup{config: reqs.config()})
	// Given alpha holds k and bravo waits for it
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	// When alpha is deleted
	before := len(reqs.all())
	if err := direct(t).Delete(context.Background(), f.widgetNow(t, "alpha")); err != nil {
		t.Fatal(err)
	}
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
	// Then after bravo's create of k's record, the next request about
	// bravo is the write of its condition
	log := reqs.all()[before:]
	created := slices.IndexFunc(log, func(r string) bool { return strings.HasPrefix(r, "POST ") && strings.HasSuffix(r, "/leases 201") })
	if created < 0 {
		t.Fatalf("no Lease was created; requests:\n%s", strings.Join(log, "\n"))
	}
	next := slices.IndexFunc(log[created:], func(r string) bool { return strings.Contains(r, "/widgets/bravo") })
	if next < 0 {
		t.Fatalf("no request about bravo after the Lease's create; requests:\n%s", strings.Join(log[created:], "\n"))
	}
	if got := log[created+next]; !strings.HasPrefix(got, "PATCH ") || !strings.HasSuffix(got, "/widgets/bravo/status 200") {
		t.Errorf("after bravo created k's record, its next request was %q, want the write of its condition; requests:\n%s", got, strings.Join(log[created:], "\n"))
	}
}

// TestAKeyFreedAgainWhileItsFirstWaiterSeesItHeldWakesThatWaiterAgain: a
// freed key wakes its first waiter alone; before that waiter's pass reads
// the key, another holder (another replica's grant) may take it, and free
// it again while the pass runs. The pass then parks on a record that is
// gone, and the second release must wake the waiter again, also when
// another object, older, names the key by then and is that release's
// first: nothing else will before the waiter's requeue (an hour here).
func TestAKeyFreedAgainWhileItsFirstWaiterSeesItHeldWakesThatWaiterAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		// other waits for j, queued before w; it names k too (after j)
		// before the second release when namesKNow
		other     string
		namesKNow bool
	}{
		{name: "no other names the key", other: "y"},
		{name: "an older object names the key now", other: "v", namesKNow: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			// Given g holds j, other waits for it, h holds k and w waits
			// for it; one worker, requeues an hour apart, a Widget's own
			// status writes not reconciling it (a generation predicate, as
			// many operators filter their primary kind), and a freed key's
			// herd lasting a minute at most, so that the steps below fall
			// within one herd however loaded the machine (they fit in the
			// default second too, on an idle machine)
			f := start(t, setup{statusChangesWakeNobody: true, opts: []claimmw.Option{claimmw.WithHerdWaitForTest(time.Minute)}})
			f.createAndWait(t, "g", conditions.ReasonClaimed, "j")
			f.createAndWait(t, tc.other, conditions.ReasonParked, "j")
			f.createAndWait(t, "h", conditions.ReasonClaimed, "k")
			f.createAndWait(t, "w", conditions.ReasonParked, "k")
			intruder, holder := f.intruderHolder(t)
			// And h's deletion pass held back at its start, and a pass of
			// other, which goes before w in the queue (its requeue is
			// older), queued behind it (the one worker is busy) and held
			// back too
			held := f.holdPassesOf("h", tc.other)
			f.deleteWidgetAsync(t, "h")
			held.waitEntered(t, "h")
			f.setKeys(t, tc.other, "j", tc.other+"2")
			held.cacheShowsKeys(t, f, tc.other, 2)
			time.Sleep(300 * time.Millisecond)
			// When h's deletion pass releases k: w, first of k's herd, is
			// woken, queued behind other
			held.let("h")
			eventually(t, 10*time.Second, func() (bool, string) {
				return !f.leaseExists(t, "k"), "k's Lease still exists after h's deletion pass"
			})
			held.waitEntered(t, tc.other)
			// And another replica grants k to another holder before w's
			// pass runs
			if _, o, err := intruder.Acquire(ctx, "k", holder); err != nil || o.Reason != claim.ReasonAcquired {
				t.Fatalf("acquiring k for the other holder: %+v, %v", o, err)
			}
			time.Sleep(300 * time.Millisecond)
			// And w's pass, which reads k held by that holder, is held back
			// at its status write
			wStatus := f.holdStatusOf("w")
			held.let(tc.other)
			wStatus.waitEntered(t, "w")
			if tc.namesKNow {
				// And other, older than w, names k now too, after j
				f.setKeys(t, tc.other, "j", "k", tc.other+"2")
				held.cacheShowsKeys(t, f, tc.other, 3)
			}
			// And that holder releases k again while w's pass runs
			recs, err := intruder.Holdings(ctx, holder)
			if err != nil {
				t.Fatal(err)
			}
			if released, err := intruder.ReleaseRecords(ctx, holder, recs...); err != nil || len(released) != 1 {
				t.Fatalf("releasing k for the other holder: %q, %v", released, err)
			}
			time.Sleep(500 * time.Millisecond)
			f.writes.beforeStatus.Store(func(client.Object) {})
			wStatus.let("w")
			// Then w is granted k, free since, without waiting for its
			// requeue, and other still waits for j
			f.waitForReason(t, "w", conditions.ReasonClaimed, 5*time.Second)
			f.waitForReason(t, tc.other, conditions.ReasonParked, time.Second)
		})
	}
}

// TestWhenAnAnnotationRecordIsRemovedTheOthersWaitForTheFirstWaitersPass:
// the annotation backend frees a key by an update of its storage object
// that removes the record's annotations. As for a Lease deleted, the first
// waiter is woken alone, and the others only once its pass ended (or the
// herd's wait passed): they do not run while its pass runs.
func TestWhenAnAnnotationRecordIsRemovedTheOthersWaitForTheFirstWaitersPass(t *testing.T) {
	// Given alpha holds k, stored on ConfigMap storage-k, and w1, w2, w3
	// wait for it (their parked passes run the inner reconciler), with four
	// workers and a freed key's herd lasting up to an hour
	var ns string
	f := start(t, setup{
		workers:   4,
		claimOpts: []claim.Option{claim.WithBackend(onStorageObjects(&ns))},
		opts:      []claimmw.Option{claimmw.WhileParked(claimmw.RunInnerWhileParked), claimmw.WithHerdWaitForTest(time.Hour)},
	})
	ns = f.ns
	createStorageOfK(t, direct(t), ns, nil)
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k")
	for _, w := range []string{"w1", "w2", "w3"} {
		f.createAndWait(t, w, conditions.ReasonParked, "k")
	}
	time.Sleep(time.Second)
	// And w1's pass that is granted k held in its inner reconciler
	entered, letW1 := make(chan struct{}, 1), make(chan struct{})
	f.inner.setHook(func(_ context.Context, name string, c call) (reconcile.Result, error) {
		if name == "w1" && len(c.state.Grants) > 0 {
			enterAndWait(entered, letW1)
		}
		return reconcile.Result{}, nil
	})
	before := map[string]int{"w2": len(f.inner.callsOf("w2")), "w3": len(f.inner.callsOf("w3"))}
	// When alpha is deleted and releases k
	f.deleteWidgetAsync(t, "alpha")
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatalf("w1, the first waiter, was not granted k after its release; k's record: %+v", f.record(t, "k").Holder)
	}
	// Then w1 is granted k, and while its pass runs w2 and w3 run no pass
	time.Sleep(time.Second)
	for _, w := range []string{"w2", "w3"} {
		if n := len(f.inner.callsOf(w)) - before[w]; n > 0 {
			t.Errorf("%s ran %d passes while the first waiter's pass for the freed key ran, want none", w, n)
		}
	}
	close(letW1)
	f.waitForReason(t, "w1", conditions.ReasonClaimed, 10*time.Second)
}

// TestAKeyFreedAgainByAnotherWaiterWhileTheFirstWaitersPassSeesItHeldWakesThatWaiterAgain:
// as TestAKeyFreedAgainWhileItsFirstWaiterSeesItHeldWakesThatWaiterAgain,
// with the holder in between a Widget of the same process: another waiter
// of the freed key, whose pass ran first, takes it while parked on its next
// key, and gives it up (it stopped naming it) while the first waiter's pass,
// which read it held, runs.
func TestAKeyFreedAgainByAnotherWaiterWhileTheFirstWaitersPassSeesItHeldWakesThatWaiterAgain(t *testing.T) {
	// Given g holds z, y waits for z, h holds k, w waits for k, and x,
	// created after w, waits for z; two workers, requeues an hour apart, a
	// Widget's own status writes not reconciling it, and a freed key's herd
	// lasting a minute at most; w's last pass is more recent than x's (its
	// keys changed), so that a pass of x queued before w's runs first
	f := start(t, setup{workers: 2, statusChangesWakeNobody: true, opts: []claimmw.Option{claimmw.WithHerdWaitForTest(time.Minute)}})
	f.createAndWait(t, "g", conditions.ReasonClaimed, "z")
	f.createAndWait(t, "y", conditions.ReasonParked, "z")
	f.createAndWait(t, "h", conditions.ReasonClaimed, "k")
	f.createAndWait(t, "w", conditions.ReasonParked, "k")
	f.createAndWait(t, "x", conditions.ReasonParked, "z")
	f.setKeys(t, "w", "k", "w2")
	eventually(t, 10*time.Second, func() (bool, string) {
		c := f.claimed(t, "w")
		return c.ObservedGeneration == f.widgetNow(t, "w").Generation, fmt.Sprintf("w's condition %+v is not for its new keys", c)
	})
	time.Sleep(500 * time.Millisecond)
	// And h's deletion pass held back at its start on one worker, and a
	// pass of y held back on the other
	held := f.holdPassesOf("h", "y")
	f.deleteWidgetAsync(t, "h")
	held.waitEntered(t, "h")
	f.setKeys(t, "y", "z", "y2")
	held.waitEntered(t, "y")
	// And x names k before z now, queued behind them
	f.setKeys(t, "x", "k", "z")
	held.cacheShowsKeys(t, f, "x", 2)
	time.Sleep(300 * time.Millisecond)
	// And w's pass held back at its status write
	wStatus := f.holdStatusOf("w")
	// When h's deletion pass releases k: w, first of k's herd, is woken,
	// and x's pass, queued before, takes k and parks on z
	held.let("h")
	wStatus.waitEntered(t, "w")
	if rec := f.record(t, "k"); !rec.Exists || rec.Holder.Name != "x" {
		t.Fatalf("k's record while w's pass runs: exists %t, holder %s; want x's", rec.Exists, rec.Holder)
	}
	// And x stops naming k and gives it up while w's pass, which read it
	// held by x, runs
	held.let("y")
	f.setKeys(t, "x", "z")
	eventually(t, 10*time.Second, func() (bool, string) {
		return !f.leaseExists(t, "k"), "k's Lease still exists after x stopped naming it"
	})
	time.Sleep(500 * time.Millisecond)
	f.writes.beforeStatus.Store(func(client.Object) {})
	wStatus.let("w")
	// Then w is granted k, free since, without waiting for its requeue
	f.waitForReason(t, "w", conditions.ReasonClaimed, 5*time.Second)
}

// heldPasses holds back, at their first read of the object, the passes of
// the Widgets it names until the test lets each go.
type heldPasses struct {
	entered, lets map[string]chan struct{}
	// testReads is set while the test itself reads through the manager's
	// client, which no hold applies to.
	testReads atomic.Bool
}

// holdPassesOf holds back the passes of the Widgets named from now on.
func (f *fixture) holdPassesOf(names ...string) *heldPasses {
	h := &heldPasses{entered: map[string]chan struct{}{}, lets: map[string]chan struct{}{}}
	for _, n := range names {
		h.entered[n], h.lets[n] = make(chan struct{}, 1), make(chan struct{})
	}
	f.writes.beforeWidgetGet.Store(func(key client.ObjectKey) {
		if e, ok := h.entered[key.Name]; ok && !h.testReads.Load() {
			enterAndWait(e, h.lets[key.Name])
		}
	})
	return h
}

// waitEntered waits up to 10 s for a pass of Widget name to reach its hold.
func (h *heldPasses) waitEntered(t *testing.T, name string) {
	t.Helper()
	select {
	case <-h.entered[name]:
	case <-time.After(10 * time.Second):
		t.Fatalf("no pass of %s reached its hold within 10s", name)
	}
}

// let lets the passes of Widget name go, now and from now on.
func (h *heldPasses) let(name string) { close(h.lets[name]) }

// cacheShowsKeys waits up to 10 s for the manager's cache to show Widget
// name naming n keys.
func (h *heldPasses) cacheShowsKeys(t *testing.T, f *fixture, name string, n int) {
	t.Helper()
	eventually(t, 10*time.Second, func() (bool, string) {
		h.testReads.Store(true)
		defer h.testReads.Store(false)
		w := &testcrd.Widget{}
		err := f.client.Get(context.Background(), client.ObjectKey{Namespace: f.ns, Name: name}, w)
		return err == nil && len(w.Spec.Keys) == n, fmt.Sprintf("the manager's cache does not show %s's new keys: %v", name, err)
	})
}

// holdStatusOf holds back the status writes of Widget name from now on,
// until the test lets them go.
func (f *fixture) holdStatusOf(name string) *heldPasses {
	h := &heldPasses{entered: map[string]chan struct{}{name: make(chan struct{}, 1)}, lets: map[string]chan struct{}{name: make(chan struct{})}}
	f.writes.beforeStatus.Store(func(obj client.Object) {
		if obj.GetName() == name {
			enterAndWait(h.entered[name], h.lets[name])
		}
	})
	return h
}

// TestWhenTheFirstWaitersPassPanicsTheOthersAreWokenAtOnce: a pass of the
// freed key's first waiter that panics (controller-runtime recovers it)
// ends as any other: the others are woken then, not after the hold-back's
// longest wait.
func TestWhenTheFirstWaitersPassPanicsTheOthersAreWokenAtOnce(t *testing.T) {
	t.Parallel()
	// Given h holds k and w1, w2 wait for it, and the others held back
	// behind a freed key's first waiter for up to an hour
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithHerdWaitForTest(time.Hour)}})
	f.createAndWait(t, "h", conditions.ReasonClaimed, "k")
	f.createAndWait(t, "w1", conditions.ReasonParked, "k")
	f.createAndWait(t, "w2", conditions.ReasonParked, "k")
	// And w1's reconciler panics in every pass it is granted k in
	f.inner.setHook(func(_ context.Context, name string, c call) (reconcile.Result, error) {
		if name == "w1" && len(c.state.Grants) > 0 {
			panic("injected: the reconciler panics")
		}
		return reconcile.Result{}, nil
	})
	// When h is deleted and releases k
	if err := direct(t).Delete(context.Background(), f.widgetNow(t, "h")); err != nil {
		t.Fatal(err)
	}
	// Then w2 is woken after w1's pass, and its condition names w1 as the
	// holder
	eventually(t, 10*time.Second, func() (bool, string) {
		c := f.claimed(t, "w2")
		return strings.Contains(c.Message, "w1"), fmt.Sprintf("w2's condition %+v does not name w1", c)
	})
}
