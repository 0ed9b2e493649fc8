package chaos_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ocf-claim/claim/internal/history"
	"github.com/ocf-claim/claim/internal/testclaimant"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// at is a time n milliseconds after an arbitrary origin.
func at(n int) time.Time { return time.Unix(1_800_000_000, 0).Add(time.Duration(n) * time.Millisecond) }

// acting is a successful Granted pass of uid for key with token, its pass
// beginning at pass and the inner acting from start to end.
func acting(uid types.UID, key string, token claim.Token, pass, start, end int) act {
	g := claimmw.Grant{Key: key, Token: token}
	return act{object: string(uid), uid: uid, passStart: at(pass), start: at(start), end: at(end),
		state: claimmw.State{Granted: true, Grants: []claimmw.Grant{g}}, acted: []claimmw.Grant{g}}
}

func stored(key string, lease types.UID, rv string, holder types.UID, seen int) history.Version {
	return history.Version{Key: key, Name: "claim-" + key, UID: lease, ResourceVersion: rv, Holder: holder, HolderName: string(holder), Seen: at(seen)}
}

func gone(key string, lease types.UID, rv string, holder types.UID, seen int) history.Version {
	v := stored(key, lease, rv, holder, seen)
	v.Deleted = true
	return v
}

// rulesOf returns the rules errs break.
func rulesOf(errs []error) []error {
	var out []error
	for _, rule := range []error{errUnbacked, errOverlap, errTokenOrder, errUnheld, errUnsaid, errUntoldRelease, errTakeover, errForeignRelease, errLeak, errClaimedNotHeld, errHoldsWhileWaiting, errDeadlock, errNotConverged, errWritesGoOn} {
		for _, e := range errs {
			if errors.Is(e, rule) {
				out = append(out, rule)
				break
			}
		}
	}
	return out
}

func sameRules(got, want []error) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if !errors.Is(got[i], want[i]) {
			return false
		}
	}
	return true
}

// win is uid's acting window for key with token from start to end; end < 0
// is a workload still running.
func win(uid types.UID, key string, token claim.Token, start, end int) window {
	w := window{object: string(uid), uid: uid, key: key, token: token, start: at(start)}
	if end >= 0 {
		w.end = at(end)
	}
	return w
}

// TestMiddlewareCheckerHistoryRules proves each rule about the run on a
// hand-made history: it holds for what the middleware may do and breaks
// for what it must not.
func TestMiddlewareCheckerHistoryRules(t *testing.T) {
	const k = "store-0"
	// a holds k with token 10 (record L1); b gets it with token 20.
	base := []history.Version{stored(k, "L1", "10", "a", 5)}
	handedOn := append(slices.Clone(base), gone(k, "L1", "10", "a", 35), stored(k, "L2", "20", "b", 45))
	for _, tc := range []struct {
		name string
		h    mwHistory
		want []error
	}{{
		name: "one holder after another, the first released after its told pass ended",
		h: mwHistory{
			acts:     []act{acting("a", k, "10", 0, 10, 20), acting("b", k, "20", 40, 50, 60)},
			windows:  []window{win("a", k, "10", 10, 31), win("b", k, "20", 50, -1)},
			releases: []release{{pass: 2, version: "10", sent: at(33)}},
			versions: handedOn,
		},
	}, {
		name: "a workload that outlives its pass overlaps the next holder's",
		h: mwHistory{
			acts:     []act{acting("a", k, "10", 0, 10, 12), acting("b", k, "20", 40, 50, 60)},
			windows:  []window{win("a", k, "10", 10, -1), win("b", k, "20", 50, -1)},
			outside:  []outside{{kind: outsideDelete, key: k, lease: "L1", invoked: at(34), returned: at(35)}},
			versions: handedOn,
		},
		want: []error{errOverlap},
	}, {
		name: "two holders at once after an expiry takeover from outside",
		h: mwHistory{
			windows:  []window{win("a", k, "10", 10, 30), win("b", k, "20", 20, 40)},
			outside:  []outside{{kind: outsideTakeover, key: k, holder: "b", invoked: at(13), returned: at(14)}},
			versions: append(slices.Clone(base), stored(k, "L1", "20", "b", 15)),
		},
	}, {
		name: "two holders at once after an expiry takeover the older read its grant before",
		h: mwHistory{
			windows: []window{func() window { w := win("a", k, "10", 20, 30); w.passStart = at(5); return w }(),
				win("b", k, "20", 25, 40)},
			outside:  []outside{{kind: outsideTakeover, key: k, holder: "b", invoked: at(13), returned: at(14)}},
			versions: append(slices.Clone(base), stored(k, "L1", "20", "b", 15)),
		},
	}, {
		name: "a takeover while the holder acts, nothing from outside",
		h: mwHistory{
			windows:  []window{win("a", k, "10", 10, 30), win("b", k, "20", 20, 40)},
			versions: append(slices.Clone(base), stored(k, "L1", "20", "b", 15)),
		},
		want: []error{errOverlap, errTakeover},
	}, {
		name: "an older token acts in a pass begun after a newer one acted",
		h: mwHistory{
			acts:     []act{acting("b", k, "20", 0, 10, 20), acting("a", k, "10", 25, 30, 40)},
			outside:  []outside{{kind: outsideTakeover, key: k, holder: "b", invoked: at(1), returned: at(2)}},
			versions: append(slices.Clone(base), stored(k, "L1", "20", "b", 3)),
		},
		want: []error{errTokenOrder},
	}, {
		name: "acting with a token no stored version gives the holder",
		h: mwHistory{
			acts:     []act{acting("b", k, "10", 0, 10, 20)},
			versions: base,
		},
		want: []error{errUnbacked},
	}, {
		name: "acting while the record names another",
		h: mwHistory{
			acts: []act{func() act {
				x := acting("a", k, "10", 8, 10, 20)
				x.unheld = []unheld{{key: k, holder: "b", at: at(10)}}
				return x
			}()},
			versions: base,
		},
		want: []error{errUnheld},
	}, {
		name: "acting while the record was just deleted from outside",
		h: mwHistory{
			acts: []act{func() act {
				x := acting("a", k, "10", 8, 10, 20)
				x.unheld = []unheld{{key: k, at: at(10)}}
				return x
			}()},
			outside:  []outside{{kind: outsideDelete, key: k, lease: "L1", invoked: at(9), returned: at(9)}},
			versions: append(slices.Clone(base), gone(k, "L1", "10", "a", 9)),
		},
	}, {
		name: "acting while its condition, read uncached, says it acts for nothing",
		h: mwHistory{
			acts: []act{func() act {
				x := acting("a", k, "10", 8, 10, 20)
				x.unsaid = &unsaid{status: metav1.ConditionFalse, reason: string(conditions.ReasonReleased), at: at(10)}
				return x
			}()},
			versions: base,
		},
		want: []error{errUnsaid},
	}, {
		name: "a told pass while its window is open and its condition, read uncached, names other keys only",
		h: mwHistory{
			acts: []act{func() act {
				x := acting("a", k, "10", 8, 10, 20)
				x.unsaid = &unsaid{status: metav1.ConditionFalse, reason: string(conditions.ReasonStopping), at: at(10), keys: []string{k}, message: `Until a pass told to stop succeeded, it acts for no key but "other". Waiting.`}
				return x
			}()},
			versions: base,
		},
		want: []error{errUnsaid},
	}, {
		name: "acting, while two operator processes ran, with a condition that says it acts for nothing",
		h: mwHistory{
			acts: []act{func() act {
				x := acting("a", k, "10", 8, 10, 20)
				x.unsaid = &unsaid{status: metav1.ConditionFalse, reason: string(conditions.ReasonParked), at: at(10)}
				return x
			}()},
			versions: base,
			overlaps: []period{{from: at(5), to: at(12)}},
		},
	}, {
		name: "a pass deletes a record of its own object after its workload stopped",
		h: mwHistory{
			windows:  []window{win("a", k, "10", 10, 20)},
			releases: []release{{pass: 2, object: "a", version: "10", sent: at(25)}},
			versions: append(slices.Clone(base), gone(k, "L1", "10", "a", 30)),
		},
	}, {
		name: "a pass deletes a record that names another object, which has not acted",
		h: mwHistory{
			releases: []release{{pass: 2, object: "b", version: "10", sent: at(25)}},
			versions: append(slices.Clone(base), gone(k, "L1", "10", "a", 30)),
		},
		want: []error{errForeignRelease},
	}, {
		name: "a record deleted while its holder's workload runs",
		h: mwHistory{
			windows:  []window{win("a", k, "10", 10, -1)},
			releases: []release{{pass: 2, version: "10", sent: at(25)}},
			versions: append(slices.Clone(base), gone(k, "L1", "10", "a", 30)),
		},
		want: []error{errUntoldRelease},
	}, {
		name: "a record deleted before the told pass that stopped the workload ended",
		h: mwHistory{
			windows:  []window{win("a", k, "10", 10, 28)},
			releases: []release{{pass: 2, version: "10", sent: at(25)}},
			versions: append(slices.Clone(base), gone(k, "L1", "10", "a", 30)),
		},
		want: []error{errUntoldRelease},
	}, {
		name: "an older pass in a second operator process acts again after the told pass released the key",
		h: mwHistory{
			windows:  []window{win("a", k, "10", 10, 31), win("a", k, "10", 34, -1), win("b", k, "20", 50, -1)},
			releases: []release{{pass: 2, version: "10", sent: at(36)}},
			versions: append(slices.Clone(base), gone(k, "L1", "10", "a", 38), stored(k, "L2", "20", "b", 45)),
		},
		want: []error{errOverlap, errUntoldRelease},
	}, {
		name: "the same while two operator processes overlap, which is not promised",
		h: mwHistory{
			windows:  []window{win("a", k, "10", 10, 31), win("a", k, "10", 34, -1), win("b", k, "20", 50, -1)},
			releases: []release{{pass: 2, version: "10", sent: at(36)}},
			versions: append(slices.Clone(base), gone(k, "L1", "10", "a", 38), stored(k, "L2", "20", "b", 45)),
			overlaps: []period{{from: at(30), to: at(40)}},
		},
	}, {
		name: "a window opened before two processes overlapped is still checked during the overlap",
		h: mwHistory{
			windows:  []window{win("a", k, "10", 10, -1), win("b", k, "20", 50, -1)},
			releases: []release{{pass: 2, version: "10", sent: at(36)}},
			versions: append(slices.Clone(base), gone(k, "L1", "10", "a", 38), stored(k, "L2", "20", "b", 45)),
			overlaps: []period{{from: at(30), to: at(40)}},
		},
		want: []error{errOverlap, errUntoldRelease},
	}, {
		name: "a record deleted while its holder was only being deleted",
		h: mwHistory{
			windows:  []window{win("a", k, "10", 10, -1)},
			deleted:  map[types.UID]time.Time{"a": at(12)},
			releases: []release{{pass: 3, version: "10", sent: at(25)}},
			versions: append(slices.Clone(base), gone(k, "L1", "10", "a", 30)),
		},
		want: []error{errUntoldRelease},
	}, {
		name: "a record deleted once its holder's object was gone",
		h: mwHistory{
			windows:  []window{win("a", k, "10", 10, -1)},
			gone:     map[types.UID]time.Time{"a": at(20)},
			versions: append(slices.Clone(base), gone(k, "L1", "10", "a", 30)),
		},
	}, {
		name: "a record taken over while its holder was only being deleted",
		h: mwHistory{
			deleted:  map[types.UID]time.Time{"a": at(10)},
			versions: append(slices.Clone(base), stored(k, "L1", "20", "b", 15)),
		},
		want: []error{errTakeover},
	}, {
		name: "a record taken over after its holder was gone",
		h: mwHistory{
			gone:     map[types.UID]time.Time{"a": at(10)},
			versions: append(slices.Clone(base), stored(k, "L1", "20", "b", 15)),
		},
	}, {
		name: "with expiry, a holder that had stopped acting loses its record",
		h: mwHistory{
			renewal:  true,
			windows:  []window{win("a", k, "10", 5, 12)},
			versions: append(slices.Clone(base), stored(k, "L1", "20", "b", 15)),
		},
	}, {
		name: "with expiry, a holder still acting loses its record",
		h: mwHistory{
			renewal:  true,
			windows:  []window{win("a", k, "10", 5, -1)},
			versions: append(slices.Clone(base), stored(k, "L1", "20", "b", 15)),
		},
		want: []error{errTakeover},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			// Given a hand-made history
			// When the checker judges it
			got := rulesOf(checkHistory(tc.h))
			// Then exactly the expected rules break
			if !sameRules(got, tc.want) {
				t.Errorf("broken rules %v, want %v\n%v", got, tc.want, checkHistory(tc.h))
			}
		})
	}
}

func claimant(name string, gen int64, keys []string, status metav1.ConditionStatus, reason conditions.Reason, observed int64) testclaimant.Claimant {
	return testclaimant.Claimant{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name), Generation: gen},
		Spec:       testclaimant.ClaimantSpec{Keys: keys},
		Status: testclaimant.ClaimantStatus{Conditions: []metav1.Condition{{
			Type: string(conditions.Claimed), Status: status, Reason: string(reason), ObservedGeneration: observed}}},
	}
}

func record(key string, holder types.UID) coordinationv1.Lease {
	return coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "claim-" + key, Annotations: map[string]string{
		backends.DefaultKeyAnnotation: key, backends.DefaultHolderUIDAnnotation: string(holder)}}}
}

// TestMiddlewareCheckerQuiescentRules proves each rule about the state after
// quiescence on hand-made states.
func TestMiddlewareCheckerQuiescentRules(t *testing.T) {
	const T, F = metav1.ConditionTrue, metav1.ConditionFalse
	both := []string{"k1", "k2"}
	// Specs that spell the keys of the records otherwise: under a
	// lower-casing normalizer they name those keys, b twice.
	spelled := []testclaimant.Claimant{claimant("a", 1, []string{"K1", "k2"}, T, conditions.ReasonClaimed, 1), claimant("b", 1, []string{"k1", "K1", "K2"}, F, conditions.ReasonParked, 1)}
	for _, tc := range []struct {
		name   string
		objs   []testclaimant.Claimant
		leases []coordinationv1.Lease
		// normalize is the seed's key normalizer; nil: keys as given.
		normalize func(string) string
		want      []error
	}{{
		name:   "a holds both keys, b is parked behind it",
		objs:   []testclaimant.Claimant{claimant("a", 1, both, T, conditions.ReasonClaimed, 1), claimant("b", 1, both, F, conditions.ReasonParked, 1)},
		leases: []coordinationv1.Lease{record("k1", "a"), record("k2", "a")},
	}, {
		name:   "a record of an object that is gone",
		objs:   []testclaimant.Claimant{claimant("a", 1, nil, T, conditions.ReasonNoKeys, 1)},
		leases: []coordinationv1.Lease{record("k1", "x")},
		want:   []error{errLeak},
	}, {
		name:   "a record of a key its holder no longer names",
		objs:   []testclaimant.Claimant{claimant("a", 2, []string{"k2"}, T, conditions.ReasonClaimed, 2)},
		leases: []coordinationv1.Lease{record("k1", "a"), record("k2", "a")},
		want:   []error{errLeak},
	}, {
		name:   "Claimed without its record",
		objs:   []testclaimant.Claimant{claimant("a", 1, both, T, conditions.ReasonClaimed, 1)},
		leases: []coordinationv1.Lease{record("k1", "a")},
		want:   []error{errClaimedNotHeld},
	}, {
		name:   "a key swap: each holds what the other waits for",
		objs:   []testclaimant.Claimant{claimant("a", 1, both, F, conditions.ReasonParked, 1), claimant("b", 1, both, F, conditions.ReasonParked, 1)},
		leases: []coordinationv1.Lease{record("k1", "a"), record("k2", "b")},
		want:   []error{errHoldsWhileWaiting, errDeadlock},
	}, {
		name:   "parked behind a holder that no longer names the key",
		objs:   []testclaimant.Claimant{claimant("a", 2, nil, T, conditions.ReasonNoKeys, 2), claimant("b", 1, []string{"k1"}, F, conditions.ReasonParked, 1)},
		leases: []coordinationv1.Lease{record("k1", "a")},
		want:   []error{errLeak, errNotConverged},
	}, {
		name: "a condition of an older generation",
		objs: []testclaimant.Claimant{claimant("a", 2, []string{"k1"}, T, conditions.ReasonClaimed, 1)},
		want: []error{errNotConverged},
	}, {
		name: "an object still being deleted",
		objs: []testclaimant.Claimant{func() testclaimant.Claimant {
			c := claimant("a", 1, nil, T, conditions.ReasonNoKeys, 1)
			c.DeletionTimestamp = &metav1.Time{Time: at(0)}
			return c
		}()},
		want: []error{errNotConverged},
	}, {
		name:      "under a lower-casing normalizer a holds both keys its spec spells otherwise, b is parked behind it naming one twice",
		objs:      spelled,
		leases:    []coordinationv1.Lease{record("k1", "a"), record("k2", "a")},
		normalize: strings.ToLower,
	}, {
		name:   "the same specs with keys used as given name other keys than the records",
		objs:   spelled,
		leases: []coordinationv1.Lease{record("k1", "a"), record("k2", "a")},
		want:   []error{errLeak, errClaimedNotHeld, errNotConverged},
	}, {
		name: "under a lower-casing normalizer a parked object holds a key after the one it waits for, spelled otherwise",
		objs: []testclaimant.Claimant{claimant("a", 1, []string{"K1", "k2"}, F, conditions.ReasonParked, 1),
			claimant("b", 1, []string{"k1"}, T, conditions.ReasonClaimed, 1)},
		leases:    []coordinationv1.Lease{record("k1", "b"), record("k2", "a")},
		normalize: strings.ToLower,
		want:      []error{errHoldsWhileWaiting},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			// Given a hand-made state after quiescence, and the seed's key
			// normalizer
			normalize := tc.normalize
			if normalize == nil {
				normalize = verbatim
			}
			// When the checker judges it
			errs := checkQuiescent(tc.objs, tc.leases, normalize)
			// Then exactly the expected rules break
			if got := rulesOf(errs); !sameRules(got, tc.want) {
				t.Errorf("broken rules %v, want %v\n%v", got, tc.want, errs)
			}
		})
	}
}
