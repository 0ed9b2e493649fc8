package claimmw

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ocf-claim/claim/internal/mutant"
	"github.com/ocf-claim/claim/pkg/claim"
)

// failedReleases remembers, per object, the records whose release failed
// after a pass that knew they go had succeeded (told of them, or releasing
// them untold): by key, the grant (its fencing token) the record carried.
//
// It decides cost, never safety. A later pass that finds such a record
// still held, while the object's condition as the API server has it says
// the object does not act for the key, releases it untold rather than say
// again that the object acts for it and tell it once more: two status
// writes per pass, each waking the object past the error backoff, for as
// long as the release fails. Untold is safe there whatever this memory
// says, since the condition is written before the object acts; what the
// memory spares is only a cleanup the reconciler already ran. A restarted
// process tells each such record once more.
type failedReleases struct {
	mu sync.Mutex
	m  map[types.NamespacedName]map[string]claim.Token
}

// failed notes that the release of recs, of the object name, failed,
// except the records of the keys in released.
func (f *failedReleases) failed(name types.NamespacedName, recs []claim.Record, released []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range recs {
		if slices.Contains(released, r.Key) {
			continue
		}
		if f.m == nil {
			f.m = map[types.NamespacedName]map[string]claim.Token{}
		}
		if f.m[name] == nil {
			f.m[name] = map[string]claim.Token{}
		}
		f.m[name][r.Key] = r.Token
	}
}

// released forgets the records of keys, released for the object name.
func (f *failedReleases) released(name types.NamespacedName, keys []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range keys {
		delete(f.m[name], k)
	}
	if len(f.m[name]) == 0 {
		delete(f.m, name)
	}
}

// retried returns the records of recs whose release failed for the object
// name after a pass that knew they go succeeded: the same key, of the same
// grant.
func (f *failedReleases) retried(name types.NamespacedName, recs []claim.Record) []claim.Record {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []claim.Record
	for _, r := range recs {
		if tok, ok := f.m[name][r.Key]; ok && tok == r.Token {
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
}
