// Package history records what the participants of a claim test observed and
// checks the record against the claim protocol's promises, the way etcd and
// Jepsen check recorded histories instead of trusting a few happy paths.
//
// Participants append operations to a [Log] as they invoke and complete them
// (Acquire with its Outcome, Release, the deletion of a holder object); a
// watch appends every version of every record the API server stored
// ([Version]). [Check] then asserts, per key:
//
//   - every grant is backed: its token is the resourceVersion of a stored
//     version of the key's record naming the granted holder;
//   - two holders never share a token, and tokens increase in real time: a
//     grant that completed before another began carries the smaller token;
//   - no overlap: once a grant with a newer token has been reported, no
//     operation invoked after that report is told an older grant still holds;
//   - nobody loses a claim the protocol does not let it lose: a stored record
//     is deleted only after its holder asked to release, and passes to another
//     holder only after the previous holder's object was deleted (Liveness
//     judged it gone);
//   - nothing leaks: after the final sweep no record is left.
//
// Times are the test process's monotonic clock; every participant runs in
// that process, so invocation and completion times order operations exactly.
package history

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ocf-claim/claim/pkg/claim"
)

// Op is one operation a participant invoked.
type Op struct {
	// Kind says what was done.
	Kind OpKind
	// Key is the claim key of an Acquire.
	Key string
	// Holder is the UID of the holder the operation acted for.
	Holder types.UID
	// Process identifies the participant process that invoked the
	// operation; a holder whose process crashed and restarted has several.
	Process int
	// Invoked and Returned bracket the operation. Returned is zero for an
	// operation abandoned by a crash.
	Invoked, Returned time.Time
	// Reason and Token are the Outcome of an Acquire that returned no error.
	Reason claim.Reason
	Token  claim.Token
	// Err is the error the operation returned, if any.
	Err error
}

// OpKind names an operation.
type OpKind string

// The operations a Log records.
const (
	OpAcquire      OpKind = "acquire"
	OpRelease      OpKind = "release"
	OpDeleteHolder OpKind = "delete-holder"
	OpFinalRelease OpKind = "final-release"
)

// Granted reports whether the operation was an Acquire that granted its key.
func (o Op) Granted() bool { return o.Kind == OpAcquire && o.Err == nil && o.Reason.Granted() }

// Version is one stored version of a key's record, as a watch saw it.
type Version struct {
	// Key is the key the record names (its key annotation).
	Key string
	// Name is the record object's name; UID its object UID.
	Name string
	UID  types.UID
	// ResourceVersion of this version; for a deletion, the version deleted.
	ResourceVersion string
	// Holder is the UID the record's holder annotation names; HolderName
	// the name its holder-name annotation names.
	Holder     types.UID
	HolderName string
	// Deleted marks the deletion of the object.
	Deleted bool
	// Seen is when the watch delivered the version: after the server stored it.
	Seen time.Time
}

// Log is a concurrency-safe, append-only history.
type Log struct {
	mu  sync.Mutex
	ops []Op
}

// Begin records the invocation of an operation and returns the function
// that records its completion. An operation never completed (a crash) stays
// in the history with a zero Returned time.
func (l *Log) Begin(op Op) func(reason claim.Reason, token claim.Token, err error) {
	op.Invoked = time.Now()
	l.mu.Lock()
	i := len(l.ops)
	l.ops = append(l.ops, op)
	l.mu.Unlock()
	return func(reason claim.Reason, token claim.Token, err error) {
		now := time.Now()
		l.mu.Lock()
		defer l.mu.Unlock()
		l.ops[i].Returned, l.ops[i].Reason, l.ops[i].Token, l.ops[i].Err = now, reason, token, err
	}
}

// Ops returns a copy of the history.
func (l *Log) Ops() []Op {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.ops)
}

// Violation is one broken promise, in words that name the key, the holders
// and the tokens involved.
type Violation struct {
	Key  string
	Rule string
	What string
}

func (v Violation) String() string { return fmt.Sprintf("key %q: %s: %s", v.Key, v.Rule, v.What) }

// The rules Check enforces, as named in violations.
const (
	RuleBacked    = "grant-backed-by-record"
	RuleToken     = "tokens-increase"
	RuleOverlap   = "no-overlapping-grants"
	RuleReleased  = "deleted-only-on-release"
	RuleTakenOver = "taken-over-only-when-gone"
	RuleLeak      = "nothing-left-after-sweep"
)

// Summary counts what a check looked at.
type Summary struct {
	Ops        int
	Grants     int // Acquire calls that reported a grant
	Epochs     int // distinct (holder, token) grants
	Versions   int // record versions the watch saw
	Violations int
}

// epoch is one grant: a holder and a token, confirmed by one or more
// Acquire calls.
type epoch struct {
	holder      types.UID
	token       claim.Token
	firstInvoke time.Time
	firstReturn time.Time
	lastInvoke  time.Time
}

// Check checks ops and versions against the protocol's promises. left is
// every record still stored after the final sweep.
func Check(ops []Op, versions []Version, left []Version) (Summary, []Violation) {
	s := Summary{Ops: len(ops), Versions: len(versions)}
	var out []Violation
	add := func(key, rule, format string, args ...any) {
		out = append(out, Violation{Key: key, Rule: rule, What: fmt.Sprintf(format, args...)})
	}

	stored := map[string]map[string]Version{} // key -> resourceVersion -> version
	for _, v := range versions {
		if v.Deleted {
			continue
		}
		if stored[v.Key] == nil {
			stored[v.Key] = map[string]Version{}
		}
		stored[v.Key][v.ResourceVersion] = v
	}

	epochs := map[string][]*epoch{}
	for _, op := range ops {
		if !op.Granted() {
			continue
		}
		s.Grants++
		v, ok := stored[op.Key][string(op.Token)]
		if !ok || v.Holder != op.Holder {
			add(op.Key, RuleBacked, "%s reported %s to holder %s with token %s, but no stored version %s names that holder (found %v: %+v)",
				op.Kind, op.Reason, op.Holder, op.Token, op.Token, ok, v)
		}
		var e *epoch
		for _, c := range epochs[op.Key] {
			if c.holder == op.Holder && c.token == op.Token {
				e = c
			}
		}
		if e == nil {
			e = &epoch{holder: op.Holder, token: op.Token, firstInvoke: op.Invoked, firstReturn: op.Returned, lastInvoke: op.Invoked}
			epochs[op.Key] = append(epochs[op.Key], e)
		}
		if op.Invoked.Before(e.firstInvoke) {
			e.firstInvoke = op.Invoked
		}
		if op.Returned.Before(e.firstReturn) {
			e.firstReturn = op.Returned
		}
		if op.Invoked.After(e.lastInvoke) {
			e.lastInvoke = op.Invoked
		}
	}

	keys := slices.Sorted(maps.Keys(epochs))
	for _, key := range keys {
		es := epochs[key]
		s.Epochs += len(es)
		for i, a := range es {
			for _, b := range es[i+1:] {
				c, err := a.token.Compare(b.token)
				if err != nil {
					add(key, RuleToken, "%v", err)
					continue
				}
				if c == 0 {
					add(key, RuleToken, "holders %s and %s were both granted token %s", a.holder, b.holder, a.token)
					continue
				}
				older, newer := a, b
				if c > 0 {
					older, newer = b, a
				}
				if older.firstInvoke.After(newer.firstReturn) {
					add(key, RuleToken, "grant %s to %s began after grant %s to %s completed, yet carries the smaller token",
						older.token, older.holder, newer.token, newer.holder)
				}
				if older.lastInvoke.After(newer.firstReturn) {
					add(key, RuleOverlap, "holder %s was told it holds with token %s by a call invoked %s after holder %s had been granted token %s",
						older.holder, older.token, older.lastInvoke.Sub(newer.firstReturn), newer.holder, newer.token)
				}
			}
		}
	}

	out = append(out, checkTransitions(ops, versions)...)
	for _, v := range left {
		add(v.Key, RuleLeak, "record %s (holder %s, version %s) is still stored after every holder's final release", v.Name, v.Holder, v.ResourceVersion)
	}
	slices.SortStableFunc(out, func(a, b Violation) int { return cmp.Compare(a.Key, b.Key) })
	s.Violations = len(out)
	return s, out
}

// checkTransitions follows each record object through its versions: a
// deletion must come after its holder invoked a release, a change of holder
// after the previous holder's object was deleted.
func checkTransitions(ops []Op, versions []Version) []Violation {
	releases := map[types.UID][]time.Time{}
	deleted := map[types.UID]time.Time{}
	for _, op := range ops {
		switch op.Kind {
		case OpRelease, OpFinalRelease:
			releases[op.Holder] = append(releases[op.Holder], op.Invoked)
		case OpDeleteHolder:
			if t, ok := deleted[op.Holder]; !ok || op.Invoked.Before(t) {
				deleted[op.Holder] = op.Invoked
			}
		}
	}
	releasedBefore := func(h types.UID, t time.Time) bool {
		for _, r := range releases[h] {
			if r.Before(t) {
				return true
			}
		}
		return false
	}
	var out []Violation
	last := map[types.UID]Version{} // object UID -> its previous version
	for _, v := range versions {
		prev, seen := last[v.UID]
		last[v.UID] = v
		switch {
		case v.Deleted:
			if !releasedBefore(v.Holder, v.Seen) {
				out = append(out, Violation{Key: v.Key, Rule: RuleReleased, What: fmt.Sprintf(
					"record %s of holder %s (version %s) was deleted, but that holder never asked to release", v.Name, v.Holder, v.ResourceVersion)})
			}
		case seen && !prev.Deleted && prev.Holder != v.Holder:
			at, gone := deleted[prev.Holder]
			if !gone || !at.Before(v.Seen) {
				out = append(out, Violation{Key: v.Key, Rule: RuleTakenOver, What: fmt.Sprintf(
					"record %s passed from holder %s to %s at version %s while %s's object still existed",
					v.Name, prev.Holder, v.Holder, v.ResourceVersion, prev.Holder)})
			}
		}
	}
	return out
}

// Report words a summary and its violations for a test failure or a log.
func Report(s Summary, vs []Violation) string {
	var b strings.Builder
	fmt.Fprintf(&b, "ops=%d grants=%d epochs=%d versions=%d violations=%d", s.Ops, s.Grants, s.Epochs, s.Versions, s.Violations)
	for _, v := range vs {
		b.WriteString("\n  ")
		b.WriteString(v.String())
	}
	return b.String()
}
