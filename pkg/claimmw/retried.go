package claimmw

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ocf-claim/claim/internal/mutant"
	"github.com/ocf-claim/claim/pkg/claim"
)

// Bounds of the delay before a release that failed is tried again: it
// doubles from releaseRetryBase with each failure of the object's releases
// in a row, up to releaseRetryMax. The passes that retry write nothing, so
// nothing else wakes the object: the controller's error backoff, which
// grows for as long as the releases fail (to 1000 s by default), would
// keep a waiter from the key long after they work again.
const (
	releaseRetryBase = 50 * time.Millisecond
	releaseRetryMax  = 5 * time.Second
)

// failedReleases remembers, per object, the keys whose record's release
// failed after a pass that knew it goes had succeeded (told of it, or
// releasing it untold) and that no pass acted for since; and how many
// releases of the object failed in a row. A key, not a grant: the object
// did not act for the key since, whatever record of it it holds now (the
// annotation backend's token rises with every write of the claimed object,
// which the cleanup itself may make).
//
// It decides cost, never safety. A later pass that finds such a record
// still held, while the object's condition as the API server has it says
// the object does not act for the key, releases it untold rather than say
// again that the object acts for it and tell it once more: two status
// writes per pass, each waking the object past the error backoff, for as
// long as the release fails. Untold is safe there whatever this memory
// says, since the condition is written before the object acts; what the
// memory spares is only a cleanup the reconciler already ran, which is why
// a pass that acts for the key again (granted it, told of it, or given it
// in a deletion pass) forgets it. A restarted process tells each such
// record once more.
type failedReleases struct {
	mu    sync.Mutex
	m     map[types.NamespacedName]map[string]bool
	tries map[types.NamespacedName]int
}

// failed notes that the release of recs, of the object name, failed,
// except the records of the keys in released, and returns how long to wait
// before it is tried again.
func (f *failedReleases) failed(name types.NamespacedName, recs []claim.Record, released []string) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[types.NamespacedName]map[string]bool{}
		f.tries = map[types.NamespacedName]int{}
	}
	for _, r := range recs {
		if slices.Contains(released, r.Key) {
			continue
		}
		if f.m[name] == nil {
			f.m[name] = map[string]bool{}
		}
		f.m[name][r.Key] = true
	}
	f.tries[name]++
	d := releaseRetryBase
	for i := 1; i < f.tries[name] && d < releaseRetryMax; i++ {
		d *= 2
	}
	return min(d, releaseRetryMax)
}

// acted forgets the records of keys, of the object name: released, or
// acted for by a pass (whose success, if their release then fails, is
// noted again). The count of failures in a row stays: a key told again
// (its condition still says the object acts for it, a gate keeping
// another record the pass was told of) is no release that worked.
func (f *failedReleases) acted(name types.NamespacedName, keys []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		delete(f.m[name], k)
	}
	if len(f.m[name]) == 0 {
		delete(f.m, name)
	}
}

// succeeded notes that a release of the object name, of the records of
// keys, worked: they are forgotten, and so is the count of failures.
func (f *failedReleases) succeeded(name types.NamespacedName, keys []string) {
	f.acted(name, keys)
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.tries, name)
}

// retried returns the records of recs whose key's release failed for the
// object name after a pass that knew it goes succeeded, and that no pass
// acted for since.
func (f *failedReleases) retried(name types.NamespacedName, recs []claim.Record) []claim.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []claim.Record
	for _, r := range recs {
		if f.m[name][r.Key] {
			out = append(out, r)
		}
	}
	mutant.Do(mutant.FailedReleaseToldAgain, func() { out = nil })
	return out
}

func (f *failedReleases) forget(name types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, name)
	delete(f.tries, name)
}
