package chaos_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ocf-claim/claim/internal/history"
	"github.com/ocf-claim/claim/internal/testclaimant"
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
	// errOverlap: the acting windows of two objects for one key overlap
	// (a window runs from the first inner call that acted for the key to
	// the end of the told pass that stopped its workload and succeeded, or
	// until the object is gone), and no expiry takeover was injected on the
	// key between the start of the pass that opened the older window and the
	// start of the newer.
	errOverlap = errors.New("one-actor-per-key")
	// errTokenOrder: an object acted with an older token in a pass that
	// began after another object had acted with a newer one.
	errTokenOrder = errors.New("tokens-increase")
	// errUnheld: an object acted for a key whose record, read uncached as
	// the inner call started, did not name it, and nothing from outside
	// touched the record since its pass began.
	errUnheld = errors.New("holds-record-when-acting")
	// errUnsaid: an object acted while its claim condition, read uncached
	// as the inner call started, said it acts for nothing (neither
	// Claimed=True nor Stopping), or, in any pass, while it acted for a
	// key or had a window open for one that its condition, naming the keys
	// it may act for, did not name: a waiter in any process that asked it
	// then would have acted beside it.
	errUnsaid = errors.New("says-it-may-act-when-acting")
	// errUntoldRelease: a record was deleted, not from outside, while its
	// holder's acting window for the key was open (its told pass had not
	// ended with success) and its object was not gone.
	errUntoldRelease = errors.New("released-only-after-stopped")
	// errTakeover: a record passed from one holder to another without an
	// injected expiry takeover while the previous holder's object was not
	// gone, and either its liveness is its existence (no expiry, no
	// handover in the profile) or its acting window for the key was open.
	errTakeover = errors.New("taken-over-only-when-gone")
	// errForeignRelease: a pass sent a Delete of a record version that
	// names another object as its holder: whatever that object does with
	// the key, its record went from under it.
	errForeignRelease = errors.New("releases-only-its-own-record")
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
	// errWritesGoOn: once the state looked settled, a claim record was
	// written within the quiet interval that follows (a livelock).
	errWritesGoOn = errors.New("writes-stop")
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
	// requeued: the call returned no error and asked to run again (a
	// told pass not done stopping).
	requeued bool
	state    claimmw.State
	// acted are the keys the inner reconciler acted for, with their
	// tokens: the grants of a Granted pass or of a deletion pass (and, for
	// the broken inner that ignores State.Granted, every key it names).
	acted []claimmw.Grant
	// unheld are the keys acted for whose record, read uncached as the
	// inner call started, did not name the object.
	unheld []unheld
	// unsaid is set when the object's claim condition, read uncached as
	// the inner call that acted started, said it acts for nothing.
	unsaid *unsaid
}

// unsaid is the claim condition an object showed while it acted, read at
// at (empty status and reason: it had none).
type unsaid struct {
	status metav1.ConditionStatus
	reason string
	at     time.Time
	// keys, when set, are the keys the object acted for, or still had a
	// window open for, that its condition, naming the keys it may act for
	// (claimmw.ActsFor), did not name; message is that condition's.
	keys    []string
	message string
}

// saysMayAct reports whether a claim condition c says its object may be
// acting for keys, as docs/middleware.md words it: Claimed=True, or
// Stopping until a told pass succeeded.
func saysMayAct(c *metav1.Condition) bool {
	if c == nil {
		return false
	}
	return c.Reason == string(conditions.ReasonStopping) || c.Reason == string(conditions.ReasonClaimed) && c.Status == metav1.ConditionTrue
}

// unheld is a key acted for whose record named holder (none when empty)
// when it was read, at at.
type unheld struct {
	key    string
	holder types.UID
	at     time.Time
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
	pass int64
	// object is the name of the object the pass was for.
	object  string
	version string
	sent    time.Time
}

// mwHistory is what one seed of the middleware run recorded.
type mwHistory struct {
	acts     []act
	releases []release
	outside  []outside
	deleted  map[types.UID]time.Time // object UID -> when its deletion was requested
	gone     map[types.UID]time.Time // object UID -> when the object disappeared
	versions []history.Version
	windows  []window
	// handovers and renewal say that a live holder may lose a key it does
	// not act for: by a committed handover, by expiry.
	handovers, renewal bool
	// overlaps are the moments two operator processes ran at once, as in
	// a rolling update without leader election. One object's passes may
	// then run in both, from different views of its spec, and nothing
	// orders a release in one after an act in the other: docs/middleware.md
	// does not promise the acting window to a window opened then.
	overlaps []period
	// lives are the operator processes' lifetimes: they decide nothing,
	// they only place the restarts in a failing seed's timeline.
	lives []life
}

// period is a span of time, from and to included.
type period struct{ from, to time.Time }

// life is the lifetime of one operator process: id, the shard it works
// (allShards for every object), from its start until its manager returned
// (zero while it runs).
type life struct {
	id, shard int
	from, to  time.Time
}

// openedDuringOverlap reports whether a pass that began at passStart and
// acted at start did either while two operator processes ran at once.
func (h mwHistory) openedDuringOverlap(passStart, start time.Time) bool {
	return slices.ContainsFunc(h.overlaps, func(p period) bool {
		in := func(t time.Time) bool { return !t.IsZero() && !t.Before(p.from) && !t.After(p.to) }
		return in(passStart) || in(start)
	})
}

// interval is one object acting for one key.
type interval struct {
	object                string
	uid                   types.UID
	key                   string
	token                 claim.Token
	passStart, start, end time.Time
}

func (w window) String() string {
	end := "running"
	if !w.end.IsZero() {
		end = w.end.Format("15:04:05.000")
	}
	return fmt.Sprintf("%s (%s) token %q window %s..%s (passes %d..%d)", w.object, w.uid, w.token, w.start.Format("15:04:05.000"), end, w.opened, w.closed)
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
	keys := slices.Sorted(maps.Keys(byKey))
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
			}
		}
	}
	for _, a := range h.acts {
		for _, u := range a.unheld {
			if !h.excused(u.key, a.passStart, u.at) && !h.openedDuringOverlap(a.passStart, a.start) {
				out = append(out, violate(errUnheld, u.key, "%s (%s) acted in pass %d (begun %s) while the record named %q (read %s)",
					a.object, a.uid, a.pass, a.passStart.Format("15:04:05.000"), u.holder, u.at.Format("15:04:05.000")))
			}
		}
	}
	for _, a := range h.acts {
		if u := a.unsaid; u != nil && len(u.keys) > 0 && !h.openedDuringOverlap(a.passStart, a.start) {
			out = append(out, violate(errUnsaid, u.keys[0], "%s (%s) may act for %s in pass %d (begun %s) while its condition said %s=%s for other keys only: %q (read %s)",
				a.object, a.uid, strings.Join(u.keys, ","), a.pass, a.passStart.Format("15:04:05.000"), u.reason, u.status, u.message, u.at.Format("15:04:05.000")))
		} else if u != nil && len(u.keys) == 0 && !h.openedDuringOverlap(a.passStart, a.start) {
			out = append(out, violate(errUnsaid, a.acted[0].Key, "%s (%s) acted for %s in pass %d (begun %s) while its condition said %s=%s (read %s)",
				a.object, a.uid, keysActed(a.acted), a.pass, a.passStart.Format("15:04:05.000"), u.reason, u.status, u.at.Format("15:04:05.000")))
		}
	}
	out = append(out, h.checkWindows()...)
	out = append(out, h.checkReleasers()...)
	return append(out, h.checkTransitions()...)
}

// checkReleasers applies errForeignRelease: every Delete a pass sent,
// fenced on a version of a record, names a version whose holder is the
// pass's own object. Deletes without a version, or of a version the
// recorder never saw, are not judged.
func (h mwHistory) checkReleasers() []error {
	var out []error
	byVersion := map[string]history.Version{}
	for _, v := range h.versions {
		if !v.Deleted {
			byVersion[v.ResourceVersion] = v
		}
	}
	for _, r := range h.releases {
		v, ok := byVersion[r.version]
		if r.version == "" || r.object == "" || !ok || v.HolderName == r.object {
			continue
		}
		out = append(out, violate(errForeignRelease, v.Key, "pass %d of %s sent a Delete of record %s at version %s (sent %s), which names %s (%s)",
			r.pass, r.object, v.Name, r.version, r.sent.Format("15:04:05.000"), v.HolderName, v.Holder))
	}
	return out
}

// keysActed lists the keys of grants, comma-separated.
func keysActed(gs []claimmw.Grant) string {
	keys := make([]string, len(gs))
	for i, g := range gs {
		keys[i] = g.Key
	}
	return strings.Join(keys, ",")
}

// excused reports whether a fault from outside the protocol touched key's
// record between from and to.
func (h mwHistory) excused(key string, from, to time.Time) bool {
	for _, o := range h.outside {
		if o.key == key && o.returned.After(from) && o.invoked.Before(to) {
			return true
		}
	}
	return false
}

// end is when w ended: the end of its told pass, or when its object was
// gone, whichever came first; the far future while it runs.
func (h mwHistory) end(w window) time.Time {
	end := w.end
	if end.IsZero() {
		end = time.Unix(1<<40, 0)
	}
	if g, ok := h.gone[w.uid]; ok && g.Before(end) {
		end = g
	}
	return end
}

// acting reports whether uid's acting window for key was open at t.
func (h mwHistory) acting(uid types.UID, key string, t time.Time) (window, bool) {
	for _, w := range h.windows {
		if w.uid == uid && w.key == key && w.start.Before(t) && h.end(w).After(t) {
			return w, true
		}
	}
	return window{}, false
}

// checkWindows applies errOverlap to the acting windows.
func (h mwHistory) checkWindows() []error {
	var out []error
	byKey := map[string][]window{}
	for _, w := range h.windows {
		byKey[w.key] = append(byKey[w.key], w)
	}
	keys := slices.Sorted(maps.Keys(byKey))
	for _, key := range keys {
		ws := byKey[key]
		slices.SortFunc(ws, func(a, b window) int { return a.start.Compare(b.start) })
		for i, older := range ws {
			for _, newer := range ws[i+1:] {
				if older.uid == newer.uid || !newer.start.Before(h.end(older)) {
					continue
				}
				// The older holder's pass may have read its grant before
				// the takeover and acted after it.
				from := older.start
				if !older.passStart.IsZero() && older.passStart.Before(from) {
					from = older.passStart
				}
				if h.takeoverBetween(key, from, newer.start) || h.openedDuringOverlap(older.passStart, older.start) {
					continue
				}
				out = append(out, violate(errOverlap, key, "%s and %s acted at once; in between: %s", older, newer, h.between(key, older.start, newer.start)))
			}
		}
	}
	return out
}

// between words what happened to key's record from a little before from
// to a little after to (the watch sees a version after the write applied):
// its versions and the faults injected from outside.
func (h mwHistory) between(key string, from, to time.Time) string {
	from, to = from.Add(-200*time.Millisecond), to.Add(200*time.Millisecond)
	var parts []string
	for _, v := range h.versions {
		if v.Key == key && !v.Seen.Before(from) && !v.Seen.After(to) {
			what := "holder " + string(v.Holder)
			if v.Deleted {
				what = "deleted"
				if h.deletedFromOutside(v) {
					what += " from outside"
				}
			}
			parts = append(parts, fmt.Sprintf("%s v%s %s", v.Seen.Format("15:04:05.000"), v.ResourceVersion, what))
		}
	}
	for _, o := range h.outside {
		if o.key == key && !o.invoked.Before(from) && !o.invoked.After(to) {
			parts = append(parts, fmt.Sprintf("%s %s", o.invoked.Format("15:04:05.000"), o.kind))
		}
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, ", ")
}

// takeoverBetween reports whether an expiry takeover of key was injected
// between from and to.
func (h mwHistory) takeoverBetween(key string, from, to time.Time) bool {
	for _, o := range h.outside {
		if o.kind == outsideTakeover && o.key == key && o.returned.After(from) && o.invoked.Before(to) {
			return true
		}
	}
	return false
}

// checkTransitions follows each record object through its versions: a
// deletion must come from outside or after its holder stopped acting for
// the key, a change of holder from an expiry takeover, from a previous
// holder that is gone, or (with expiry or handovers) from one that had
// stopped acting for the key.
func (h mwHistory) checkTransitions() []error {
	var out []error
	last := map[types.UID]history.Version{} // record UID -> its previous version
	for _, v := range h.versions {
		prev, seen := last[v.UID]
		last[v.UID] = v
		switch {
		case v.Deleted:
			holder, version := v.Holder, v.ResourceVersion
			if seen && !prev.Deleted {
				holder, version = prev.Holder, prev.ResourceVersion
			}
			if h.deletedFromOutside(v) {
				continue
			}
			at := v.Seen
			for _, r := range h.releases {
				if r.version == version && r.sent.Before(at) {
					at = r.sent
				}
			}
			if w, open := h.acting(holder, v.Key, at); open && !h.openedDuringOverlap(w.passStart, w.start) {
				out = append(out, violate(errUntoldRelease, v.Key, "record %s of holder %s (version %s) was deleted (delete sent %s, by passes %v) while its acting window %s was open",
					v.Name, holder, version, at.Format("15:04:05.000"), h.deleters(version), w))
			}
		case seen && !prev.Deleted && prev.Holder != v.Holder:
			if h.takenOver(v) || h.goneBefore(prev.Holder, v.Seen) {
				continue
			}
			w, open := h.acting(prev.Holder, v.Key, v.Seen)
			if open || !(h.handovers || h.renewal) {
				out = append(out, violate(errTakeover, v.Key, "record %s passed from %s to %s at version %s (%s) while %s's object was not gone (acting: %t %s)",
					v.Name, prev.Holder, v.Holder, v.ResourceVersion, v.Seen.Format("15:04:05.000"), prev.Holder, open, w))
			}
		}
	}
	return out
}

func (h mwHistory) goneBefore(uid types.UID, t time.Time) bool {
	at, ok := h.gone[uid]
	return ok && at.Before(t)
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

// namedKeys returns the keys a spec names as the middleware compares them
// with each other and with the keys of records: each normalized by
// normalize, sorted, each once. A spec that names "Store-1" and "store-1"
// under a lower-casing normalizer names one key, "store-1".
func namedKeys(spec []string, normalize func(string) string) []string {
	out := make([]string, len(spec))
	for i, k := range spec {
		out[i] = normalize(k)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// verbatim is the normalize of a seed whose Claimers use keys as given.
func verbatim(key string) string { return key }

// checkQuiescent applies the rules about the state after quiescence:
// errLeak, errClaimedNotHeld, errHoldsWhileWaiting, errDeadlock,
// errNotConverged. Records are read by the default key and holder-UID
// annotations; a Lease without a key annotation (the watch sentinel) is not
// a record. The keys of the objects' specs are compared the way the
// middleware compares them: normalized by normalize (namedKeys), as the
// records' keys are.
func checkQuiescent(objs []testclaimant.Claimant, leases []coordinationv1.Lease, normalize func(string) string) []error {
	var out []error
	live := map[types.UID]*testclaimant.Claimant{}
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
		} else if !slices.Contains(namedKeys(o.Spec.Keys, normalize), key) {
			out = append(out, violate(errLeak, key, "record %s names %s, which no longer names the key (it names %q)", l.Name, o.Name, o.Spec.Keys))
		}
	}
	waitsFor := map[types.UID]types.UID{}
	for _, o := range objs {
		if o.DeletionTimestamp != nil {
			continue
		}
		keys := namedKeys(o.Spec.Keys, normalize)
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
			if !alive || !slices.Contains(namedKeys(h.Spec.Keys, normalize), blocked) {
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
			// Named by the first key it does not hold, so that a failing
			// seed prints that key's timeline.
			blocked := ""
			if i := slices.IndexFunc(keys, func(k string) bool { return holderOf[k] != o.UID }); i >= 0 {
				blocked = keys[i]
			}
			out = append(out, violate(errNotConverged, blocked, "%s is %s/%s: %s", o.Name, c.Status, c.Reason, c.Message))
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
