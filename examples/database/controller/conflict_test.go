package controller_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ocf-claim/claim/examples/database/api/v1alpha1"
	"github.com/ocf-claim/claim/examples/database/controller"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// Status conflicts: the flush keeps the staged conditions of the types the
// example owns and takes every other type from the server, so conditions
// survive 409s and a concurrent writer.

// conflicter makes the first of every two status writes of each Database,
// per verb, fail with 409 Conflict before it reaches the API server: the
// first attempt of the inner pass's flush (an Update) and the middleware's
// condition write (a Patch) fail, their retries go through. It counts what
// it injected and the real conflicts the server answered.
type conflicter struct {
	// interject, when set, is called before an injected conflict of the
	// inner pass's flush: another writer changes the object on the server
	// then, so that the conflict is a real one and only a re-read sees the
	// other writer's condition. Guarded by mu.
	interject func(ctx context.Context, obj client.Object)
	// interjecting counts the interjections under way: one that took the
	// function before the test cleared it still writes after.
	interjecting sync.WaitGroup
	mu           sync.Mutex
	failed       map[string]bool // verb/namespace/name: the last write of that verb was refused here
	injected     atomic.Int64
	answered     atomic.Int64
}

func (f *conflicter) refuse(verb string, obj client.Object) bool {
	if _, ok := obj.(*v1alpha1.Database); !ok {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	id := verb + "/" + obj.GetNamespace() + "/" + obj.GetName()
	f.failed[id] = !f.failed[id]
	return f.failed[id]
}

func (f *conflicter) result(err error) error {
	if apierrors.IsConflict(err) {
		f.answered.Add(1)
	}
	return err
}

func (f *conflicter) conflict(obj client.Object) error {
	f.injected.Add(1)
	return apierrors.NewConflict(v1alpha1.GroupVersion.WithResource(v1alpha1.Plural).GroupResource(), obj.GetName(), errors.New("injected by the test"))
}

// funcs are the interceptor functions that put the conflicter in front of
// every status write of the manager's client: the middleware's and the inner
// pass's.
func (f *conflicter) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if sub == "status" && f.refuse("update", obj) {
				f.mu.Lock()
				interject := f.interject
				if interject != nil {
					f.interjecting.Add(1)
				}
				f.mu.Unlock()
				if interject != nil {
					interject(ctx, obj)
					f.interjecting.Done()
				}
				return f.conflict(obj)
			}
			return f.result(c.SubResource(sub).Update(ctx, obj, opts...))
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			if sub == "status" && f.refuse("patch", obj) {
				return f.conflict(obj)
			}
			return f.result(c.SubResource(sub).Patch(ctx, obj, patch, opts...))
		},
	}
}

// observation is one condition of one Database as a poll saw it.
type observation struct {
	status     metav1.ConditionStatus
	reason     string
	generation int64
	message    string
}

func (o observation) String() string {
	return fmt.Sprintf("%s/%s@%d", o.status, o.reason, o.generation)
}

// history is every status of a Database the watcher saw, oldest first:
// condition type → observation.
type history []map[string]observation

// watchStatus records every version of every Database in ns, from a watch
// of an uncached client (which, unlike polling, misses no version however
// short-lived), until ctx ends and it has seen every version written before
// then; it sends one history per Database name.
func watchStatus(ctx context.Context, t *testing.T, ns string) <-chan map[string]history {
	t.Helper()
	c := env.TestClient(t)
	// The watch outlives ctx until it has delivered what was written
	// before ctx ended.
	w, err := c.Watch(context.WithoutCancel(ctx), &v1alpha1.DatabaseList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan map[string]history, 1)
	go func() {
		defer w.Stop()
		seen := map[string]history{}
		last := map[string]int64{} // Database name → resourceVersion of its last version seen
		record := func(ev watch.Event) {
			db, isDB := ev.Object.(*v1alpha1.Database)
			if !isDB || ev.Type == watch.Deleted {
				return
			}
			snap := map[string]observation{}
			for _, cond := range db.Status.Conditions {
				snap[cond.Type] = observation{cond.Status, cond.Reason, cond.ObservedGeneration, cond.Message}
			}
			seen[db.Name] = append(seen[db.Name], snap)
			last[db.Name] = rv(db.ResourceVersion)
		}
		for {
			select {
			case <-ctx.Done():
				// Versions written before the end may still be on their
				// way: read on until the watch has delivered each
				// Database's version as the server has it now.
				if behind := drain(c, ns, w, last, record); behind != "" {
					t.Errorf("the watch did not deliver every version written before it stopped: %s", behind)
				}
				out <- seen
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					out <- seen
					return
				}
				record(ev)
			}
		}
	}()
	return out
}

// rv parses a resourceVersion, which the API server keeps comparable
// (etcd revisions).
func rv(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// drain reads w until every Database in ns, as an uncached list finds it
// now, has been delivered (last), or for at most 10 s; it returns what was
// still not delivered then.
func drain(c client.Client, ns string, w watch.Interface, last map[string]int64, record func(watch.Event)) string {
	list := &v1alpha1.DatabaseList{}
	if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		return "listing: " + err.Error()
	}
	behind := func() string {
		var out []string
		for _, db := range list.Items {
			if last[db.Name] < rv(db.ResourceVersion) {
				out = append(out, fmt.Sprintf("%s at %s, seen up to %d", db.Name, db.ResourceVersion, last[db.Name]))
			}
		}
		return strings.Join(out, "; ")
	}
	deadline := time.After(10 * time.Second)
	for behind() != "" {
		select {
		case <-deadline:
			return behind()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return "watch closed; " + behind()
			}
			record(ev)
		}
	}
	return ""
}

// check reports, for every condition type seen in h: a condition that
// disappeared after it appeared (lost), an ObservedGeneration that went
// back (an older write replaced a newer one), and a status that flipped
// True→False→True.
func (h history) check(name string) []string {
	var problems []string
	seenTypes := map[string]bool{}
	for _, snap := range h {
		for t := range snap {
			seenTypes[t] = true
		}
	}
	for t := range seenTypes {
		var seen []observation
		present := false
		for i, snap := range h {
			o, ok := snap[t]
			if !ok {
				if present {
					problems = append(problems, fmt.Sprintf("%s: %s lost in observation %d after %v", name, t, i, seen))
				}
				continue
			}
			if present && o.generation < seen[len(seen)-1].generation {
				problems = append(problems, fmt.Sprintf("%s: %s went back from %v to %v in observation %d", name, t, seen[len(seen)-1], o, i))
			}
			present = true
			seen = append(seen, o)
		}
		var statuses []metav1.ConditionStatus
		for _, o := range seen {
			if len(statuses) == 0 || statuses[len(statuses)-1] != o.status {
				statuses = append(statuses, o.status)
			}
		}
		for i := 2; i < len(statuses); i++ {
			if statuses[i-2] == metav1.ConditionTrue && statuses[i-1] == metav1.ConditionFalse && statuses[i] == metav1.ConditionTrue {
				problems = append(problems, fmt.Sprintf("%s: %s flipped True→False→True: %v", name, t, seen))
				break
			}
		}
	}
	return problems
}

// expect reports every observation of condition t in h, from its first
// appearance on, that has not the status and reason want.
func (h history) expect(name string, t conditions.Type, status metav1.ConditionStatus, reason conditions.Reason) []string {
	var problems []string
	present := false
	for i, snap := range h {
		o, ok := snap[string(t)]
		present = present || ok
		if present && ok && (o.status != status || o.reason != string(reason)) {
			problems = append(problems, fmt.Sprintf("%s: observation %d has %s=%v, want %s/%s", name, i, t, o, status, reason))
		}
	}
	if !present {
		problems = append(problems, fmt.Sprintf("%s: %s never observed", name, t))
	}
	return problems
}

func TestConditionsSurviveForcedStatusConflictsAndAConcurrentWriter(t *testing.T) {
	f := &conflicter{failed: map[string]bool{}}
	ns, c := startManager(t, intercepted(f.funcs()))
	ctx := context.Background()
	a := &auditor{c: c, reviews: map[string]int{}}
	const url = "postgres://pg.data.svc/orders"

	// Given holder holds the database, with its components Operational,
	// and parked waits for it
	create := func(name string) {
		createDatabase(t, c, ns, name, url, 0)
	}
	create("holder")
	waitForClaim(t, c, ns, "holder", conditions.ReasonClaimed)
	eventuallyReady(t, c, ns, "holder")
	create("parked")
	waitForClaim(t, c, ns, "parked", conditions.ReasonParked)

	// And a watcher records every version of either of them
	watchCtx, stopWatching := context.WithCancel(ctx)
	histories := watchStatus(watchCtx, t, ns)

	// And another writer that owns a condition type of its own (Audited) on
	// both and reviews them again whenever a status write of the inner pass
	// is refused, so that only a re-read sees its latest review; and that
	// bumps their metadata every 25 ms, so that reads go stale between the
	// middleware's write and the inner pass's
	for _, name := range []string{"holder", "parked"} {
		if err := a.review(ctx, &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	f.mu.Lock()
	f.interject = func(ctx context.Context, obj client.Object) {
		if err := a.review(ctx, obj); err != nil {
			t.Error(err)
		}
	}
	f.mu.Unlock()
	bumpCtx, stopBumping := context.WithCancel(ctx)
	bumped := make(chan int)
	go func() { bumped <- bump(bumpCtx, c, ns, "holder", "parked") }()

	// When the spec of both changes again and again, so that every pass
	// writes the claim condition and the components' (with the new
	// generation), and the first status write of each pass fails
	const steps = 12
	for i := 1; i <= steps; i++ {
		for _, name := range []string{"holder", "parked"} {
			patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"schemaVersion":%d}}`, i))
			if err := c.Patch(ctx, &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, patch); err != nil {
				t.Fatal(err)
			}
		}
		waitForGeneration(t, c, ns, "holder", fmt.Sprintf("Schema version %d is applied.", i))
		waitForGeneration(t, c, ns, "parked", "")
	}
	f.mu.Lock()
	f.interject = nil // the manager stops with the test: no review after this
	f.mu.Unlock()
	// A review that began before is watched too.
	f.interjecting.Wait()
	stopBumping()
	nBumps := <-bumped
	stopWatching()
	seen := <-histories
	holder, parked := seen["holder"], seen["parked"]

	// Then conflicts were forced all along
	t.Logf("%d conflicts injected, %d answered by the server, %d bumps; %d versions of holder and %d of parked watched",
		f.injected.Load(), f.answered.Load(), nBumps, len(holder), len(parked))
	if got := f.injected.Load(); got < 2*steps {
		t.Errorf("%d conflicts injected over %d steps, want at least %d: the test did not force what it claims", got, steps, 2*steps)
	}
	if len(holder) < steps || len(parked) < steps {
		t.Errorf("watched %d versions of holder and %d of parked, want at least %d each", len(holder), len(parked), steps)
	}
	// And no condition was lost, went back to an older generation or
	// flipped, on either
	problems := append(holder.check("holder"), parked.check("parked")...)
	// And the holder stayed Claimed, its components and Ready True; the
	// parked one stayed Parked, its components waiting
	problems = append(problems, holder.expect("holder", conditions.Claimed, metav1.ConditionTrue, conditions.ReasonClaimed)...)
	problems = append(problems, parked.expect("parked", conditions.Claimed, metav1.ConditionFalse, conditions.ReasonParked)...)
	for _, ct := range []conditions.Type{controller.SchemaReady, controller.ConnectionReady, conditions.Ready} {
		problems = append(problems, holder.expect("holder", ct, metav1.ConditionTrue, controller.ReasonOperational)...)
	}
	for _, ct := range []conditions.Type{controller.SchemaReady, controller.ConnectionReady, conditions.Ready} {
		problems = append(problems, parked.expect("parked", ct, metav1.ConditionFalse, controller.ReasonPrerequisiteNotMet)...)
	}
	// And the other writer's condition survived every flush, its latest
	// review never replaced by an older one
	problems = append(problems, holder.expect("holder", auditedType, metav1.ConditionTrue, auditedReason)...)
	problems = append(problems, parked.expect("parked", auditedType, metav1.ConditionTrue, auditedReason)...)
	problems = append(problems, holder.reviews("holder", a.last("holder"))...)
	problems = append(problems, parked.reviews("parked", a.last("parked"))...)
	for _, p := range problems {
		t.Error(p)
	}
}

// The condition another writer owns on the Databases.
const (
	auditedType   conditions.Type   = "Audited"
	auditedReason conditions.Reason = "Reviewed"
)

// auditor is a writer other than the example's controller that owns one
// condition type, Audited, on the Databases, and reviews them again and
// again: every review has a greater number, in the message.
type auditor struct {
	c       client.Client
	mu      sync.Mutex
	reviews map[string]int // Database name → number of its last review
}

// review sets Audited on db's Database as a controller would: read, set its
// one condition, update, retrying on a conflict.
func (a *auditor) review(ctx context.Context, db client.Object) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.reviews[db.GetName()] + 1
	// Patient: the bumper and the controller write the object all the time.
	patient := wait.Backoff{Steps: 50, Duration: 5 * time.Millisecond, Factor: 1.2, Jitter: 0.5, Cap: 100 * time.Millisecond}
	err := retry.RetryOnConflict(patient, func() error {
		cur := &v1alpha1.Database{}
		if err := a.c.Get(ctx, client.ObjectKeyFromObject(db), cur); err != nil {
			return err
		}
		meta.SetStatusCondition(cur.GetStatusConditions(), metav1.Condition{
			Type: string(auditedType), Status: metav1.ConditionTrue, Reason: string(auditedReason),
			Message: fmt.Sprintf("Review %d.", n), ObservedGeneration: cur.Generation,
		})
		return a.c.Status().Update(ctx, cur)
	})
	if err != nil {
		return fmt.Errorf("reviewing %s: %w", db.GetName(), err)
	}
	a.reviews[db.GetName()] = n
	return nil
}

// last returns the number of the last review of Database name.
func (a *auditor) last(name string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reviews[name]
}

// reviews reports every observation in h whose Audited review number is
// lower than an earlier one (an older status written over a newer one), and
// a last observation that does not carry the last review, want.
func (h history) reviews(name string, want int) []string {
	var problems []string
	prev := 0
	for i, snap := range h {
		o, ok := snap[string(auditedType)]
		if !ok {
			continue
		}
		var n int
		if _, err := fmt.Sscanf(o.message, "Review %d.", &n); err != nil {
			problems = append(problems, fmt.Sprintf("%s: observation %d: Audited message %q", name, i, o.message))
			continue
		}
		if n < prev {
			problems = append(problems, fmt.Sprintf("%s: observation %d has review %d after review %d", name, i, n, prev))
		}
		prev = n
	}
	if prev != want {
		problems = append(problems, fmt.Sprintf("%s: last review observed %d, want %d", name, prev, want))
	}
	return problems
}

// bump changes an annotation of each named Database every 25 ms until ctx
// ends, and returns how many writes it made: every one moves the
// resourceVersion, so a status write computed from an earlier read
// conflicts.
func bump(ctx context.Context, c client.Client, ns string, names ...string) int {
	n := 0
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return n
		case <-tick.C:
		}
		for _, name := range names {
			patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{"test.example.com/bump":"%d"}}}`, n))
			if err := c.Patch(ctx, &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, patch); err == nil {
				n++
			}
		}
	}
}

// waitForGeneration waits until every condition the example writes on
// Database ns/name (Claimed, the components', Ready) was computed for its
// current generation, and, when schema is not empty, SchemaReady's message
// is schema.
func waitForGeneration(t *testing.T, c client.Client, ns, name, schema string) {
	t.Helper()
	eventuallyDatabase(t, c, ns, name, 30*time.Second, 20*time.Millisecond, func(db *v1alpha1.Database) (bool, string) {
		var stale []string
		for _, ct := range []conditions.Type{conditions.Claimed, controller.SchemaReady, controller.ConnectionReady, conditions.Ready} {
			cond := condition(db, ct)
			switch {
			case cond == nil:
				stale = append(stale, string(ct)+" missing")
			case cond.ObservedGeneration != db.Generation:
				stale = append(stale, fmt.Sprintf("%s at generation %d", ct, cond.ObservedGeneration))
			case ct == controller.SchemaReady && schema != "" && cond.Message != schema:
				stale = append(stale, fmt.Sprintf("SchemaReady says %q", cond.Message))
			}
		}
		return len(stale) == 0,
			fmt.Sprintf("Database %s/%s at generation %d: %s", ns, name, db.Generation, strings.Join(stale, ", "))
	})
}

// TestMergeUnownedIsOCFsConflictHandling pins the example's flush to ocf's
// FlushStatus on a 409: the staged conditions of owned types stay, every
// other type is the server's, absence included.
func TestMergeUnownedIsOCFsConflictHandling(t *testing.T) {
	c := func(typ, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: reason}
	}
	owned := []conditions.Type{controller.SchemaReady, controller.ConnectionReady}
	for _, tc := range []struct {
		name           string
		staged, server []metav1.Condition
		want           []metav1.Condition
	}{
		{
			name:   "given a claim transition then Claimed is the server's and the staged Ready is replaced by the server's older one",
			staged: []metav1.Condition{c("SchemaReady", "PrerequisiteNotMet"), c("Claimed", "Claimed"), c("Ready", "PrerequisiteNotMet")},
			server: []metav1.Condition{c("SchemaReady", "Operational"), c("Claimed", "Parked"), c("Ready", "Operational")},
			want:   []metav1.Condition{c("SchemaReady", "PrerequisiteNotMet"), c("Claimed", "Parked"), c("Ready", "Operational")},
		},
		{
			name:   "given a first write then a staged Ready the server lacks is dropped",
			staged: []metav1.Condition{c("SchemaReady", "Operational"), c("Ready", "Operational")},
			server: []metav1.Condition{c("Claimed", "Claimed")},
			want:   []metav1.Condition{c("SchemaReady", "Operational"), c("Claimed", "Claimed")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := append([]metav1.Condition(nil), tc.staged...)
			controller.MergeUnowned(&got, tc.server, owned)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("MergeUnowned (-want +got):\n%s", diff)
			}
		})
	}
}
