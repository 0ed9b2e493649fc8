// Package mutant puts known bugs back into the library, one at a time, so
// that the randomized checkers can prove they see them (make chaos-mutants).
//
// A mutant is named by a [Name] and switched on for the whole process by the
// environment variable CHAOS_MUTANT=<name>, read once at start, and only in
// a binary built with the build tag chaosmutants (make chaos-mutants sets
// it). Without the tag no mutant can be switched on: [Is] is false for
// every name by a constant, and the compiler drops the hooks, which are
// single statements ([Do]) in the library; [Active] reports a CHAOS_MUTANT
// set in such a binary as an error, so that a checker cannot believe it
// ran a mutant it did not.
package mutant

import (
	"fmt"
	"os"
	"slices"
)

// Name names one mutant: one bug the checker must catch.
type Name string

// The mutants. Each comment says what the hook flips; docs/reliability.md
// lists where each hook is and how many seeds the checker needed.
const (
	// NotWokenByRecordEvents: a record's create, update or delete wakes every
	// object that names its key except the record's holder.
	NotWokenByRecordEvents Name = "NotWokenByRecordEvents"
	// LostKeyNeverTold: a pass that finds the object no longer holding its
	// keys forgets that it may have held them, so in the default parked mode
	// the inner reconciler is not told to stop.
	LostKeyNeverTold Name = "LostKeyNeverTold"
	// CachedHeldTrusted: Acquire trusts the manager's cache when it says the
	// record is the caller's, instead of the uncached read.
	CachedHeldTrusted Name = "CachedHeldTrusted"
	// DeletingHolderJudgedGone: the default liveness judges a holder whose
	// object is being deleted (still cleaning up) gone.
	DeletingHolderJudgedGone Name = "DeletingHolderJudgedGone"
	// ReleaseBeforeInner: keys given up are released before the inner pass
	// that is told of them, not after it succeeded.
	ReleaseBeforeInner Name = "ReleaseBeforeInner"
	// ReleaseAfterFailedInner: keys given up are released even when the
	// inner pass that was told of them failed.
	ReleaseAfterFailedInner Name = "ReleaseAfterFailedInner"
	// ReleaseWhateverRecord: a release deletes whatever record of the key is
	// there now, whoever it names.
	ReleaseWhateverRecord Name = "ReleaseWhateverRecord"
	// MustTellInMemory: whether the object may have held its keys (and must
	// be told to stop) is kept in the operator's memory instead of read from
	// the object's condition, so a restarted operator forgets it.
	MustTellInMemory Name = "MustTellInMemory"
	// SteadyPassWrites: a granted pass writes the records it holds again
	// (a renewal) although nothing changed, and each write wakes the holder
	// for another pass: a livelock that looks settled at every snapshot.
	SteadyPassWrites Name = "SteadyPassWrites"
	// EmptyKeySetNotActing: an object whose key set becomes empty says
	// NoKeys before its told pass succeeded, a reason that does not say it
	// may still act, so a waiter's predecessor check passes it by.
	EmptyKeySetNotActing Name = "EmptyKeySetNotActing"
	// CachedConditionTrusted: a granted pass whose records were all held
	// before it decides from its cached condition whether it must say it
	// acts before it acts: a cache still showing Stopping after the told
	// pass succeeded and said so lets it act without saying Claimed first;
	// and a parked pass given records to release decides from its cached
	// condition whether it acts for them: a cache that shows it parked from
	// before it acted (a restarted process, which wrote nothing) lets its
	// records go untold when its status write is refused.
	CachedConditionTrusted Name = "CachedConditionTrusted"
	// FreshCacheAssumed: the check a granted pass makes before it starts
	// acting trusts the manager's cache without waiting for it to show the
	// pass's own write: a lagging cache that still shows an earlier holder
	// acting for nothing lets the pass act beside it.
	FreshCacheAssumed Name = "FreshCacheAssumed"
	// DeletionCachedConditionTrusted: a deletion pass judges from its
	// cached condition: given records, a cache still showing that the
	// object may act, after a told pass succeeded and wrote that it acts for
	// nothing, lets it act without saying so in the API server first; given
	// none, a cache that has not shown a Claimed write yet lets the
	// finalizer come off while its pass asks to run again.
	DeletionCachedConditionTrusted Name = "DeletionCachedConditionTrusted"
	// RequeuedStopTakenAsDone: a parked pass whose inner reconciler, told to
	// stop, returns no error but asks to run again (its workloads are still
	// going away) is taken as having stopped: its condition says what blocks
	// it, which does not say it may act, and the records it gives up are
	// released, so a waiter acts for a key while it still does.
	RequeuedStopTakenAsDone Name = "RequeuedStopTakenAsDone"
	// InvalidSpecNeverTold: a pass that cannot compute the object's keys
	// (an invalid spec) parks it as one that never acted: its reconciler is
	// not told to stop, and its condition says InvalidKey, which does not
	// say it may act, while its workloads of the keys it held still run.
	InvalidSpecNeverTold Name = "InvalidSpecNeverTold"
	// RawKeyCompared: whether an object still names a key, in the check a
	// waiter makes of each object that may act for it, compares the key as
	// the object's keys function gave it (its spec's spelling) with the
	// normalized key asked about: under a key normalizer, a holder Claimed
	// for "Store-1" is judged to no longer name "store-1", and a waiter
	// acts beside it.
	RawKeyCompared Name = "RawKeyCompared"
	// UnseenHolderForgotten: a pass that finds its object missing from the
	// manager's cache forgets every holder the process remembers under its
	// name at once, without the uncached read that finds the object gone:
	// in a label-sharded operator, every event of a record asks each
	// process to reconcile the holder it names, and a process whose cache
	// holds only its own shard's objects forgets the other shard's holder
	// while it acts; a waiter of its shard woken by the record's deletion
	// from outside then finds no object that may act for the key, and acts
	// beside it.
	UnseenHolderForgotten Name = "UnseenHolderForgotten"
	// PartialCacheTrusted: under claimmw.WithPartialCache, the check an
	// object makes before it starts acting for a key asks only the objects
	// the manager's cache shows and the holders the process remembers, as
	// without the option: a waiter of a label-sharded operator whose
	// process restarted after the key's record was deleted from outside
	// remembers no holder of the other shard, and acts beside it.
	PartialCacheTrusted Name = "PartialCacheTrusted"
	// UnseenPredecessorNotPolled: an object waiting for a predecessor its
	// process's cache does not show (another shard's) waits for its
	// requeue, as if that predecessor's condition change would wake it: no
	// event of that object reaches the process, and the waiter waits on
	// after the predecessor stopped.
	UnseenPredecessorNotPolled Name = "UnseenPredecessorNotPolled"
	// UnconfirmedClaimTrusted: an object whose condition says Claimed for
	// exactly the keys it names, and which holds their records, counts as
	// acting whether or not a pass of this process confirmed it: a Claimed
	// written before its pass found an earlier holder still acting, whose
	// WaitingForHandover write was refused or whose process stopped before
	// that write, has it act beside that holder in its next pass (or its
	// deletion pass be given the key).
	UnconfirmedClaimTrusted Name = "UnconfirmedClaimTrusted"
	// StoppingNamesCurrentKeys: the Stopping condition of an object told to
	// stop says it acts for the keys it names now, not for those its
	// condition said it acted for: after a key-set edit, an object that
	// still acts for a key it stopped naming says it does not, and a waiter
	// for that key acts beside it once the key's record is gone.
	StoppingNamesCurrentKeys Name = "StoppingNamesCurrentKeys"
	// LaggingConditionTrusted: a parked pass told to release records
	// decides from its cached condition even when the cache has not shown
	// the condition this process last wrote, and is told after a write
	// refused because the condition changed since: a cache still showing
	// that the object acts for a key, after its told pass succeeded and
	// said it acts for the others only (the key's release failed), has it
	// clean up for the key while the API server says it does not act for it.
	LaggingConditionTrusted Name = "LaggingConditionTrusted"
	// FailedReleaseToldAgain: a record whose release failed after the pass
	// that knew it goes succeeded is told again in every later pass, so
	// that while the release keeps failing each pass says the object acts
	// for the key, runs its cleanup and says it stopped: two status writes
	// per pass, each waking the object past the error backoff.
	FailedReleaseToldAgain Name = "FailedReleaseToldAgain"
)

// All lists every mutant, in the order make chaos-mutants runs them.
var All = []Name{
	NotWokenByRecordEvents, LostKeyNeverTold, CachedHeldTrusted, DeletingHolderJudgedGone,
	ReleaseBeforeInner, ReleaseAfterFailedInner, ReleaseWhateverRecord, MustTellInMemory, SteadyPassWrites,
	EmptyKeySetNotActing, CachedConditionTrusted, FreshCacheAssumed, DeletionCachedConditionTrusted,
	RequeuedStopTakenAsDone, InvalidSpecNeverTold, RawKeyCompared, UnseenHolderForgotten,
	PartialCacheTrusted, UnseenPredecessorNotPolled, UnconfirmedClaimTrusted, StoppingNamesCurrentKeys,
	LaggingConditionTrusted, FailedReleaseToldAgain,
}

// Env is the environment variable that switches a mutant on.
const Env = "CHAOS_MUTANT"

// Tag is the build tag without which no mutant can be switched on.
const Tag = "chaosmutants"

// Active returns the mutant switched on, and an error when the environment
// names no known mutant, or names one in a binary built without [Tag].
func Active() (Name, error) {
	if env := os.Getenv(Env); env != "" && !enabled {
		return "", fmt.Errorf("%s=%q: this binary was built without -tags %s, so no mutant is on", Env, env, Tag)
	}
	if active != "" && !slices.Contains(All, active) {
		return active, fmt.Errorf("%s=%q: no such mutant (known: %q)", Env, string(active), All)
	}
	return active, nil
}

// Is reports whether mutant n is switched on.
func Is(n Name) bool { return active != "" && active == n }

// Do calls f when mutant n is switched on: the form every hook in the
// library takes, one statement long.
func Do(n Name, f func()) {
	if active != "" && active == n {
		f()
	}
}
