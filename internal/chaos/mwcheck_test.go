package chaos_test

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ocf-claim/claim/internal/history"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// The rules of the middleware checker. Every violation wraps one of them, so
// that a test tells which promise broke with errors.Is.
var (
	// errUnbacked: the inner reconciler acted for a key with a token that
	// no stored version of the key's record names it with (or with none).
	errUnbacked = errors.New("acted-without-grant")
	// errOverlap: two objects acted for one key at the same time, and no
	// record of that key was deleted or taken over from outside between the
	// start of the older grant's pass and the start of the newer's action.
	errOverlap = errors.New("one-actor-per-key")
	// errTokenOrder: an object acted with an older token in a pass that
	// began after another object had acted with a newer one.
	errTokenOrder = errors.New("tokens-increase")
	// errUntoldRelease: a record was deleted, neither from outside nor by
	// a pass of its holder whose inner call succeeded and was told to stop
	// using the key (State.Releasing) or ran the deletion (State.Deleting).
	errUntoldRelease = errors.New("released-only-when-told")
	// errTakeover: a record passed from a holder whose object was never
	// deleted to another, without an injected expiry takeover.
	errTakeover = errors.New("taken-over-only-when-gone")
	// errLeak: after quiescence a record names a holder that is gone or no
	// longer names its key.
	errLeak = errors.New("no-leak")
	// errClaimedNotHeld: after quiescence an object says Claimed=True but
	// a key it names is not recorded for it.
	errClaimedNotHeld = errors.New("claimed-means-held")
	// errHoldsWhileWaiting: after quiescence a parked object holds a key
	// after the one it waits for (the give-up rule).
	errHoldsWhileWaiting = errors.New("no-hold-while-waiting")
	// errDeadlock: after quiescence parked objects wait for each other.
	errDeadlock = errors.New("no-deadlock")
	// errNotConverged: after quiescence an object is neither Claimed with
	// every key recorded for it nor Parked behind a live holder that names
	// the key, or is still being deleted.
	errNotConverged = errors.New("converges")
)

// violation is one broken promise of the middleware.
type violation struct {
	rule error
	key  string
	what string
}

func (v violation) Error() string {
	if v.key == "" {
		return fmt.Sprintf("%v: %s", v.rule, v.what)
	}
	return fmt.Sprintf("%v: key %q: %s", v.rule, v.key, v.what)
}

func (v violation) Unwrap() error { return v.rule }

func violate(rule error, key, format string, args ...any) error {
	return violation{rule: rule, key: key, what: fmt.Sprintf(format, args...)}
}

// act is one call of the inner reconciler, as it recorded itself.
type act struct {
	object string
	uid    types.UID
	// pass numbers the controller's pass that made the call.
	pass int64
	// passStart is when the controller began the middleware's pass that
	// called the inner reconciler; start and end bracket the inner call.
	passStart, start, end time.Time
	err                   error
	state                 claimmw.State
	// acted are the keys the inner reconciler acted for, with their
	// tokens: the grants of a Granted pass (and, for the broken inner
	// that ignores State.Granted, every key it names).
	acted []claimmw.Grant
}

// outside is a fault injected on a key from outside the protocol.
type outside struct {
	kind string // "delete-record" or "expiry-takeover"
	key  string
	// lease is the record object deleted; holder the object a takeover
	// was made for.
	lease, holder     types.UID
	invoked, returned time.Time
}

const (
	outsideDelete   = "delete-record"
	outsideTakeover = "expiry-takeover"
)

// release is a Lease Delete the manager sent, fenced on version, in the
// pass numbered pass.
type release struct {
	pass    int64
	version string
}

// mwHistory is what one seed of the middleware run recorded.
type mwHistory struct {
	acts     []act
	releases []release
	outside  []outside
	deleted  map[types.UID]time.Time // object UID -> when its deletion was requested
	versions []history.Version
}

// interval is one object acting for one key.
type interval struct {
	object                string
	uid                   types.UID
	key                   string
	token                 claim.Token
	passStart, start, end time.Time
}

func (iv interval) String() string {
	return fmt.Sprintf("%s (%s) token %q pass %s act %s..%s", iv.object, iv.uid, iv.token,
		iv.passStart.Format("15:04:05.000"), iv.start.Format("15:04:05.000"), iv.end.Format("15:04:05.000"))
}

// checkHistory applies the rules about what happened during the run:
// errUnbacked, errOverlap, errTokenOrder, errUntoldRelease, errTakeover.
func checkHistory(h mwHistory) []error {
	var out []error
	stored := map[string]map[string]types.UID{} // key -> resourceVersion -> holder
	for _, v := range h.versions {
		if v.Deleted {
			continue
		}
		if stored[v.Key] == nil {
			stored[v.Key] = map[string]types.UID{}
		}
		stored[v.Key][v.ResourceVersion] = v.Holder
	}

	byKey := map[string][]interval{}
	for _, a := range h.acts {
		for _, g := range a.acted {
			iv := interval{object: a.object, uid: a.uid, key: g.Key, token: g.Token, passStart: a.passStart, start: a.start, end: a.end}
			byKey[g.Key] = append(byKey[g.Key], iv)
			// A grant's token is the resourceVersion of the write that
			// granted it, and that version names the holder.
			if holder, ok := stored[g.Key][string(g.Token)]; !ok || holder != a.uid {
				out = append(out, violate(errUnbacked, g.Key, "%s acted with token %q, but no stored version %q of the record names it (found %t, holder %q)",
					iv, g.Token, g.Token, ok, holder))
			}
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		ivs := byKey[key]
		for i, a := range ivs {
			for _, b := range ivs[i+1:] {
				if a.uid == b.uid {
					continue
				}
				c, err := a.token.Compare(b.token)
				if err != nil {
					out = append(out, violate(errTokenOrder, key, "%v", err))
					continue
				}
				older, newer := a, b
				if c > 0 {
					older, newer = b, a
				}
				if c == 0 {
					out = append(out, violate(errTokenOrder, key, "%s and %s acted with the same token", a, b))
					continue
				}
				// Once an object acted with a newer token, no pass that
				// begins later may act with an older one.
				if older.passStart.After(newer.start) {
					out = append(out, violate(errTokenOrder, key, "%s acted with the older token in a pass that began after %s acted with the newer one", older, newer))
				}
				if older.start.Before(newer.end) && newer.start.Before(older.end) && !h.excused(key, older.passStart, newer.start) {
					out = append(out, violate(errOverlap, key, "%s and %s acted at once, and nothing from outside touched the record in between", older, newer))
				}
			}
		}
	}
	return append(out, h.checkTransitions()...)
}

// excused reports whether a fault from outside the protocol touched key's
// record between from and to: the only way two objects may act at once.
func (h mwHistory) excused(key string, from, to time.Time) bool {
	for _, o := range h.outside {
		if o.key == key && o.returned.After(from) && o.invoked.Before(to) {
			return true
		}
	}
	return false
}

// checkTransitions follows each record object through its versions: a
// deletion must come from outside or after its holder was told, a change of
// holder from an expiry takeover or after the previous holder's deletion.
func (h mwHistory) checkTransitions() []error {
	var out []error
	last := map[types.UID]history.Version{} // record UID -> its previous version
	for _, v := range h.versions {
		prev, seen := last[v.UID]
		last[v.UID] = v
		switch {
		case v.Deleted:
			holder, version := v.Holder, ""
			if seen && !prev.Deleted {
				holder, version = prev.Holder, prev.ResourceVersion
			}
			if !h.deletedFromOutside(v) && !h.told(holder, v.Key, version) {
				out = append(out, violate(errUntoldRelease, v.Key, "record %s of holder %s (version %s) was deleted at %s, but by no pass of that holder whose inner call succeeded and was told to release it (deletes of that version by passes %v)",
					v.Name, holder, version, v.Seen.Format("15:04:05.000"), h.deleters(version)))
			}
		case seen && !prev.Deleted && prev.Holder != v.Holder:
			if !h.takenOver(v) && !h.deletedBefore(prev.Holder, v.Seen) {
				out = append(out, violate(errTakeover, v.Key, "record %s passed from %s to %s at version %s while %s's object was never deleted",
					v.Name, prev.Holder, v.Holder, v.ResourceVersion, prev.Holder))
			}
		}
	}
	return out
}

func (h mwHistory) deletedFromOutside(v history.Version) bool {
	for _, o := range h.outside {
		if o.kind == outsideDelete && o.lease == v.UID && o.invoked.Before(v.Seen) {
			return true
		}
	}
	return false
}

func (h mwHistory) takenOver(v history.Version) bool {
	for _, o := range h.outside {
		if o.kind == outsideTakeover && o.key == v.Key && o.holder == v.Holder && o.invoked.Before(v.Seen) {
			return true
		}
	}
	return false
}

func (h mwHistory) deletedBefore(uid types.UID, t time.Time) bool {
	at, ok := h.deleted[uid]
	return ok && at.Before(t)
}

// told reports whether a pass that asked to delete version of key's record
// was a pass of holder whose inner call succeeded and ran its deletion or
// was told to release key. Only that pass's release may delete it: the
// middleware releases after the inner call of the same pass returned.
func (h mwHistory) told(holder types.UID, key, version string) bool {
	for _, r := range h.releases {
		if r.version != version || r.pass == 0 {
			continue
		}
		for _, a := range h.acts {
			if a.pass != r.pass || a.uid != holder || a.err != nil {
				continue
			}
			if a.state.Deleting || slices.ContainsFunc(a.state.Releasing, func(g claimmw.Grant) bool { return g.Key == key }) {
				return true
			}
		}
	}
	return false
}

// deleters returns the passes that asked to delete version.
func (h mwHistory) deleters(version string) []int64 {
	var out []int64
	for _, r := range h.releases {
		if r.version == version {
			out = append(out, r.pass)
		}
	}
	return out
}

// checkQuiescent applies the rules about the state after quiescence:
// errLeak, errClaimedNotHeld, errHoldsWhileWaiting, errDeadlock,
// errNotConverged. Records are read by the default key and holder-UID
// annotations; a Lease without a key annotation (the watch sentinel) is not
// a record.
func checkQuiescent(objs []Claimant, leases []coordinationv1.Lease) []error {
	var out []error
	live := map[types.UID]*Claimant{}
	for i := range objs {
		o := &objs[i]
		if o.DeletionTimestamp != nil {
			out = append(out, violate(errNotConverged, "", "%s (%s) is still being deleted", o.Name, o.UID))
			continue
		}
		live[o.UID] = o
	}
	holderOf := map[string]types.UID{} // key -> holder UID of its record
	for i := range leases {
		l := &leases[i]
		key, ok := l.Annotations[backends.DefaultKeyAnnotation]
		if !ok {
			continue // the watch sentinel
		}
		holder := types.UID(l.Annotations[backends.DefaultHolderUIDAnnotation])
		holderOf[key] = holder
		if o, ok := live[holder]; !ok {
			out = append(out, violate(errLeak, key, "record %s names %s, which is gone", l.Name, holder))
		} else if !slices.Contains(o.Spec.Keys, key) {
			out = append(out, violate(errLeak, key, "record %s names %s, which no longer names the key (it names %q)", l.Name, o.Name, o.Spec.Keys))
		}
	}
	waitsFor := map[types.UID]types.UID{}
	for _, o := range objs {
		if o.DeletionTimestamp != nil {
			continue
		}
		keys := slices.Compact(slices.Sorted(slices.Values(o.Spec.Keys)))
		c := meta.FindStatusCondition(o.Status.Conditions, string(conditions.Claimed))
		switch {
		case c == nil:
			out = append(out, violate(errNotConverged, "", "%s has no claim condition", o.Name))
		case c.ObservedGeneration != o.Generation:
			out = append(out, violate(errNotConverged, "", "%s's claim condition (%s) is of generation %d, the object is at %d", o.Name, c.Reason, c.ObservedGeneration, o.Generation))
		case c.Status == metav1.ConditionTrue:
			for _, k := range keys {
				switch h, ok := holderOf[k]; {
				case !ok:
					out = append(out, violate(errClaimedNotHeld, k, "%s says %s (%s) but the key has no record", o.Name, c.Reason, c.Message))
				case h != o.UID:
					out = append(out, violate(errClaimedNotHeld, k, "%s says %s (%s) but the key's record names %s", o.Name, c.Reason, c.Message, h))
				}
			}
		case c.Reason == string(conditions.ReasonParked):
			i := slices.IndexFunc(keys, func(k string) bool { return holderOf[k] != o.UID })
			if i < 0 {
				out = append(out, violate(errNotConverged, "", "%s holds every key it names yet says Parked: %s", o.Name, c.Message))
				continue
			}
			blocked, holder := keys[i], holderOf[keys[i]]
			h, alive := live[holder]
			if !alive || !slices.Contains(h.Spec.Keys, blocked) {
				out = append(out, violate(errNotConverged, blocked, "%s is parked behind holder %q, which is gone, names no such key, or there is no record (%s)", o.Name, holder, c.Message))
				continue
			}
			waitsFor[o.UID] = holder
			for _, k := range keys[i+1:] {
				if holderOf[k] == o.UID {
					out = append(out, violate(errHoldsWhileWaiting, k, "%s holds it while it waits for %q", o.Name, blocked))
				}
			}
		default:
			out = append(out, violate(errNotConverged, "", "%s is %s/%s: %s", o.Name, c.Status, c.Reason, c.Message))
		}
	}
	for start := range waitsFor {
		seen := map[types.UID]bool{start: true}
		for at, ok := waitsFor[start]; ok; at, ok = waitsFor[at] {
			if seen[at] {
				if at == start {
					out = append(out, violate(errDeadlock, "", "%s waits for itself through a chain of parked objects", live[start].Name))
				}
				break
			}
			seen[at] = true
		}
	}
	return out
}
