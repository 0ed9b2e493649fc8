package claimmw_test

// The deletion path's listings: no deletion pass waits for the API server's
// watch cache to catch up with etcd, and no record of the object is left
// behind for it.

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// leaseLists notes every List of Leases by label selector an operator
// process sends: the listings of one holder's records.
type leaseLists struct {
	mu    sync.Mutex
	lists []leaseList
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

func TestDeletingAHolderReleasesItsKeyWithoutAConsistentListOfItsRecords(t *testing.T) {
	t.Parallel()
	lists := &leaseLists{}
	f := start(t, setup{config: lists.config()})
	// Given alpha holds k and bravo waits for it
	f.holdsAndWaits(t, "alpha", "k", "bravo")
	alpha, err := f.widget(t, "alpha")
	if err != nil {
		t.Fatal(err)
	}
	// When alpha is deleted
	start := time.Now()
	if err := direct(t).Delete(context.Background(), alpha); err != nil {
		t.Fatal(err)
	}
	// Then bravo gets k, alpha is gone, and no deletion pass of alpha sent a
	// consistent List of its records (each waits up to 100 ms for the
	// watch cache after a write of another resource)
	f.waitForReason(t, "bravo", conditions.ReasonClaimed, wakeWithin)
	eventually(t, wakeWithin, func() (bool, string) {
		_, err := f.widget(t, "alpha")
		return err != nil, "alpha is still there"
	})
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
		w, err := f.widget(t, name)
		if err != nil {
			t.Fatal(err)
		}
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
		w, err := f.widget(t, name)
		if err != nil {
			t.Fatal(err)
		}
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
