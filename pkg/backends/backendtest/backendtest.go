// Package backendtest is the contract every backends.Backend must honour, as a
// suite a backend's own tests run. It is exported so that backends outside
// this module can prove themselves the same way:
//
//	func TestContract(t *testing.T) { backendtest.Run(t, harness) }
//
// Every case drives the backend through claim.Claimer, as an operator would,
// and checks what the protocol promises on top of it: the first create of a
// free key wins, re-entry writes nothing, a write given a stale record is
// refused with backends.ErrConflict, only a dead holder is taken over and only
// once, a foreign record blocks and survives, the release sweep keeps what it
// is told to and never touches another holder's claim nor a claim of another
// claim set (Config.Set) of the same holder, a release by record deletes the
// record as given (without a read) or, changed since, only while a fresh read
// says it is still the holder's, a holder's listing finds its
// record that lacks its selector label (an older HolderLabels wrote it),
// and the fencing token
// rises on every grant of a key. Races are made deterministic with barriers
// in the protocol's own hooks (claim.Siblings before a create, claim.Liveness
// before a takeover), so every claimant has read the same record before any
// of them writes: a backend that does not compare and swap fails with
// [ErrDoubleGrant] on every run, not once in a while.
//
// The suite proves nothing about a backend run against a store that does not
// enforce preconditions the way the API server does; run Kubernetes-backed
// backends against a real API server (see the envtest package), never against
// controller-runtime's fake client, which ignores UID preconditions.
package backendtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/internal/contractsuite"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
)

// Failures a case reports, for errors.Is: a suite that must catch a broken
// backend can check that it caught the right thing.
var (
	// ErrDoubleGrant: two holders were granted one key at once.
	ErrDoubleGrant = errors.New("key granted to two holders at once")
	// ErrUnfenced: a backend write given a stale record was not refused with
	// backends.ErrConflict.
	ErrUnfenced = errors.New("write given a stale record was not refused")
)

// barrierTimeout bounds how long a claimant waits at a barrier for the
// others, so that a claimant that never arrives (it failed earlier) cannot
// hang the suite.
const barrierTimeout = 20 * time.Second

// Env is one isolated world a case runs in: a store no other case sees, and
// the means to make keys, holders and foreign records in it. Every field is
// required unless its comment says otherwise.
type Env struct {
	// Reader and Writer are given to claim.New for every Claimer of the
	// case. Reader must be uncached.
	Reader client.Reader
	Writer client.Client
	// Config is given to claim.New for every Claimer of the case.
	Config claim.Config
	// Backend is the factory under test.
	Backend backends.Factory
	// Liveness judges the holders NewHolder makes. Optional; default:
	// claim.HolderExists(Reader).
	Liveness claim.Liveness
	// NewKey returns a key no other case uses, ready to be claimed (for a
	// backend that stores records on existing objects, the object exists).
	NewKey func(t *testing.T) string
	// NewHolder returns a new holder that Liveness judges alive.
	NewHolder func(t *testing.T) claim.Holder
	// Kill makes h dead for Liveness, for instance by deleting its object.
	Kill func(t *testing.T, h claim.Holder)
	// SeedForeign stores for key a record that no Claimer wrote, where a
	// Claimer of Config looks for key's record.
	SeedForeign func(t *testing.T, key string)
}

func (e Env) validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		nil  bool
	}{
		{"Reader", e.Reader == nil}, {"Writer", e.Writer == nil}, {"Backend", e.Backend == nil},
		{"NewKey", e.NewKey == nil}, {"NewHolder", e.NewHolder == nil}, {"Kill", e.Kill == nil},
		{"SeedForeign", e.SeedForeign == nil},
	} {
		if f.nil {
			errs = append(errs, fmt.Errorf("backendtest.Env.%s is nil", f.name))
		}
	}
	return errors.Join(errs...)
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
		{"CurrentNamesTheHolder", currentNamesTheHolder},
		{"FirstCreateWins", firstCreateWins},
		{"ReentryIsHeldWithoutAWrite", reentryWithoutWrite},
		{"StaleRecordConflicts", staleRecordConflicts},
		{"TakeoverOnlyOfADeadHolder", takeoverOnlyOfDead},
		{"OneOfConcurrentTakeoversWins", oneTakeoverWins},
		{"ForeignRecordBlocksAndSurvives", foreignBlocks},
		{"ReleaseSweepsAllButKept", sweepWithKeep},
		{"ReleaseOfAnotherHoldersClaimIsANoOp", releaseOthersNoOp},
		{"ReleaseByRecordIsFencedOnTheRecordGiven", releaseFencedOnGiven},
		{"ReleaseTouchesOnlyItsOwnSet", releaseOwnSetOnly},
		{"ListingFindsARecordWithoutItsHolderLabel", listingFindsUnlabelled},
		{"TokensRiseOnEveryGrant", tokensRise},
	}
}

// Run runs every case of the contract against h, each as a subtest with a
// fresh Env.
func Run(t *testing.T, h Harness) {
	t.Helper()
	contractsuite.Run(t, Cases(), func(c Case) string { return c.Name }, func(t *testing.T, c Case) error { return Check(t, h, c) })
}

// Check runs one case against h and returns what it found wrong, nil when
// the backend honoured the case. Setup failures (h's own) fail t. A test of
// a deliberately broken backend uses Check to assert that the suite catches
// it.
func Check(t *testing.T, h Harness, c Case) error {
	t.Helper()
	return contractsuite.Check(t, c.Name, 2*time.Minute, h, Env.validate, func(ctx context.Context, env Env) error {
		return c.run(&world{t: t, ctx: ctx, env: env})
	})
}

// world is one case's Env plus the suite's instruments: a count of every
// write made through the backend or the writer, and the last backend built.
type world struct {
	t      *testing.T
	ctx    context.Context
	env    Env
	writes atomic.Int64
	reads  atomic.Int64

	mu  sync.Mutex
	raw backends.Backend
}

// claimer builds a Claimer over the backend under test whose writes are
// counted. opts come after the suite's own.
func (w *world) claimer(opts ...claim.Option) (*claim.Claimer, error) {
	return w.claimerWith(w.env.Config, opts...)
}

// claimerWith is claimer with another Config, for cases about Claimers
// whose Configs differ.
func (w *world) claimerWith(cfg claim.Config, opts ...claim.Option) (*claim.Claimer, error) {
	factory := func(reader client.Reader, writer client.Client, cfg backends.Config) (backends.Backend, error) {
		b, err := w.env.Backend(reader, writer, cfg)
		if err != nil {
			return nil, err
		}
		w.mu.Lock()
		w.raw = b
		w.mu.Unlock()
		return countingBackend{Backend: b, n: &w.writes, reads: &w.reads}, nil
	}
	base := []claim.Option{claim.WithBackend(factory), claim.WithLiveness(w.liveness())}
	c, err := claim.New(w.env.Reader, countingClient{Client: w.env.Writer, n: &w.writes}, cfg, append(base, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("building claimer: %w", err)
	}
	return c, nil
}

// claimers builds n Claimers, as n processes would have.
func (w *world) claimers(n int) ([]*claim.Claimer, error) {
	out := make([]*claim.Claimer, n)
	for i := range out {
		c, err := w.claimer()
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

func (w *world) liveness() claim.Liveness {
	if w.env.Liveness != nil {
		return w.env.Liveness
	}
	return claim.HolderExists(w.env.Reader)
}

// backend returns the unwrapped backend of the last Claimer built.
func (w *world) backend() backends.Backend {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.raw
}

func (w *world) holders(n int) []claim.Holder {
	out := make([]claim.Holder, n)
	for i := range out {
		out[i] = w.env.NewHolder(w.t)
	}
	return out
}

// acquire calls Acquire and requires the outcome's reason to be want.
func (w *world) acquire(c *claim.Claimer, key string, self claim.Holder, want claim.Reason) (claim.Outcome, error) {
	_, o, err := c.Acquire(w.ctx, key, self)
	if err != nil {
		return o, fmt.Errorf("acquiring %q for %s: %w", key, self, err)
	}
	if o.Reason != want {
		return o, fmt.Errorf("acquiring %q for %s: reason %s (%s), want %s", key, self, o.Reason, o.Message, want)
	}
	return o, nil
}

// heldBy requires key's record to be ours and held by h, and returns it.
func (w *world) heldBy(c *claim.Claimer, key string, h claim.Holder) (claim.Record, error) {
	rec, err := c.Current(w.ctx, key)
	if err != nil {
		return rec, fmt.Errorf("reading the holder of %q: %w", key, err)
	}
	if !rec.Ours() || !rec.Holder.Is(h) {
		return rec, fmt.Errorf("key %q: record %s (exists %t, foreign %q) names %s, want %s", key, rec.Ref, rec.Exists, rec.Foreign, rec.Holder, h)
	}
	return rec, nil
}

// free requires key to have no record.
func (w *world) free(c *claim.Claimer, key string) error {
	rec, err := c.Current(w.ctx, key)
	if err != nil {
		return fmt.Errorf("reading the holder of %q: %w", key, err)
	}
	if rec.Exists {
		return fmt.Errorf("key %q: record %s still names %s (foreign %q), want no record", key, rec.Ref, rec.Holder, rec.Foreign)
	}
	return nil
}

// newer requires token a to be strictly newer than b.
func newer(a, b claim.Token, what string) error {
	c, err := a.Compare(b)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if c <= 0 {
		return fmt.Errorf("%s: token %q is not newer than %q", what, a, b)
	}
	return nil
}

// race runs Acquire for every claimant at once and returns the outcomes in
// claimant order.
func (w *world) race(cs []*claim.Claimer, key string, hs []claim.Holder) ([]claim.Outcome, error) {
	outs := make([]claim.Outcome, len(cs))
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i := range cs {
		wg.Go(func() {
			_, outs[i], errs[i] = cs[i].Acquire(w.ctx, key, hs[i])
			if errs[i] != nil {
				errs[i] = fmt.Errorf("acquiring %q for %s: %w", key, hs[i], errs[i])
			}
		})
	}
	wg.Wait()
	return outs, errors.Join(errs...)
}

// oneWinner requires exactly one granted outcome and every other to be
// HeldElsewhere naming the winner, and returns the winner's index.
func oneWinner(outs []claim.Outcome, hs []claim.Holder) (int, error) {
	winner := -1
	for i, o := range outs {
		if !o.Granted() {
			continue
		}
		if winner >= 0 {
			return -1, fmt.Errorf("%w: %s (%s) and %s (%s)", ErrDoubleGrant, hs[winner], outs[winner].Reason, hs[i], o.Reason)
		}
		winner = i
	}
	if winner < 0 {
		return -1, fmt.Errorf("no claimant was granted the key: %v", reasons(outs))
	}
	for i, o := range outs {
		if i != winner && (o.Reason != claim.ReasonHeldElsewhere || !o.Holder.Is(hs[winner])) {
			return -1, fmt.Errorf("loser %s: reason %s naming %s, want %s naming the winner %s", hs[i], o.Reason, o.Holder, claim.ReasonHeldElsewhere, hs[winner])
		}
	}
	return winner, nil
}

func reasons(outs []claim.Outcome) []claim.Reason {
	out := make([]claim.Reason, len(outs))
	for i, o := range outs {
		out[i] = o.Reason
	}
	return out
}

// barrier holds its first n arrivals until all n have arrived (or
// barrierTimeout passed); later arrivals pass at once.
type barrier struct {
	n       int
	mu      sync.Mutex
	arrived int
	all     chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, all: make(chan struct{})} }

func (b *barrier) wait(ctx context.Context) {
	b.mu.Lock()
	b.arrived++
	if b.arrived == b.n {
		close(b.all)
	}
	b.mu.Unlock()
	select {
	case <-b.all:
	case <-ctx.Done():
	case <-time.After(barrierTimeout):
	}
}

// countingBackend counts every write the protocol asks of the backend, and
// its reads by key.
type countingBackend struct {
	backends.Backend
	n     *atomic.Int64
	reads *atomic.Int64
}

func (b countingBackend) Get(ctx context.Context, key string) (claim.Record, error) {
	b.reads.Add(1)
	return b.Backend.Get(ctx, key)
}

func (b countingBackend) Create(ctx context.Context, prev, next claim.Record) (claim.Record, error) {
	b.n.Add(1)
	return b.Backend.Create(ctx, prev, next)
}

func (b countingBackend) Update(ctx context.Context, prev, next claim.Record) (claim.Record, error) {
	b.n.Add(1)
	return b.Backend.Update(ctx, prev, next)
}

func (b countingBackend) Delete(ctx context.Context, prev claim.Record) error {
	b.n.Add(1)
	return b.Backend.Delete(ctx, prev)
}

// countingClient counts every write a backend makes through the writer's
// object API (subresource writes are not counted), so a backend that writes
// while reading is caught too.
type countingClient struct {
	client.Client
	n *atomic.Int64
}

func (c countingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.n.Add(1)
	return c.Client.Create(ctx, obj, opts...)
}

func (c countingClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.n.Add(1)
	return c.Client.Update(ctx, obj, opts...)
}

func (c countingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	c.n.Add(1)
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c countingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.n.Add(1)
	return c.Client.Apply(ctx, obj, opts...)
}

func (c countingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.n.Add(1)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c countingClient) DeleteAllOf(ctx context.Context, obj client.Object, opts ...client.DeleteAllOfOption) error {
	c.n.Add(1)
	return c.Client.DeleteAllOf(ctx, obj, opts...)
}
