package claim

import (
	"slices"
	"strings"
)

// verdict is what a read of a key's record calls for.
type verdict int

const (
	// verdictFree: no record; self may create one.
	verdictFree verdict = iota
	// verdictHeld: self holds the key.
	verdictHeld
	// verdictForeign: a record that is not ours blocks the key.
	verdictForeign
	// verdictOther: another holder is recorded; liveness decides.
	verdictOther
)

func (v verdict) String() string {
	return [...]string{"free", "held by self", "foreign", "held by another"}[v]
}

// judge decides what the record read for a key calls for, before any
// liveness question is asked. sets are the judging Claimer's claim set and
// the former sets it adopts (Config.FormerSets): a record of self written by
// another set is another claim on the same key
// (two middlewares of one object), judged like any other holder's, so that
// releasing it in its own set never leaves self acting for the key unseen.
// A record without a set predates sets and is anyone's of its holder.
func judge(rec Record, self Holder, sets ...string) verdict {
	switch {
	case !rec.Exists:
		return verdictFree
	case rec.Foreign != "":
		return verdictForeign
	case rec.Holder.Is(self) && ownSet(rec.Set, sets):
		return verdictHeld
	default:
		return verdictOther
	}
}

// step is what to do about a key held by another holder once liveness and
// the handover gate have answered.
type step int

const (
	stepPark     step = iota // the holder is alive: HeldElsewhere
	stepWait                 // gone, gate closed: WaitingForHandover
	stepTakeOver             // gone, gate open: conditional takeover write
)

// afterLiveness decides between park, wait and takeover. gateOpen is only
// meaningful when alive is false. successorIsSelf says a planned handover to
// self is prepared: self waits for the holder's commit while the holder
// lives, and is never granted before it.
func afterLiveness(alive, gateOpen, successorIsSelf bool) step {
	switch {
	case alive && successorIsSelf:
		return stepWait
	case alive:
		return stepPark
	case !gateOpen:
		return stepWait
	default:
		return stepTakeOver
	}
}

// raceResult is what a re-read after a failed takeover write shows.
type raceResult int

const (
	raceFreed   raceResult = iota // the record is gone: start over
	raceSelf                      // self holds it (a lost response of our own write)
	raceForeign                   // someone replaced it with a foreign record
	raceWinner                    // another holder took it: it is alive by construction
	raceStale                     // the judged holder is still recorded: retry later
)

// afterTakeoverConflict classifies the re-read after a takeover write from
// stale to self was rejected.
func afterTakeoverConflict(reread Record, stale, self Holder, sets ...string) raceResult {
	switch judge(reread, self, sets...) {
	case verdictFree:
		return raceFreed
	case verdictHeld:
		return raceSelf
	case verdictForeign:
		return raceForeign
	}
	if reread.Holder.Is(stale) {
		return raceStale
	}
	return raceWinner
}

// firstClaimant returns the sibling that goes before self while a key is
// free: the oldest sibling created before self, ties broken by the smaller
// namespace/name. ok is false when self goes first. Siblings without a
// creation time and self itself (by UID) are ignored.
func firstClaimant(self Holder, siblings []Holder) (first Holder, ok bool) {
	for _, s := range siblings {
		if s.Is(self) || s.Created.IsZero() || !before(s, self) {
			continue
		}
		if !ok || before(s, first) {
			first, ok = s, true
		}
	}
	return first, ok
}

// before orders claimants by creation time, then namespace/name.
func before(a, b Holder) bool {
	if b.Created.IsZero() {
		return !a.Created.IsZero()
	}
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	return strings.Compare(a.NamespacedName().String(), b.NamespacedName().String()) < 0
}

// ownSet reports whether a record stamped with set belongs to a Claimer of
// sets: one of them, or no set at all (a record written before sets existed).
func ownSet(set string, sets []string) bool {
	return set == "" || slices.Contains(sets, set)
}
