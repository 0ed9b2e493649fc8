package backendtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
)

// currentNamesTheHolder: Claimer.Current is the "who holds my target" read a
// controller that only watches a key makes.
func currentNamesTheHolder(w *world) error {
	// Given a free key and a holder
	key, hs := w.env.NewKey(w.t), w.holders(2)
	c, err := w.claimer()
	if err != nil {
		return err
	}
	if err := w.free(c, key); err != nil {
		return fmt.Errorf("before any grant: %w", err)
	}
	// When the holder acquires it
	o, err := w.acquire(c, key, hs[0], claim.ReasonAcquired)
	if err != nil {
		return err
	}
	// Then a reader with its own Claimer sees the holder and the grant's
	// token, and Holds answers for the holder alone
	reader, err := w.claimer()
	if err != nil {
		return err
	}
	rec, err := w.heldBy(reader, key, hs[0])
	if err != nil {
		return err
	}
	if rec.Token != o.Token || rec.Ref.Name == "" {
		return fmt.Errorf("current record of %q: token %q ref %q, want the grant's token %q and a ref", key, rec.Token, rec.Ref, o.Token)
	}
	// And where the backend says the key's record is, without reading it,
	// is where it is (two Claimers exclude each other on a key exactly when
	// that place is one object)
	if ref, ok := reader.RecordRef(rec.Key); ok && ref != rec.Ref {
		return fmt.Errorf("RecordRef(%q) = %s, but the record is at %s", rec.Key, ref, rec.Ref)
	}
	for i, want := range []bool{true, false} {
		got, err := reader.Holds(w.ctx, key, hs[i])
		if err != nil {
			return fmt.Errorf("asking whether %s holds %q: %w", hs[i], key, err)
		}
		if got != want {
			return fmt.Errorf("Holds(%q, %s) = %t, want %t", key, hs[i], got, want)
		}
	}
	return nil
}

// firstCreateWins: claimants that all read a free key write at once; the
// backend's create lets exactly one through.
func firstCreateWins(w *world) error {
	// Given three claimants that have all read the key as free (the barrier
	// in Siblings holds each one between its read and its create)
	const n = 3
	key, hs := w.env.NewKey(w.t), w.holders(n)
	b := newBarrier(n)
	readFree := claim.WithSiblings(claim.SiblingsFunc(func(ctx context.Context, _ string, _ claim.Holder) ([]claim.Holder, error) {
		b.wait(ctx)
		return nil, nil
	}))
	cs := make([]*claim.Claimer, n)
	for i := range cs {
		c, err := w.claimer(readFree)
		if err != nil {
			return err
		}
		cs[i] = c
	}
	// When they create at once
	outs, err := w.race(cs, key, hs)
	if err != nil {
		return err
	}
	// Then exactly one is granted and the others are told who holds the key
	winner, err := oneWinner(outs, hs)
	if err != nil {
		return err
	}
	if outs[winner].Reason != claim.ReasonAcquired {
		return fmt.Errorf("winner %s: reason %s, want %s", hs[winner], outs[winner].Reason, claim.ReasonAcquired)
	}
	_, err = w.heldBy(cs[0], key, hs[winner])
	return err
}

// reentryWithoutWrite: a steady holder asks every reconcile; that must not
// cost a write.
func reentryWithoutWrite(w *world) error {
	// Given a key held by a holder
	key, h := w.env.NewKey(w.t), w.env.NewHolder(w.t)
	c, err := w.claimer()
	if err != nil {
		return err
	}
	granted, err := w.acquire(c, key, h, claim.ReasonAcquired)
	if err != nil {
		return err
	}
	// When it acquires again and asks whether it holds the key
	before := w.writes.Load()
	again, err := w.acquire(c, key, h, claim.ReasonHeld)
	if err != nil {
		return err
	}
	holds, err := c.Holds(w.ctx, key, h)
	if err != nil {
		return fmt.Errorf("asking whether %s holds %q: %w", h, key, err)
	}
	// Then it holds the key under the grant's token and nothing was written
	if !holds {
		return fmt.Errorf("Holds(%q, %s) = false after re-entry", key, h)
	}
	if again.Token != granted.Token {
		return fmt.Errorf("re-entry token %q, want the grant's %q", again.Token, granted.Token)
	}
	if n := w.writes.Load() - before; n != 0 {
		return fmt.Errorf("re-entry and Holds made %d writes, want none", n)
	}
	return nil
}

// staleRecordConflicts: every backend write is fenced on the record it was
// given; one read before another writer's write is refused.
func staleRecordConflicts(w *world) error {
	// Given a key read free, then granted to A, read again, and taken over
	// by B after A died
	key, hs := w.env.NewKey(w.t), w.holders(3)
	c, err := w.claimer()
	if err != nil {
		return err
	}
	raw := w.backend()
	freeRec, err := raw.Get(w.ctx, key)
	if err != nil {
		return fmt.Errorf("reading %q: %w", key, err)
	}
	if _, err := w.acquire(c, key, hs[0], claim.ReasonAcquired); err != nil {
		return err
	}
	heldRec, err := raw.Get(w.ctx, key)
	if err != nil {
		return fmt.Errorf("reading %q: %w", key, err)
	}
	w.env.Kill(w.t, hs[0])
	if _, err := w.acquire(c, key, hs[1], claim.ReasonTakenOver); err != nil {
		return err
	}
	// When the backend is asked to write with the records read before B's
	// takeover
	next := claim.Record{Key: key, Holder: hs[2], AcquireTime: time.Now()}
	_, createErr := raw.Create(w.ctx, freeRec, next)
	_, updateErr := raw.Update(w.ctx, heldRec, next)
	deleteErr := raw.Delete(w.ctx, heldRec)
	// Then every write is refused with ErrConflict and B still holds the key
	for _, r := range []struct {
		op  string
		err error
	}{{"Create given the free record", createErr}, {"Update given A's record", updateErr}, {"Delete given A's record", deleteErr}} {
		if !errors.Is(r.err, backends.ErrConflict) {
			return fmt.Errorf("%w: %s after B took %q over: got %v, want an error wrapping backends.ErrConflict", ErrUnfenced, r.op, key, errString(r.err))
		}
	}
	_, err = w.heldBy(c, key, hs[1])
	return err
}

// takeoverOnlyOfDead: a live holder keeps its key; a dead one loses it.
func takeoverOnlyOfDead(w *world) error {
	// Given a key held by A
	key, hs := w.env.NewKey(w.t), w.holders(2)
	cs, err := w.claimers(2)
	if err != nil {
		return err
	}
	first, err := w.acquire(cs[0], key, hs[0], claim.ReasonAcquired)
	if err != nil {
		return err
	}
	// When B acquires while A is alive
	before := w.writes.Load()
	o, err := w.acquire(cs[1], key, hs[1], claim.ReasonHeldElsewhere)
	if err != nil {
		return err
	}
	// Then B is told A holds it, and nothing was written
	if !o.Holder.Is(hs[0]) {
		return fmt.Errorf("claimant B was told %s holds %q, want A %s", o.Holder, key, hs[0])
	}
	if n := w.writes.Load() - before; n != 0 {
		return fmt.Errorf("parking behind a live holder made %d writes, want none", n)
	}
	// When A dies and B acquires again
	w.env.Kill(w.t, hs[0])
	o, err = w.acquire(cs[1], key, hs[1], claim.ReasonTakenOver)
	if err != nil {
		return err
	}
	// Then B took it over from A, under a newer token
	if !o.Previous.Is(hs[0]) {
		return fmt.Errorf("takeover names %s as previous holder, want %s", o.Previous, hs[0])
	}
	if err := newer(o.Token, first.Token, "takeover"); err != nil {
		return err
	}
	_, err = w.heldBy(cs[0], key, hs[1])
	return err
}

// oneTakeoverWins: claimants that all judged the same holder dead write at
// once; the version precondition lets exactly one through.
func oneTakeoverWins(w *world) error {
	// Given a key held by A, who died, and two claimants that have both
	// judged A dead before either writes (the barrier in Liveness)
	key, hs := w.env.NewKey(w.t), w.holders(3)
	c, err := w.claimer()
	if err != nil {
		return err
	}
	if _, err := w.acquire(c, key, hs[0], claim.ReasonAcquired); err != nil {
		return err
	}
	w.env.Kill(w.t, hs[0])
	b := newBarrier(2)
	base := w.liveness()
	judged := claim.WithLiveness(claim.LivenessFunc(func(ctx context.Context, rec claim.Record) (bool, error) {
		alive, err := base.Alive(ctx, rec)
		b.wait(ctx)
		return alive, err
	}))
	cs := make([]*claim.Claimer, 2)
	for i := range cs {
		if cs[i], err = w.claimer(judged); err != nil {
			return err
		}
	}
	// When both take over at once
	outs, err := w.race(cs, key, hs[1:])
	if err != nil {
		return err
	}
	// Then exactly one took it over and the other is told who won
	winner, err := oneWinner(outs, hs[1:])
	if err != nil {
		return err
	}
	if outs[winner].Reason != claim.ReasonTakenOver {
		return fmt.Errorf("winner %s: reason %s, want %s", hs[1+winner], outs[winner].Reason, claim.ReasonTakenOver)
	}
	_, err = w.heldBy(c, key, hs[1+winner])
	return err
}

// foreignBlocks: a record the claim did not write is never granted over,
// taken over or released.
func foreignBlocks(w *world) error {
	// Given a key whose record was written by someone else
	key, h := w.env.NewKey(w.t), w.env.NewHolder(w.t)
	w.env.SeedForeign(w.t, key)
	c, err := w.claimer()
	if err != nil {
		return err
	}
	seeded, err := c.Current(w.ctx, key)
	if err != nil {
		return fmt.Errorf("reading %q: %w", key, err)
	}
	if !seeded.Exists || seeded.Foreign == "" {
		return fmt.Errorf("seeded record of %q: exists %t foreign %q, want an existing foreign record", key, seeded.Exists, seeded.Foreign)
	}
	// When a holder acquires it and then releases everything it holds
	before := w.writes.Load()
	if _, err := w.acquire(c, key, h, claim.ReasonForeign); err != nil {
		return err
	}
	if err := c.Release(w.ctx, h); err != nil {
		return fmt.Errorf("releasing %s: %w", h, err)
	}
	// Then nothing was written and the foreign record is as it was
	if n := w.writes.Load() - before; n != 0 {
		return fmt.Errorf("acquire and release against a foreign record made %d writes, want none", n)
	}
	after, err := c.Current(w.ctx, key)
	if err != nil {
		return fmt.Errorf("reading %q: %w", key, err)
	}
	if !after.Exists || after.Foreign == "" || after.UID != seeded.UID || after.Version != seeded.Version {
		return fmt.Errorf("foreign record of %q changed: uid %s version %s foreign %q, was uid %s version %s", key, after.UID, after.Version, after.Foreign, seeded.UID, seeded.Version)
	}
	return nil
}

// sweepWithKeep: Release frees every key of the holder except the kept ones
// and nothing of anyone else.
func sweepWithKeep(w *world) error {
	// Given A holding three keys and B holding a fourth
	keys := []string{w.env.NewKey(w.t), w.env.NewKey(w.t), w.env.NewKey(w.t), w.env.NewKey(w.t)}
	hs := w.holders(2)
	cs, err := w.claimers(2)
	if err != nil {
		return err
	}
	for _, k := range keys[:3] {
		if _, err := w.acquire(cs[0], k, hs[0], claim.ReasonAcquired); err != nil {
			return err
		}
	}
	if _, err := w.acquire(cs[1], keys[3], hs[1], claim.ReasonAcquired); err != nil {
		return err
	}
	// When A releases everything but its second key
	if err := cs[0].Release(w.ctx, hs[0], keys[1]); err != nil {
		return fmt.Errorf("releasing %s keeping %q: %w", hs[0], keys[1], err)
	}
	// Then its first and third keys are free, the kept key is still A's,
	// B's key is still B's, and a freed key can be granted again
	for _, k := range []string{keys[0], keys[2]} {
		if err := w.free(cs[1], k); err != nil {
			return fmt.Errorf("after the sweep: %w", err)
		}
	}
	if _, err := w.heldBy(cs[1], keys[1], hs[0]); err != nil {
		return fmt.Errorf("kept key: %w", err)
	}
	if _, err := w.heldBy(cs[1], keys[3], hs[1]); err != nil {
		return fmt.Errorf("another holder's key: %w", err)
	}
	_, err = w.acquire(cs[1], keys[0], hs[1], claim.ReasonAcquired)
	return err
}

// releaseOthersNoOp: Release is fenced on identity (UID), not on name.
func releaseOthersNoOp(w *world) error {
	// Given a key held by A, another holder B, and an impostor with A's
	// name but another UID (A deleted and re-created, say)
	key, hs := w.env.NewKey(w.t), w.holders(2)
	impostor := hs[0]
	impostor.UID += "-recreated"
	cs, err := w.claimers(2)
	if err != nil {
		return err
	}
	if _, err := w.acquire(cs[0], key, hs[0], claim.ReasonAcquired); err != nil {
		return err
	}
	held, err := w.heldBy(cs[1], key, hs[0])
	if err != nil {
		return err
	}
	// When B and the impostor release everything they hold
	before := w.writes.Load()
	for _, h := range []claim.Holder{hs[1], impostor} {
		if err := cs[1].Release(w.ctx, h); err != nil {
			return fmt.Errorf("releasing %s (uid %s): %w", h, h.UID, err)
		}
	}
	// Then nothing was written and A's record is as it was
	if n := w.writes.Load() - before; n != 0 {
		return fmt.Errorf("releases of holders without claims made %d writes, want none", n)
	}
	after, err := w.heldBy(cs[1], key, hs[0])
	if err != nil {
		return err
	}
	if after.Version != held.Version {
		return fmt.Errorf("record of %q held by A changed from version %s to %s", key, held.Version, after.Version)
	}
	return nil
}

// releaseFencedOnGiven: ReleaseRecords deletes a record given to it (as
// Holdings returned it) only while the stored record is still that one or,
// changed since, is read again and still the holder's; the record of
// another holder since is never touched, and an unchanged one is released
// without a read.
func releaseFencedOnGiven(w *world) error {
	// Given A holds K1, K2 and K3, each record read while A held it
	k1, k2, k3 := w.env.NewKey(w.t), w.env.NewKey(w.t), w.env.NewKey(w.t)
	hs := w.holders(2)
	c, err := w.claimer()
	if err != nil {
		return err
	}
	given := map[string]claim.Record{}
	for _, k := range []string{k1, k2, k3} {
		if _, err := w.acquire(c, k, hs[0], claim.ReasonAcquired); err != nil {
			return err
		}
		if given[k], err = w.heldBy(c, k, hs[0]); err != nil {
			return err
		}
	}
	// And K2's record written again since (A still its holder)
	raw := w.backend()
	if _, err := raw.Update(w.ctx, given[k2], given[k2]); err != nil {
		return fmt.Errorf("writing the record of %q again: %w", k2, err)
	}
	// When A's record of K1, as read, is released
	reads := w.reads.Load()
	released, err := c.ReleaseRecords(w.ctx, hs[0], given[k1])
	if err != nil || !slices.Equal(released, []string{given[k1].Key}) {
		return fmt.Errorf("releasing A's unchanged record of %q: released %q, error %s; want [%q]", k1, released, errString(err), given[k1].Key)
	}
	// Then it is gone, deleted without a read
	if n := w.reads.Load() - reads; n != 0 {
		return fmt.Errorf("releasing A's unchanged record of %q read records %d times, want none", k1, n)
	}
	if err := w.free(c, k1); err != nil {
		return err
	}
	// When A's record of K2, as read before it was written again, is released
	released, err = c.ReleaseRecords(w.ctx, hs[0], given[k2])
	// Then it is read again, still A's, and deleted
	if err != nil || !slices.Equal(released, []string{given[k2].Key}) {
		return fmt.Errorf("releasing A's record of %q written since: released %q, error %s; want [%q]", k2, released, errString(err), given[k2].Key)
	}
	if err := w.free(c, k2); err != nil {
		return err
	}
	// When A dies, B takes K3 over, and A's record of K3, as read, is released
	w.env.Kill(w.t, hs[0])
	if _, err := w.acquire(c, k3, hs[1], claim.ReasonTakenOver); err != nil {
		return err
	}
	taken, err := w.heldBy(c, k3, hs[1])
	if err != nil {
		return err
	}
	released, err = c.ReleaseRecords(w.ctx, hs[0], given[k3])
	// Then nothing is released and B's record is as it was
	if err != nil || len(released) != 0 {
		return fmt.Errorf("%w: releasing A's record of %q after B took it over: released %q, error %s; want nothing", ErrUnfenced, k3, released, errString(err))
	}
	after, err := w.heldBy(c, k3, hs[1])
	if err != nil {
		return fmt.Errorf("%w: %w", ErrUnfenced, err)
	}
	if after.Version != taken.Version {
		return fmt.Errorf("%w: B's record of %q changed from version %s to %s", ErrUnfenced, k3, taken.Version, after.Version)
	}
	return nil
}

// releaseOwnSetOnly: two Claimers of one holder with different claim sets
// (two middlewares on one kind) never release each other's records; a
// record written before sets existed belongs to every set of its holder.
func releaseOwnSetOnly(w *world) error {
	// Given one holder H with key K1 claimed through set "a", key K2 through
	// set "b", and key K3 recorded without a set (an older version wrote it)
	k1, k2, k3 := w.env.NewKey(w.t), w.env.NewKey(w.t), w.env.NewKey(w.t)
	h := w.holders(1)[0]
	cfgA, cfgB := w.env.Config, w.env.Config
	cfgA.Set, cfgB.Set = "a", "b"
	a, err := w.claimerWith(cfgA)
	if err != nil {
		return err
	}
	b, err := w.claimerWith(cfgB)
	if err != nil {
		return err
	}
	if _, err := w.acquire(a, k1, h, claim.ReasonAcquired); err != nil {
		return err
	}
	if _, err := w.acquire(b, k2, h, claim.ReasonAcquired); err != nil {
		return err
	}
	free, err := w.backend().Get(w.ctx, k3)
	if err != nil {
		return fmt.Errorf("reading %q: %w", k3, err)
	}
	if _, err := w.backend().Create(w.ctx, free, claim.Record{Key: k3, Holder: h}); err != nil {
		return fmt.Errorf("writing a record without a set for %q: %w", k3, err)
	}
	// When set "a" lists H's holdings
	got, err := a.Holdings(w.ctx, h)
	if err != nil {
		return fmt.Errorf("listing holdings of set a: %w", err)
	}
	// Then it sees K1 and the set-less K3, never K2
	var keys []string
	for _, r := range got {
		keys = append(keys, r.Key)
	}
	want := []string{k1, k3}
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		return fmt.Errorf("holdings of set a are %q, want %q", keys, want)
	}
	// When set "a" releases H's records outright, and by record
	if err := a.Release(w.ctx, h); err != nil {
		return fmt.Errorf("releasing set a: %w", err)
	}
	k2rec, err := w.heldBy(b, k2, h)
	if err != nil {
		return fmt.Errorf("set b's key after set a's release: %w", err)
	}
	if released, err := a.ReleaseRecords(w.ctx, h, k2rec); err != nil || len(released) != 0 {
		return fmt.Errorf("set a releasing set b's record: released %q, error %s; want nothing", released, errString(err))
	}
	// Then K1 and K3 are free and K2 is still H's, at the same version
	for _, k := range []string{k1, k3} {
		if err := w.free(b, k); err != nil {
			return fmt.Errorf("after set a's release: %w", err)
		}
	}
	after, err := w.heldBy(b, k2, h)
	if err != nil {
		return fmt.Errorf("set b's key: %w", err)
	}
	if after.Version != k2rec.Version || after.Set != "b" {
		return fmt.Errorf("set b's record of %q changed: version %s -> %s, set %q", k2, k2rec.Version, after.Version, after.Set)
	}
	// And set "b" releases its own record by record
	released, err := b.ReleaseRecords(w.ctx, h, after)
	if err != nil || !slices.Equal(released, []string{k2}) {
		return fmt.Errorf("set b releasing its record: released %q, error %s; want [%q]", released, errString(err), k2)
	}
	return w.free(b, k2)
}

// listingFindsUnlabelled: a record that names its holder but lacks the
// holder's selector label (written under an older HolderLabels, or the label
// removed by hand) is still its holder's: the holder's listing finds it,
// Restamp labels it again, and its release sweep frees it; another holder's
// such record is neither listed nor touched.
func listingFindsUnlabelled(w *world) error {
	// Given H holds K1 under an older HolderLabels, whose label is not the
	// current one, and K2 under the current one, and G holds K3 under the
	// older HolderLabels
	k1, k2, k3 := w.env.NewKey(w.t), w.env.NewKey(w.t), w.env.NewKey(w.t)
	hs := w.holders(2)
	older := w.env.Config
	older.HolderLabels = func(h claim.Holder) map[string]string {
		return map[string]string{"example.com/former-holder-uid": string(h.UID)}
	}
	old, err := w.claimerWith(older)
	if err != nil {
		return err
	}
	cur, err := w.claimer()
	if err != nil {
		return err
	}
	for _, a := range []struct {
		c   *claim.Claimer
		key string
		h   claim.Holder
	}{{old, k1, hs[0]}, {cur, k2, hs[0]}, {old, k3, hs[1]}} {
		if _, err := w.acquire(a.c, a.key, a.h, claim.ReasonAcquired); err != nil {
			return err
		}
	}
	// When the current Claimer lists H's holdings
	got, err := cur.Holdings(w.ctx, hs[0])
	if err != nil {
		return fmt.Errorf("listing holdings of %s: %w", hs[0], err)
	}
	// Then it finds K1, unlabelled, and K2, and not G's K3
	want := map[string]bool{k1: true, k2: false}
	if len(got) != len(want) {
		return fmt.Errorf("holdings of %s are %q, want %q and %q", hs[0], keysOfRecords(got), k1, k2)
	}
	for _, r := range got {
		unlabelled, ok := want[r.Key]
		if !ok || r.Unlabelled != unlabelled {
			return fmt.Errorf("holdings of %s: %q unlabelled %t; want %q unlabelled and %q labelled only", hs[0], r.Key, r.Unlabelled, k1, k2)
		}
	}
	// When it stamps K1 with the current labels
	rec := got[slices.IndexFunc(got, func(r claim.Record) bool { return r.Key == k1 })]
	stamped, err := cur.Restamp(w.ctx, hs[0], rec)
	if err != nil {
		return fmt.Errorf("stamping %q: %w", k1, err)
	}
	// Then it is labelled, and still H's at the same token
	if stamped.Unlabelled || !stamped.Holder.Is(hs[0]) || stamped.Token != rec.Token {
		return fmt.Errorf("stamped record of %q: unlabelled %t, holder %s, token %s; want labelled, %s, token %s", k1, stamped.Unlabelled, stamped.Holder, stamped.Token, hs[0], rec.Token)
	}
	// When the current Claimer releases everything H holds
	if err := cur.Release(w.ctx, hs[0]); err != nil {
		return fmt.Errorf("releasing %s: %w", hs[0], err)
	}
	// Then K1 and K2 are free and K3 is still G's
	for _, k := range []string{k1, k2} {
		if err := w.free(cur, k); err != nil {
			return fmt.Errorf("after the sweep: %w", err)
		}
	}
	if _, err := w.heldBy(cur, k3, hs[1]); err != nil {
		return fmt.Errorf("another holder's unlabelled key: %w", err)
	}
	return nil
}

// keysOfRecords returns the keys of recs, in order.
func keysOfRecords(recs []claim.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Key
	}
	return out
}

// tokensRise: every grant of a key carries a token newer than every earlier
// grant's, across takeover and release-and-reacquire.
func tokensRise(w *world) error {
	// Given a key and three holders
	key, hs := w.env.NewKey(w.t), w.holders(3)
	c, err := w.claimer()
	if err != nil {
		return err
	}
	var tokens []claim.Token
	grant := func(h claim.Holder, want claim.Reason) error {
		o, err := w.acquire(c, key, h, want)
		if err != nil {
			return err
		}
		if _, err := backends.ParseToken(o.Token.String()); err != nil {
			return fmt.Errorf("%s grant to %s: %w", want, h, err)
		}
		if len(tokens) > 0 {
			if err := newer(o.Token, tokens[len(tokens)-1], fmt.Sprintf("%s grant %d to %s", want, len(tokens)+1, h)); err != nil {
				return err
			}
		}
		tokens = append(tokens, o.Token)
		return nil
	}
	release := func(h claim.Holder) error {
		if err := c.Release(w.ctx, h); err != nil {
			return fmt.Errorf("releasing %s: %w", h, err)
		}
		return nil
	}
	// When the key is acquired by A, taken over by B after A died, released
	// by B and acquired by C, released by C and acquired by C again
	// Then every grant's token is newer than the one before
	steps := []func() error{
		func() error { return grant(hs[0], claim.ReasonAcquired) },
		func() error { w.env.Kill(w.t, hs[0]); return grant(hs[1], claim.ReasonTakenOver) },
		func() error { return release(hs[1]) },
		func() error { return grant(hs[2], claim.ReasonAcquired) },
		func() error { return release(hs[2]) },
		func() error { return grant(hs[2], claim.ReasonAcquired) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// errString formats a possibly nil error for a failure message.
func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
