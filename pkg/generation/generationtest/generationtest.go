// Package generationtest is the contract every generation.Backend must
// honour, as a suite a backend's own tests run. It is exported so that
// backends outside this module can prove themselves the same way:
//
//	func TestContract(t *testing.T) { generationtest.Run(t, harness) }
//
// Each case drives the backend only through the generation.Backend
// interface, with fake clocks, and checks what the contract promises: one
// owner and ErrClaimHeld for the next; tokens that rise on every grant and
// never fall; a stale release refused with the record unchanged; prepare,
// commit and abort each retried after a lost response with no second
// effect; a hundred concurrent acquirers and one winner; an abort that
// keeps the owner and its token; expiry judged by the observing process's
// clock only, also when the owner's clock is a year off; OperationID replays
// from a new backend object (a restarted process); every change watched in
// order; bad input as named errors.
//
// A Kubernetes-backed backend proves nothing against controller-runtime's
// fake client, which ignores preconditions the way the API server does not;
// run it against a real API server (see the envtest package).
package generationtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/ocf-claim/claim/internal/contractsuite"
	"github.com/ocf-claim/claim/pkg/generation"
)

// Failures a case reports, for errors.Is: a test of a deliberately broken
// backend can check that the suite caught the right thing.
var (
	// ErrDoubleGrant: two generations were granted one claim at once.
	ErrDoubleGrant = errors.New("claim granted to two generations at once")
	// ErrTokenRegressed: a grant's token was not greater than an earlier
	// grant's.
	ErrTokenRegressed = errors.New("fencing token did not rise")
	// ErrSecondEffect: a retried or refused mutation changed the record.
	ErrSecondEffect = errors.New("a retried or refused mutation changed the record")
	// ErrWrongOutcome: a call's result or error is not the one the contract
	// names.
	ErrWrongOutcome = errors.New("wrong outcome")
)

// Env is one isolated world a case runs in.
type Env struct {
	// New returns a new backend object over the case's store, reading time
	// from clk. Every call is a new process: it shares the store with the
	// backends made before (the API server, a memory.Store) and nothing
	// else. The harness closes the backends when the case ends.
	New func(t *testing.T, clk generation.Clock) generation.Backend
}

// Harness builds a fresh Env for one case. It may register cleanups on t.
type Harness func(t *testing.T) Env

// Case is one behaviour of the contract.
type Case struct {
	// Name identifies the case in test output.
	Name string
	run  func(w *world) error
}

// Cases returns every case of the contract, in the order Run runs them.
func Cases() []Case {
	return []Case{
		{"OneOwnerAndClaimHeldForTheNext", oneOwner},
		{"AllowEmptyOnlyRefusesAnOwnedClaim", allowEmptyOnly},
		{"TokensNeverFallOverTenGenerations", tokensRise},
		{"StaleReleaseIsRefusedAndChangesNothing", staleRelease},
		{"PrepareRetriedAfterALostResponseHasNoSecondEffect", prepareRetried},
		{"CommitRetriedAfterALostResponseHasNoSecondEffect", commitRetried},
		{"AbortRetriedAfterALostResponseHasNoSecondEffect", abortRetried},
		{"AbortKeepsOwnershipAndToken", abortKeeps},
		{"TransfersRefuseWhatIsNotPrepared", transferRefusals},
		{"HundredConcurrentAcquirersOneWinnerOnCreateAndOnUpdate", hundredAcquirers},
		{"ExpiryIsJudgedOnTheObserversClock", expiryOnFakeClock},
		{"OperationIDReplaysAfterARestart", replayAfterRestart},
		{"WatchDeliversEveryChangeInOrder", watchOrder},
		{"WatchClosesOnCancelAndOnClose", watchCloses},
		{"BadInputIsANamedError", badInput},
		{"GenerationLifeCycleIsValidatedAndDurable", generationLifeCycle},
	}
}

// Run runs every case of the contract against h, each as a subtest with a
// fresh Env.
func Run(t *testing.T, h Harness) {
	t.Helper()
	contractsuite.Run(t, Cases(), func(c Case) string { return c.Name }, func(t *testing.T, c Case) error { return Check(t, h, c) })
}

// Check runs one case against h and returns what it found wrong, nil when
// the backend honoured the case.
func Check(t *testing.T, h Harness, c Case) error {
	t.Helper()
	return contractsuite.Check(t, c.Name, time.Minute, h, Env.validate, func(ctx context.Context, env Env) error {
		return c.run(&world{t: t, ctx: ctx, env: env, clock: testingclock.NewFakeClock(epoch)})
	})
}

func (e Env) validate() error {
	if e.New == nil {
		return errors.New("generationtest.Env.New is nil")
	}
	return nil
}

// epoch is where the fake clocks start.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// ttl is the TTL of the suite's requests.
const ttl = 10 * time.Second

type world struct {
	t     *testing.T
	ctx   context.Context
	env   Env
	clock *testingclock.FakeClock
	seq   int
}

// backend is a new process on the world's clock.
func (w *world) backend() generation.Backend { return w.backendOn(w.clock) }

func (w *world) backendOn(clk *testingclock.FakeClock) generation.Backend {
	b := w.env.New(w.t, generation.FromClock(clk))
	w.t.Cleanup(func() { _ = b.Close() })
	return b
}

// name returns a unique name with prefix.
func (w *world) name(prefix string) string {
	w.seq++
	return fmt.Sprintf("%s-%d", prefix, w.seq)
}

// generations registers n new generations through b.
func (w *world) generations(b generation.Backend, n int) ([]string, error) {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = w.name("gen")
		if err := b.RegisterGeneration(w.ctx, generation.Generation{ID: ids[i], Service: "payments", Instance: fmt.Sprintf("rs-%d", i)}); err != nil {
			return nil, fmt.Errorf("registering %s: %w", ids[i], err)
		}
	}
	return ids, nil
}

func (w *world) acquire(b generation.Backend, claim, gen string, op generation.OperationID) (*generation.ClaimRecord, error) {
	rec, err := b.AcquireClaim(w.ctx, generation.AcquireRequest{ClaimName: claim, GenerationID: gen, TTL: ttl, OperationID: op})
	if err != nil {
		return nil, fmt.Errorf("acquiring %s for %s: %w", claim, gen, err)
	}
	if rec.OwnerGeneration != gen || rec.Phase != generation.PhaseOwned || rec.FencingToken == 0 {
		return nil, fmt.Errorf("%w: acquiring %s for %s returned owner %q phase %s token %d", ErrWrongOutcome, claim, gen, rec.OwnerGeneration, rec.Phase, rec.FencingToken)
	}
	return rec, nil
}

// get returns the stored record.
func (w *world) get(b generation.Backend, claim string) (*generation.ClaimRecord, error) {
	rec, err := b.GetClaim(w.ctx, claim)
	if err != nil {
		return nil, fmt.Errorf("getting %s: %w", claim, err)
	}
	return rec, nil
}

// unchanged requires the stored record to equal before.
func (w *world) unchanged(b generation.Backend, before *generation.ClaimRecord, after string) error {
	now, err := w.get(b, before.Name)
	if err != nil {
		return err
	}
	if !sameRecord(*now, *before) {
		return fmt.Errorf("%w: after %s the record is\n%+v\nwas\n%+v", ErrSecondEffect, after, *now, *before)
	}
	return nil
}

// sameRecord compares records with times compared as instants.
func sameRecord(a, b generation.ClaimRecord) bool {
	ta := []time.Time{a.AcquiredAt, a.ExpiresAt, a.LastHeartbeat}
	tb := []time.Time{b.AcquiredAt, b.ExpiresAt, b.LastHeartbeat}
	for i := range ta {
		if !ta[i].Equal(tb[i]) {
			return false
		}
	}
	a.AcquiredAt, a.ExpiresAt, a.LastHeartbeat = time.Time{}, time.Time{}, time.Time{}
	b.AcquiredAt, b.ExpiresAt, b.LastHeartbeat = time.Time{}, time.Time{}, time.Time{}
	return a == b
}

// sameOutcome compares a replayed record with the first one, ignoring
// Version, which a replay leaves zero.
func sameOutcome(a, b generation.ClaimRecord) bool {
	a.Version, b.Version = 0, 0
	return sameRecord(a, b)
}

// wantErr requires err to match every one of targets.
func wantErr(what string, err error, targets ...error) error {
	if err == nil {
		return fmt.Errorf("%w: %s succeeded, want %v", ErrWrongOutcome, what, targets)
	}
	for _, target := range targets {
		if !errors.Is(err, target) {
			return fmt.Errorf("%w: %s: error %q does not match %q", ErrWrongOutcome, what, err, target)
		}
	}
	return nil
}
