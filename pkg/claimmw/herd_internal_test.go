package claimmw

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// addsQueue records what is added to it.
type addsQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	mu    sync.Mutex
	added []string
}

func (q *addsQueue) Add(r reconcile.Request) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.added = append(q.added, r.Name)
}

func (q *addsQueue) names() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := slices.Clone(q.added)
	slices.Sort(out)
	return out
}

func req(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
}

func reqNames(reqs []reconcile.Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return out
}

func TestAFreedKeysOtherNamersAreWokenOnceWhenTheFirstsPassEnded(t *testing.T) {
	var h herds
	q := &addsQueue{}
	// Given a freed key whose first namer is a, and b and c name it too
	now := h.start("k", req("a"), []reconcile.Request{req("b"), req("c")}, q, time.Hour)
	if diff := cmp.Diff([]string{"a"}, reqNames(now)); diff != "" {
		t.Fatalf("woken at once (-want +got):\n%s", diff)
	}
	// When the key's record changes meanwhile (a creates it) and names a, c, d
	now = h.hold("k", []reconcile.Request{req("a"), req("c"), req("d")}, q)
	// Then only a is woken now
	if diff := cmp.Diff([]string{"a"}, reqNames(now)); diff != "" {
		t.Errorf("woken by a record event during the herd (-want +got):\n%s", diff)
	}
	// And another key's events are not held back
	if diff := cmp.Diff([]string{"b"}, reqNames(h.hold("other", []reconcile.Request{req("b")}, q))); diff != "" {
		t.Errorf("woken by another key's record event (-want +got):\n%s", diff)
	}
	// And another object's pass ending wakes nobody
	h.passEnded(req("b").NamespacedName)
	if got := q.names(); len(got) != 0 {
		t.Errorf("woken when b's pass ended: %q, want nobody", got)
	}
	// When a's pass ends
	h.passEnded(req("a").NamespacedName)
	// Then b, c and d are woken, once each, and the key's events are no
	// longer held back
	if diff := cmp.Diff([]string{"b", "c", "d"}, q.names()); diff != "" {
		t.Errorf("woken when a's pass ended (-want +got):\n%s", diff)
	}
	h.passEnded(req("a").NamespacedName)
	if diff := cmp.Diff([]string{"b", "c", "d"}, q.names()); diff != "" {
		t.Errorf("woken when a's next pass ended (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "c"}, reqNames(h.hold("k", []reconcile.Request{req("a"), req("c")}, q))); diff != "" {
		t.Errorf("woken by a record event after the herd (-want +got):\n%s", diff)
	}
}

func TestAFreedKeysOtherNamersAreWokenAfterTheWaitWhenTheFirstsPassDoesNotEnd(t *testing.T) {
	var h herds
	q := &addsQueue{}
	// Given a freed key whose first namer a never ends its pass
	h.start("k", req("a"), []reconcile.Request{req("b")}, q, 20*time.Millisecond)
	// When the key is freed again meanwhile, naming c first
	now := h.start("k", req("c"), []reconcile.Request{req("d")}, q, 20*time.Millisecond)
	// Then c is woken at once, and a again (its pass under way may have
	// read the key held), and b and d once the wait passed
	if diff := cmp.Diff([]string{"a", "c"}, reqNames(now)); diff != "" {
		t.Errorf("woken at once by a second freeing (-want +got):\n%s", diff)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(q.names()) < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if diff := cmp.Diff([]string{"b", "d"}, q.names()); diff != "" {
		t.Errorf("woken after the wait (-want +got):\n%s", diff)
	}
	// And a's pass ending later wakes nobody again
	h.passEnded(req("a").NamespacedName)
	if diff := cmp.Diff([]string{"b", "d"}, q.names()); diff != "" {
		t.Errorf("woken when a's pass ended after the wait (-want +got):\n%s", diff)
	}
}

func TestAKeyFreedAgainWakesItsFirstNamerAgainWhileItsPassRuns(t *testing.T) {
	var h herds
	q := &addsQueue{}
	// Given a freed key whose first namer a is in its pass, b held back
	h.start("k", req("a"), []reconcile.Request{req("b")}, q, time.Hour)
	// When the key is freed again, a first again
	now := h.start("k", req("a"), []reconcile.Request{req("b")}, q, time.Hour)
	// Then a is woken again at once (its pass may have read the key held),
	// and b still waits for a's pass to end
	if diff := cmp.Diff([]string{"a"}, reqNames(now)); diff != "" {
		t.Errorf("woken at once by the second freeing (-want +got):\n%s", diff)
	}
	if got := q.names(); len(got) != 0 {
		t.Errorf("woken before a's pass ended: %q", got)
	}
	h.passEnded(req("a").NamespacedName)
	if diff := cmp.Diff([]string{"b"}, q.names()); diff != "" {
		t.Errorf("woken when a's pass ended (-want +got):\n%s", diff)
	}
}

func TestAKeyFreedAgainWakesItsFirstNamerAgainWhenAnotherIsFirstNow(t *testing.T) {
	var h herds
	q := &addsQueue{}
	// Given a freed key whose first namer a is in its pass, b held back
	h.start("k", req("a"), []reconcile.Request{req("b")}, q, time.Hour)
	// When the key is freed again, with o, which names it now and goes
	// before a, first
	now := h.start("k", req("o"), []reconcile.Request{req("a"), req("b")}, q, time.Hour)
	// Then o and a are woken at once (a's pass may have read the key held,
	// and will park on a record that is gone), and b waits for a's pass
	if diff := cmp.Diff([]string{"a", "o"}, reqNames(now)); diff != "" {
		t.Errorf("woken at once by the second freeing (-want +got):\n%s", diff)
	}
	if got := q.names(); len(got) != 0 {
		t.Errorf("woken before a's pass ended: %q", got)
	}
}
