package generationtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/ocf-claim/claim/pkg/generation"
)

// eventTimeout bounds how long a case waits for a watch event, in real
// time: watches cross a network on real backends.
const eventTimeout = 15 * time.Second

func oneOwner(w *world) error {
	b := w.backend()
	claim, g, first, err := w.owned(b, 2)
	if err != nil {
		return err
	}
	_, err = b.AcquireClaim(w.ctx, generation.AcquireRequest{ClaimName: claim, GenerationID: g[1], TTL: ttl})
	if err := wantErr("acquiring an owned claim", err, generation.ErrClaimHeld); err != nil {
		return errors.Join(ErrDoubleGrant, err)
	}
	again, err := w.acquire(b, claim, g[0], "")
	if err != nil {
		return err
	}
	if again.FencingToken != first.FencingToken {
		return fmt.Errorf("%w: the owner acquiring again got token %d, had %d", ErrWrongOutcome, again.FencingToken, first.FencingToken)
	}
	rec, err := w.get(b, claim)
	if err != nil {
		return err
	}
	if rec.OwnerGeneration != g[0] || rec.FencingToken != first.FencingToken {
		return fmt.Errorf("%w: stored owner %q token %d, want %q %d", ErrWrongOutcome, rec.OwnerGeneration, rec.FencingToken, g[0], first.FencingToken)
	}
	return nil
}

func allowEmptyOnly(w *world) error {
	b := w.backend()
	claim, g, first, err := w.owned(b, 2)
	if err != nil {
		return err
	}
	emptyOnly := generation.AcquireRequest{ClaimName: claim, GenerationID: g[1], TTL: ttl, AllowEmptyOnly: true}
	if err := w.held(b, emptyOnly, "acquiring an owned claim, empty only"); err != nil {
		return err
	}
	// Expired is not empty.
	w.clock.Step(3 * ttl)
	if err := w.held(b, emptyOnly, "acquiring an expired claim, empty only"); err != nil {
		return err
	}
	if err := b.ReleaseClaim(w.ctx, generation.ReleaseRequest{ClaimName: claim, GenerationID: g[0], Token: first.FencingToken}); err != nil {
		return fmt.Errorf("releasing: %w", err)
	}
	rec, err := b.AcquireClaim(w.ctx, emptyOnly)
	if err != nil {
		return fmt.Errorf("acquiring a released claim, empty only: %w", err)
	}
	if rec.FencingToken <= first.FencingToken {
		return fmt.Errorf("%w: token %d after %d", ErrTokenRegressed, rec.FencingToken, first.FencingToken)
	}
	return nil
}

func tokensRise(w *world) error {
	g, err := w.generations(w.backend(), 10)
	if err != nil {
		return err
	}
	claim := w.name("claim")
	var last generation.FencingToken
	for i, gen := range g {
		// Every generation is a process of its own.
		b := w.backend()
		rec, err := w.acquire(b, claim, gen, "")
		if err != nil {
			return err
		}
		if rec.FencingToken <= last {
			return fmt.Errorf("%w: generation %d got token %d after %d", ErrTokenRegressed, i, rec.FencingToken, last)
		}
		last = rec.FencingToken
		if err := b.ReleaseClaim(w.ctx, generation.ReleaseRequest{ClaimName: claim, GenerationID: gen, Token: last}); err != nil {
			return fmt.Errorf("releasing for generation %d: %w", i, err)
		}
		stored, err := w.get(b, claim)
		if err != nil {
			return err
		}
		if stored.Phase != generation.PhaseUnowned || stored.OwnerGeneration != "" || stored.FencingToken < last {
			return fmt.Errorf("%w: after release the record is phase %s owner %q token %d (last grant %d)", ErrWrongOutcome, stored.Phase, stored.OwnerGeneration, stored.FencingToken, last)
		}
	}
	return nil
}

func staleRelease(w *world) error {
	b := w.backend()
	claim, g, old, err := w.owned(b, 2)
	if err != nil {
		return err
	}
	if err := b.ReleaseClaim(w.ctx, generation.ReleaseRequest{ClaimName: claim, GenerationID: g[0], Token: old.FencingToken}); err != nil {
		return fmt.Errorf("releasing: %w", err)
	}
	newer, err := w.acquire(b, claim, g[1], "")
	if err != nil {
		return err
	}
	// The former owner, partitioned, releases with its old token.
	err = b.ReleaseClaim(w.ctx, generation.ReleaseRequest{ClaimName: claim, GenerationID: g[0], Token: old.FencingToken})
	if err := wantErr("releasing with a stale token", err, generation.ErrStaleToken); err != nil {
		return err
	}
	if err := w.unchanged(b, newer, "a stale release"); err != nil {
		return err
	}
	err = b.ReleaseClaim(w.ctx, generation.ReleaseRequest{ClaimName: claim, GenerationID: g[0], Token: newer.FencingToken})
	if err := wantErr("releasing another owner's claim with its token", err, generation.ErrNotOwner); err != nil {
		return err
	}
	return w.unchanged(b, newer, "a release by a non-owner")
}

// owned registers n generations through b and has g[0] acquire a new claim.
func (w *world) owned(b generation.Backend, n int) (claim string, g []string, owned *generation.ClaimRecord, err error) {
	g, err = w.generations(b, n)
	if err != nil {
		return "", nil, nil, err
	}
	claim = w.name("claim")
	owned, err = w.acquire(b, claim, g[0], "")
	return claim, g, owned, err
}

// transfer sets up g[0] owning a claim and g[1] and g[2] registered.
func (w *world) transfer(b generation.Backend) (claim string, g []string, owned *generation.ClaimRecord, err error) {
	return w.owned(b, 3)
}

// prepared sets up g[0] owning a claim with a transfer to g[1] prepared.
func (w *world) prepared(b generation.Backend) (claim string, g []string, owned *generation.ClaimRecord, err error) {
	claim, g, owned, err = w.transfer(b)
	if err != nil {
		return "", nil, nil, err
	}
	if _, err := b.PrepareTransfer(w.ctx, generation.TransferRequest{ClaimName: claim, FromGeneration: g[0], ToGeneration: g[1], Token: owned.FencingToken, TTL: ttl}); err != nil {
		return "", nil, nil, fmt.Errorf("preparing: %w", err)
	}
	return claim, g, owned, nil
}

// ownedAfterAbort requires rec, after an abort, owned by owner with its
// token and no successor pending.
func ownedAfterAbort(rec *generation.ClaimRecord, owner string, tok generation.FencingToken) error {
	if rec.OwnerGeneration != owner || rec.FencingToken != tok || rec.Phase != generation.PhaseOwned || rec.PendingSuccessor != "" {
		return fmt.Errorf("%w: after abort: owner %q token %d phase %s successor %q", ErrWrongOutcome, rec.OwnerGeneration, rec.FencingToken, rec.Phase, rec.PendingSuccessor)
	}
	return nil
}

// errOf is the error of a call whose result a case does not look at.
func errOf[T any](_ T, err error) error { return err }

// held requires acquiring req through b (what) to be refused with
// ErrClaimHeld.
func (w *world) held(b generation.Backend, req generation.AcquireRequest, what string) error {
	_, err := b.AcquireClaim(w.ctx, req)
	return wantErr(what, err, generation.ErrClaimHeld)
}

// sameAsFirst requires a retried mutation (what) to have succeeded with the
// first call's outcome.
func sameAsFirst(what string, again, first *generation.ClaimRecord, err error) error {
	if err != nil {
		return fmt.Errorf("retrying %s: %w", what, err)
	}
	if !sameOutcome(*again, *first) {
		return fmt.Errorf("%w: the retried %s returned\n%+v\nthe first stored\n%+v", ErrWrongOutcome, what, *again, *first)
	}
	return nil
}

func prepareRetried(w *world) error {
	b := w.backend()
	claim, g, owned, err := w.transfer(b)
	if err != nil {
		return err
	}
	req := generation.TransferRequest{ClaimName: claim, FromGeneration: g[0], ToGeneration: g[1], Token: owned.FencingToken, TTL: ttl, OperationID: "prepare-1"}
	// The response of the first prepare is lost.
	_, _ = b.PrepareTransfer(w.ctx, req)
	first, err := w.get(b, claim)
	if err != nil {
		return err
	}
	if first.Phase != generation.PhaseReserved || first.PendingSuccessor != g[1] || first.FencingToken != owned.FencingToken {
		return fmt.Errorf("%w: after prepare: phase %s successor %q token %d, want reserved for %q, token %d", ErrWrongOutcome, first.Phase, first.PendingSuccessor, first.FencingToken, g[1], owned.FencingToken)
	}
	w.clock.Step(time.Second)
	again, err := b.PrepareTransfer(w.ctx, req)
	if err := sameAsFirst("prepare", again, first, err); err != nil {
		return err
	}
	return w.unchanged(b, first, "a retried prepare")
}

func commitRetried(w *world) error {
	b := w.backend()
	claim, g, owned, err := w.prepared(b)
	if err != nil {
		return err
	}
	req := generation.CommitRequest{ClaimName: claim, FromGeneration: g[0], ToGeneration: g[1], ExpectedToken: owned.FencingToken, TTL: ttl, OperationID: "commit-1"}
	_, _ = b.CommitTransfer(w.ctx, req)
	first, err := w.get(b, claim)
	if err != nil {
		return err
	}
	if first.OwnerGeneration != g[1] || first.FencingToken <= owned.FencingToken || first.Phase != generation.PhaseOwned || first.PreviousOwner != g[0] {
		return fmt.Errorf("%w: after commit: owner %q token %d phase %s previous %q", ErrWrongOutcome, first.OwnerGeneration, first.FencingToken, first.Phase, first.PreviousOwner)
	}
	// The successor renews before the caller's retry arrives.
	w.clock.Step(time.Second)
	renewed, err := b.RenewClaim(w.ctx, generation.RenewRequest{ClaimName: claim, GenerationID: g[1], Token: first.FencingToken, TTL: ttl})
	if err != nil {
		return fmt.Errorf("renewing as the successor: %w", err)
	}
	again, err := b.CommitTransfer(w.ctx, req)
	if err := sameAsFirst("commit", again, first, err); err != nil {
		return err
	}
	return w.unchanged(b, renewed, "a retried commit")
}

func abortRetried(w *world) error {
	b := w.backend()
	claim, g, owned, err := w.prepared(b)
	if err != nil {
		return err
	}
	req := generation.AbortRequest{ClaimName: claim, FromGeneration: g[0], ToGeneration: g[1], ExpectedToken: owned.FencingToken, OperationID: "abort-1"}
	_, _ = b.AbortTransfer(w.ctx, req)
	first, err := w.get(b, claim)
	if err != nil {
		return err
	}
	if err := ownedAfterAbort(first, g[0], owned.FencingToken); err != nil {
		return err
	}
	again, err := b.AbortTransfer(w.ctx, req)
	if err := sameAsFirst("abort", again, first, err); err != nil {
		return err
	}
	if err := w.unchanged(b, first, "a retried abort"); err != nil {
		return err
	}
	// Without an OperationID a second abort finds nothing to abort.
	_, err = b.AbortTransfer(w.ctx, generation.AbortRequest{ClaimName: claim, FromGeneration: g[0], ToGeneration: g[1], ExpectedToken: owned.FencingToken})
	return wantErr("aborting an aborted transfer without an operation ID", err, generation.ErrNoTransfer)
}

func abortKeeps(w *world) error {
	b := w.backend()
	claim, g, owned, err := w.prepared(b)
	if err != nil {
		return err
	}
	draining, err := b.RenewClaim(w.ctx, generation.RenewRequest{ClaimName: claim, GenerationID: g[0], Token: owned.FencingToken, TTL: ttl})
	if err != nil {
		return fmt.Errorf("renewing while the transfer is prepared: %w", err)
	}
	if draining.Phase != generation.PhaseDraining || draining.FencingToken != owned.FencingToken {
		return fmt.Errorf("%w: renewing with a transfer prepared: phase %s token %d, want draining, token %d", ErrWrongOutcome, draining.Phase, draining.FencingToken, owned.FencingToken)
	}
	aborted, err := b.AbortTransfer(w.ctx, generation.AbortRequest{ClaimName: claim, FromGeneration: g[0], ToGeneration: g[1], ExpectedToken: owned.FencingToken})
	if err != nil {
		return fmt.Errorf("aborting: %w", err)
	}
	if err := ownedAfterAbort(aborted, g[0], owned.FencingToken); err != nil {
		return err
	}
	if err := w.held(b, generation.AcquireRequest{ClaimName: claim, GenerationID: g[1], TTL: ttl}, "the would-be successor acquiring"); err != nil {
		return err
	}
	if _, err := b.RenewClaim(w.ctx, generation.RenewRequest{ClaimName: claim, GenerationID: g[0], Token: owned.FencingToken, TTL: ttl}); err != nil {
		return fmt.Errorf("%w: the owner renewing with its token after the abort: %w", ErrWrongOutcome, err)
	}
	return nil
}

func transferRefusals(w *world) error {
	b := w.backend()
	claim, g, owned, err := w.transfer(b)
	if err != nil {
		return err
	}
	tok := owned.FencingToken
	type step struct {
		what string
		call func() error
		want []error
	}
	steps := []step{
		{"committing with nothing prepared", func() error {
			return errOf(b.CommitTransfer(w.ctx, generation.CommitRequest{ClaimName: claim, FromGeneration: g[0], ToGeneration: g[1], ExpectedToken: tok, TTL: ttl}))
		}, []error{generation.ErrNoTransfer}},
		{"aborting with nothing prepared", func() error {
			return errOf(b.AbortTransfer(w.ctx, generation.AbortRequest{ClaimName: claim, FromGeneration: g[0], ToGeneration: g[1], ExpectedToken: tok}))
		}, []error{generation.ErrNoTransfer}},
		{"preparing to an unregistered generation", func() error {
			return errOf(b.PrepareTransfer(w.ctx, generation.TransferRequest{ClaimName: claim, FromGeneration: g[0], ToGeneration: "nobody", Token: tok, TTL: ttl}))
		}, []error{generation.ErrGenerationNotFound}},
		{"preparing with a stale token", func() error {
			return errOf(b.PrepareTransfer(w.ctx, generation.TransferRequest{ClaimName: claim, FromGeneration: g[0], ToGeneration: g[1], Token: tok - 1, TTL: ttl}))
		}, []error{generation.ErrStaleToken}},
		{"preparing as a non-owner", func() error {
			return errOf(b.PrepareTransfer(w.ctx, generation.TransferRequest{ClaimName: claim, FromGeneration: g[2], ToGeneration: g[1], Token: tok, TTL: ttl}))
		}, []error{generation.ErrNotOwner}},
	}
	// refused requires every step refused and the record left as before.
	refused := func(before *generation.ClaimRecord, steps ...step) error {
		for _, s := range steps {
			if err := wantErr(s.what, s.call(), s.want...); err != nil {
				return err
			}
			if err := w.unchanged(b, before, s.what); err != nil {
				return err
			}
		}
		return nil
	}
	if err := refused(owned, steps...); err != nil {
		return err
	}
	prepared, err := b.PrepareTransfer(w.ctx, generation.TransferRequest{ClaimName: claim, FromGeneration: g[0], ToGeneration: g[1], Token: tok, TTL: ttl})
	if err != nil {
		return fmt.Errorf("preparing: %w", err)
	}
	if prepared.FencingToken != tok {
		return fmt.Errorf("%w: prepare moved the token from %d to %d", ErrWrongOutcome, tok, prepared.FencingToken)
	}
	return refused(prepared,
		step{"preparing a second transfer", func() error {
			return errOf(b.PrepareTransfer(w.ctx, generation.TransferRequest{ClaimName: claim, FromGeneration: g[0], ToGeneration: g[2], Token: tok, TTL: ttl}))
		}, []error{generation.ErrConcurrentTransfer}},
		step{"committing to another successor", func() error {
			return errOf(b.CommitTransfer(w.ctx, generation.CommitRequest{ClaimName: claim, FromGeneration: g[0], ToGeneration: g[2], ExpectedToken: tok, TTL: ttl}))
		}, []error{generation.ErrConcurrentTransfer}},
		step{"the successor acquiring before the commit", func() error {
			return errOf(b.AcquireClaim(w.ctx, generation.AcquireRequest{ClaimName: claim, GenerationID: g[1], TTL: ttl}))
		}, []error{generation.ErrClaimHeld}},
	)
}

func hundredAcquirers(w *world) error {
	const n, processes = 100, 10
	g, err := w.generations(w.backend(), n)
	if err != nil {
		return err
	}
	bs := make([]generation.Backend, processes)
	for i := range bs {
		bs[i] = w.backend()
	}
	claim := w.name("claim")
	// The first race creates the record; after the winner releases, the
	// second race writes the existing record.
	var last generation.FencingToken
	for round := range 2 {
		win, rec, err := w.race(bs, claim, g)
		if err != nil {
			return fmt.Errorf("race %d: %w", round, err)
		}
		if rec.FencingToken <= last {
			return fmt.Errorf("%w: race %d granted token %d after %d", ErrTokenRegressed, round, rec.FencingToken, last)
		}
		last = rec.FencingToken
		if err := bs[0].ReleaseClaim(w.ctx, generation.ReleaseRequest{ClaimName: claim, GenerationID: g[win], Token: last}); err != nil {
			return fmt.Errorf("releasing after race %d: %w", round, err)
		}
	}
	return nil
}

// race makes every generation of g acquire claim at once, spread over the
// processes bs, and requires exactly one winner, whose index and record it
// returns.
func (w *world) race(bs []generation.Backend, claim string, g []string) (int, *generation.ClaimRecord, error) {
	n := len(g)
	start := make(chan struct{})
	recs := make([]*generation.ClaimRecord, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			recs[i], errs[i] = bs[i%len(bs)].AcquireClaim(w.ctx, generation.AcquireRequest{ClaimName: claim, GenerationID: g[i], TTL: ttl})
		})
	}
	close(start)
	wg.Wait()
	var winners []int
	for i := range n {
		switch {
		case errs[i] == nil:
			winners = append(winners, i)
		case !errors.Is(errs[i], generation.ErrClaimHeld):
			return 0, nil, fmt.Errorf("%w: acquirer %d: %w, want ErrClaimHeld or a grant", ErrWrongOutcome, i, errs[i])
		}
	}
	if len(winners) != 1 {
		return 0, nil, fmt.Errorf("%w: %d of %d concurrent acquirers won: %v", ErrDoubleGrant, len(winners), n, winners)
	}
	win := winners[0]
	rec, err := w.get(bs[0], claim)
	if err != nil {
		return 0, nil, err
	}
	if rec.OwnerGeneration != g[win] || rec.FencingToken != recs[win].FencingToken {
		return 0, nil, fmt.Errorf("%w: stored owner %q token %d, the winner was %q with token %d", ErrDoubleGrant, rec.OwnerGeneration, rec.FencingToken, g[win], recs[win].FencingToken)
	}
	return win, recs[win], nil
}

func expiryOnFakeClock(w *world) error {
	// The owner's clock is a year ahead of the contender's: its ExpiresAt
	// lies a year in the contender's future.
	ahead := testingclock.NewFakeClock(epoch.Add(365 * 24 * time.Hour))
	owner, contender := w.backendOn(ahead), w.backend()
	g, err := w.generations(owner, 2)
	if err != nil {
		return err
	}
	claim := w.name("claim")
	held, err := w.acquire(owner, claim, g[0], "")
	if err != nil {
		return err
	}
	try := generation.AcquireRequest{ClaimName: claim, GenerationID: g[1], TTL: ttl}
	if err := w.held(contender, try, "taking over a claim first seen now"); err != nil {
		return err
	}
	w.clock.Step(ttl - time.Second)
	if err := w.held(contender, try, "taking over a claim seen unchanged for less than its TTL"); err != nil {
		return err
	}
	w.clock.Step(time.Second)
	took, err := contender.AcquireClaim(w.ctx, try)
	if err != nil {
		return fmt.Errorf("%w: taking over a claim seen unchanged for its TTL: %w", ErrWrongOutcome, err)
	}
	if took.OwnerGeneration != g[1] || took.FencingToken <= held.FencingToken || took.Reason != generation.ReasonExpiredTakeover {
		return fmt.Errorf("%w: takeover: owner %q token %d reason %s (former token %d)", ErrWrongOutcome, took.OwnerGeneration, took.FencingToken, took.Reason, held.FencingToken)
	}
	_, err = owner.RenewClaim(w.ctx, generation.RenewRequest{ClaimName: claim, GenerationID: g[0], Token: held.FencingToken, TTL: ttl})
	if err := wantErr("the former owner renewing", err, generation.ErrNotOwner, generation.ErrStaleToken); err != nil {
		return err
	}

	// The owner's clock is a year behind and does not move: its ExpiresAt
	// lies in the past for a process that just started, which must still
	// wait, and its renewals must count although they carry no new time.
	behind := testingclock.NewFakeClock(epoch.Add(-365 * 24 * time.Hour))
	owner = w.backendOn(behind)
	claim = w.name("claim")
	held, err = w.acquire(owner, claim, g[0], "")
	if err != nil {
		return err
	}
	fresh := w.backend()
	try.ClaimName = claim
	if err := w.held(fresh, try, "taking over, by a fresh process, a claim whose ExpiresAt is past"); err != nil {
		return err
	}
	w.clock.Step(ttl - time.Second)
	if _, err := owner.RenewClaim(w.ctx, generation.RenewRequest{ClaimName: claim, GenerationID: g[0], Token: held.FencingToken, TTL: ttl}); err != nil {
		return fmt.Errorf("renewing on a clock that has not moved: %w", err)
	}
	w.clock.Step(2 * time.Second)
	if err := w.held(fresh, try, "taking over a claim renewed since last seen"); err != nil {
		return err
	}
	w.clock.Step(ttl)
	if _, err := fresh.AcquireClaim(w.ctx, try); err != nil {
		return fmt.Errorf("%w: taking over a claim seen unchanged for its TTL: %w", ErrWrongOutcome, err)
	}
	return nil
}

func replayAfterRestart(w *world) error {
	b := w.backend()
	g, err := w.generations(b, 2)
	if err != nil {
		return err
	}
	claim := w.name("claim")
	acq := generation.AcquireRequest{ClaimName: claim, GenerationID: g[0], TTL: ttl, OperationID: "acquire-a"}
	first, err := b.AcquireClaim(w.ctx, acq)
	if err != nil {
		return fmt.Errorf("acquiring: %w", err)
	}
	stored, err := w.get(b, claim)
	if err != nil {
		return err
	}
	w.clock.Step(time.Second)
	// The caller restarts, and so does its backend object.
	b = w.backend()
	again, err := b.AcquireClaim(w.ctx, acq)
	if err != nil {
		return fmt.Errorf("replaying the acquire after a restart: %w", err)
	}
	if !sameOutcome(*again, *first) {
		return fmt.Errorf("%w: replayed acquire returned\n%+v\nfirst\n%+v", ErrWrongOutcome, *again, *first)
	}
	if err := w.unchanged(b, stored, "a replayed acquire"); err != nil {
		return err
	}
	rel := generation.ReleaseRequest{ClaimName: claim, GenerationID: g[0], Token: first.FencingToken, OperationID: "release-a"}
	if err := b.ReleaseClaim(w.ctx, rel); err != nil {
		return fmt.Errorf("releasing: %w", err)
	}
	b = w.backend()
	next, err := w.acquire(b, claim, g[1], "acquire-b")
	if err != nil {
		return err
	}
	b = w.backend()
	if err := b.ReleaseClaim(w.ctx, rel); err != nil {
		return fmt.Errorf("%w: replaying a release after another generation acquired: %w", ErrWrongOutcome, err)
	}
	if err := w.unchanged(b, next, "a replayed release"); err != nil {
		return err
	}
	again, err = b.AcquireClaim(w.ctx, acq)
	if err != nil {
		return fmt.Errorf("replaying the first acquire after the claim moved: %w", err)
	}
	if !sameOutcome(*again, *first) {
		return fmt.Errorf("%w: replayed acquire returned\n%+v\nfirst\n%+v", ErrWrongOutcome, *again, *first)
	}
	if err := w.unchanged(b, next, "a replayed acquire of a claim that moved"); err != nil {
		return err
	}
	reused := acq
	reused.TTL = 2 * ttl
	_, err = b.AcquireClaim(w.ctx, reused)
	if err := wantErr("reusing an operation ID for another request", err, generation.ErrInvalidRequest); err != nil {
		return err
	}
	return w.unchanged(b, next, "an operation ID reused")
}

// receive waits for n events on ch.
func receive(ch <-chan generation.ClaimEvent, n int) ([]generation.ClaimEvent, error) {
	var out []generation.ClaimEvent
	timeout := time.After(eventTimeout)
	for len(out) < n {
		select {
		case ev, ok := <-ch:
			if !ok {
				return out, fmt.Errorf("%w: the watch closed after %d of %d events", ErrWrongOutcome, len(out), n)
			}
			out = append(out, ev)
		case <-timeout:
			return out, fmt.Errorf("%w: %d of %d events within %v", ErrWrongOutcome, len(out), n, eventTimeout)
		}
	}
	return out, nil
}

func watchOrder(w *world) error {
	b := w.backend()
	g, err := w.generations(b, 2)
	if err != nil {
		return err
	}
	claim := w.name("claim")
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	ch, err := b.WatchClaim(ctx, claim)
	if err != nil {
		return fmt.Errorf("watching: %w", err)
	}
	// Another process makes the changes.
	o := w.backend()
	steps := []func() (*generation.ClaimRecord, error){}
	var tok generation.FencingToken
	steps = append(steps,
		func() (*generation.ClaimRecord, error) { return w.acquire(o, claim, g[0], "") },
		func() (*generation.ClaimRecord, error) {
			return o.RenewClaim(w.ctx, generation.RenewRequest{ClaimName: claim, GenerationID: g[0], Token: tok, TTL: ttl})
		},
		func() (*generation.ClaimRecord, error) {
			return o.PrepareTransfer(w.ctx, generation.TransferRequest{ClaimName: claim, FromGeneration: g[0], ToGeneration: g[1], Token: tok, TTL: ttl})
		},
		func() (*generation.ClaimRecord, error) {
			return o.RenewClaim(w.ctx, generation.RenewRequest{ClaimName: claim, GenerationID: g[0], Token: tok, TTL: ttl})
		},
		func() (*generation.ClaimRecord, error) {
			return o.CommitTransfer(w.ctx, generation.CommitRequest{ClaimName: claim, FromGeneration: g[0], ToGeneration: g[1], ExpectedToken: tok, TTL: ttl})
		},
		func() (*generation.ClaimRecord, error) {
			return &generation.ClaimRecord{}, o.ReleaseClaim(w.ctx, generation.ReleaseRequest{ClaimName: claim, GenerationID: g[1], Token: tok})
		},
	)
	want := []generation.TransitionReason{generation.ReasonAcquired, generation.ReasonRenewed, generation.ReasonTransferPrepared,
		generation.ReasonRenewed, generation.ReasonTransferCommitted, generation.ReasonReleased}
	for i, step := range steps {
		w.clock.Step(time.Second)
		rec, err := step()
		if err != nil {
			return fmt.Errorf("step %d (%s): %w", i, want[i], err)
		}
		if rec.FencingToken != 0 {
			tok = rec.FencingToken
		}
	}
	evs, err := receive(ch, len(want))
	if err != nil {
		return err
	}
	var last generation.FencingToken
	for i, ev := range evs {
		if ev.Reason != want[i] || ev.Claim.Reason != want[i] {
			return fmt.Errorf("%w: event %d has reason %s (record %s), want %s; events: %v", ErrWrongOutcome, i, ev.Reason, ev.Claim.Reason, want[i], reasons(evs))
		}
		if ev.Claim.FencingToken < last {
			return fmt.Errorf("%w: event %d token %d after %d", ErrTokenRegressed, i, ev.Claim.FencingToken, last)
		}
		last = ev.Claim.FencingToken
	}
	// A watch of an existing claim starts with its current record.
	late, err := b.WatchClaim(ctx, claim)
	if err != nil {
		return fmt.Errorf("watching again: %w", err)
	}
	evs, err = receive(late, 1)
	if err != nil {
		return err
	}
	if evs[0].Reason != generation.ReasonReleased || evs[0].Claim.FencingToken != last {
		return fmt.Errorf("%w: a new watch started with %s token %d, want the current record (%s, token %d)", ErrWrongOutcome, evs[0].Reason, evs[0].Claim.FencingToken, generation.ReasonReleased, last)
	}
	return nil
}

func reasons(evs []generation.ClaimEvent) []generation.TransitionReason {
	out := make([]generation.TransitionReason, len(evs))
	for i, ev := range evs {
		out[i] = ev.Reason
	}
	return out
}

// closed waits until ch is closed, draining it.
func closed(ch <-chan generation.ClaimEvent, what string) error {
	timeout := time.After(eventTimeout)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return nil
			}
		case <-timeout:
			return fmt.Errorf("%w: the watch was not closed within %v of %s", ErrWrongOutcome, eventTimeout, what)
		}
	}
}

func watchCloses(w *world) error {
	b := w.backend()
	claim := w.name("claim")
	ctx, cancel := context.WithCancel(w.ctx)
	ch, err := b.WatchClaim(ctx, claim)
	if err != nil {
		cancel()
		return fmt.Errorf("watching: %w", err)
	}
	cancel()
	if err := closed(ch, "cancelling its context"); err != nil {
		return err
	}
	ch, err = b.WatchClaim(w.ctx, claim)
	if err != nil {
		return fmt.Errorf("watching: %w", err)
	}
	if err := b.Close(); err != nil {
		return fmt.Errorf("closing: %w", err)
	}
	return closed(ch, "Close")
}

func badInput(w *world) error {
	b := w.backend()
	claim, g, owned, err := w.owned(b, 1)
	if err != nil {
		return err
	}
	tok := owned.FencingToken
	cases := []struct {
		what string
		call func() error
		want error
	}{
		{"acquiring with an empty claim name", func() error {
			return errOf(b.AcquireClaim(w.ctx, generation.AcquireRequest{GenerationID: g[0], TTL: ttl}))
		}, generation.ErrInvalidRequest},
		{"acquiring with an empty generation ID", func() error {
			return errOf(b.AcquireClaim(w.ctx, generation.AcquireRequest{ClaimName: claim, TTL: ttl}))
		}, generation.ErrInvalidRequest},
		{"acquiring with a zero TTL", func() error {
			return errOf(b.AcquireClaim(w.ctx, generation.AcquireRequest{ClaimName: claim, GenerationID: g[0]}))
		}, generation.ErrInvalidRequest},
		{"renewing with a negative TTL", func() error {
			return errOf(b.RenewClaim(w.ctx, generation.RenewRequest{ClaimName: claim, GenerationID: g[0], Token: tok, TTL: -time.Second}))
		}, generation.ErrInvalidRequest},
		{"acquiring for an unknown generation", func() error {
			return errOf(b.AcquireClaim(w.ctx, generation.AcquireRequest{ClaimName: w.name("claim"), GenerationID: "nobody", TTL: ttl}))
		}, generation.ErrGenerationNotFound},
		{"preparing a transfer to itself", func() error {
			return errOf(b.PrepareTransfer(w.ctx, generation.TransferRequest{ClaimName: claim, FromGeneration: g[0], ToGeneration: g[0], Token: tok, TTL: ttl}))
		}, generation.ErrInvalidRequest},
		{"renewing a claim that has no record", func() error {
			return errOf(b.RenewClaim(w.ctx, generation.RenewRequest{ClaimName: w.name("claim"), GenerationID: g[0], Token: 1, TTL: ttl}))
		}, generation.ErrClaimNotFound},
		{"releasing a claim that has no record", func() error {
			return b.ReleaseClaim(w.ctx, generation.ReleaseRequest{ClaimName: w.name("claim"), GenerationID: g[0], Token: 1})
		}, generation.ErrClaimNotFound},
		{"getting a claim that has no record", func() error { return errOf(b.GetClaim(w.ctx, w.name("claim"))) }, generation.ErrClaimNotFound},
		{"getting an unknown generation", func() error { return errOf(b.GetGeneration(w.ctx, "nobody")) }, generation.ErrGenerationNotFound},
		{"registering a generation without an ID", func() error { return b.RegisterGeneration(w.ctx, generation.Generation{Service: "payments"}) }, generation.ErrInvalidRequest},
		{"getting a claim of an empty name", func() error { return errOf(b.GetClaim(w.ctx, "")) }, generation.ErrInvalidRequest},
		{"getting a claim of an oversized name", func() error { return errOf(b.GetClaim(w.ctx, strings.Repeat("x", 1025))) }, generation.ErrInvalidRequest},
		{"getting a generation of an empty ID", func() error { return errOf(b.GetGeneration(w.ctx, "")) }, generation.ErrInvalidRequest},
		{"getting a generation of an oversized ID", func() error { return errOf(b.GetGeneration(w.ctx, strings.Repeat("x", 1025))) }, generation.ErrInvalidRequest},
		{"watching an empty claim name", func() error { return errOf(b.WatchClaim(w.ctx, "")) }, generation.ErrInvalidRequest},
	}
	for _, c := range cases {
		if err := wantErr(c.what, c.call(), c.want); err != nil {
			return err
		}
	}
	return w.unchanged(b, owned, "the bad requests")
}

func generationLifeCycle(w *world) error {
	b := w.backend()
	id := w.name("gen")
	gen := generation.Generation{ID: id, Service: "payments", Instance: "rs-1"}
	if err := b.RegisterGeneration(w.ctx, gen); err != nil {
		return fmt.Errorf("registering: %w", err)
	}
	got, err := b.GetGeneration(w.ctx, id)
	if err != nil {
		return fmt.Errorf("getting: %w", err)
	}
	if got.State != generation.GenerationJoining || !got.StartedAt.Equal(epoch) || got.Service != "payments" || got.Instance != "rs-1" {
		return fmt.Errorf("%w: registered generation %+v, want joining, started %v", ErrWrongOutcome, *got, epoch)
	}
	if err := b.RegisterGeneration(w.ctx, gen); err != nil {
		return fmt.Errorf("%w: registering the same generation again: %w", ErrWrongOutcome, err)
	}
	other := gen
	other.Service = "billing"
	if err := wantErr("registering an ID of another service", b.RegisterGeneration(w.ctx, other), generation.ErrInvalidRequest); err != nil {
		return err
	}
	active := generation.Generation{ID: w.name("gen"), Service: "payments", State: generation.GenerationActive}
	if err := wantErr("registering a generation active", b.RegisterGeneration(w.ctx, active), generation.ErrInvalidRequest); err != nil {
		return err
	}
	for _, s := range []generation.GenerationState{generation.GenerationActive, generation.GenerationDraining, generation.GenerationRetired} {
		w.clock.Step(time.Second)
		if err := b.UpdateGeneration(w.ctx, generation.Generation{ID: id, State: s, Reason: "rollout"}); err != nil {
			return fmt.Errorf("moving to %s: %w", s, err)
		}
	}
	if err := wantErr("reviving a retired generation", b.UpdateGeneration(w.ctx, generation.Generation{ID: id, State: generation.GenerationActive}), generation.ErrInvalidTransition); err != nil {
		return err
	}
	if err := wantErr("updating to an unknown state", b.UpdateGeneration(w.ctx, generation.Generation{ID: id, State: "sleeping"}), generation.ErrInvalidRequest); err != nil {
		return err
	}
	if err := wantErr("updating an unknown generation", b.UpdateGeneration(w.ctx, generation.Generation{ID: "nobody", State: generation.GenerationActive}), generation.ErrGenerationNotFound); err != nil {
		return err
	}
	_, err = b.AcquireClaim(w.ctx, generation.AcquireRequest{ClaimName: w.name("claim"), GenerationID: id, TTL: ttl})
	if err := wantErr("acquiring for a retired generation", err, generation.ErrInvalidTransition); err != nil {
		return err
	}
	// A restarted process finds the generation as it was left.
	got, err = w.backend().GetGeneration(w.ctx, id)
	if err != nil {
		return fmt.Errorf("getting after a restart: %w", err)
	}
	if got.State != generation.GenerationRetired || got.Reason != "rollout" || !got.UpdatedAt.Equal(epoch.Add(3*time.Second)) || !got.StartedAt.Equal(epoch) {
		return fmt.Errorf("%w: after a restart the generation is %+v", ErrWrongOutcome, *got)
	}
	return nil
}
