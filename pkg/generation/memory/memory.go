// Package memory is an in-memory generation.Backend for unit tests of code
// that uses the generation contract. State lives in a [Store] in this
// process and vanishes with it, so it can never coordinate two processes;
// use generation.New against a cluster for that.
//
// It decides every request with generation.Decide, as the Kubernetes
// backend does, and judges expiry with a generation.Observer on its clock,
// so tests on a fake clock see the Kubernetes backend's behaviour: a
// contender takes an owner over once it has itself observed the claim
// unchanged for the owner's TTL. Several Backends over one Store (see
// [WithStore]) behave as several processes sharing one API server; a new
// Backend over a Store is a restarted process: it remembers nothing but
// what the Store holds.
package memory

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/ocf-claim/claim/pkg/generation"
)

// Store is the shared state of Backends: claim records and generations, and
// one version counter for every write. Its zero value is not usable; call
// NewStore.
type Store struct {
	mu       sync.Mutex
	claims   map[string]generation.StoredClaim
	gens     map[string]generation.Generation
	version  uint64
	watchers map[string]map[*watcher]struct{}
}

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{claims: map[string]generation.StoredClaim{}, gens: map[string]generation.Generation{}, watchers: map[string]map[*watcher]struct{}{}}
}

// Option configures New.
type Option func(*Backend)

// WithClock sets the clock every time is read from. Default:
// generation.RealClock. A nil clock keeps the default.
func WithClock(c generation.Clock) Option {
	return func(b *Backend) {
		if c != nil {
			b.clock = c
		}
	}
}

// WithStore makes the Backend share s with other Backends. Default: a new
// Store of its own. A nil store keeps the default.
func WithStore(s *Store) Option {
	return func(b *Backend) {
		if s != nil {
			b.store = s
		}
	}
}

// Backend is an in-memory generation.Backend. It is safe for concurrent
// use.
type Backend struct {
	store *Store
	clock generation.Clock
	obs   generation.Observer

	mu     sync.Mutex
	closed bool
	mine   map[*watcher]struct{}
}

var _ generation.Backend = (*Backend)(nil)

// New returns a Backend.
func New(opts ...Option) *Backend {
	b := &Backend{clock: generation.RealClock, mine: map[*watcher]struct{}{}}
	for _, o := range opts {
		o(b)
	}
	if b.store == nil {
		b.store = NewStore()
	}
	return b
}

// Store returns the Store the Backend uses, to open another Backend over it
// (a second process, or this one restarted).
func (b *Backend) Store() *Store { return b.store }

func (b *Backend) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", generation.ErrBackend, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("%w: backend closed", generation.ErrBackend)
	}
	return nil
}

// RegisterGeneration implements generation.Backend.
func (b *Backend) RegisterGeneration(ctx context.Context, gen generation.Generation) error {
	return b.writeGeneration(ctx, "registering", gen, generation.DecideRegister)
}

// UpdateGeneration implements generation.Backend.
func (b *Backend) UpdateGeneration(ctx context.Context, gen generation.Generation) error {
	return b.writeGeneration(ctx, "updating", gen, generation.DecideUpdate)
}

// writeGeneration decides gen against the stored generation of its ID and
// stores the decision (nothing, when decide returns none), all under the
// store's lock, as mutate does for claims.
func (b *Backend) writeGeneration(ctx context.Context, verb string, gen generation.Generation,
	decide func(cur *generation.Generation, gen generation.Generation, now time.Time) (*generation.Generation, error)) error {
	if err := b.check(ctx); err != nil {
		return fmt.Errorf("%s generation %q: %w", verb, gen.ID, err)
	}
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	var cur *generation.Generation
	if g, ok := s.gens[gen.ID]; ok {
		cur = &g
	}
	next, err := decide(cur, gen, b.clock.Now())
	if err != nil {
		return fmt.Errorf("%s generation %q: %w", verb, gen.ID, err)
	}
	if next != nil {
		s.gens[gen.ID] = *next
	}
	return nil
}

// GetGeneration implements generation.Backend.
func (b *Backend) GetGeneration(ctx context.Context, id string) (*generation.Generation, error) {
	if err := b.check(ctx); err != nil {
		return nil, fmt.Errorf("getting generation %q: %w", id, err)
	}
	if err := generation.ValidateGenerationID(id); err != nil {
		return nil, fmt.Errorf("getting generation %q: %w", id, err)
	}
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.gens[id]
	if !ok {
		return nil, fmt.Errorf("getting generation %q: %w", id, generation.ErrGenerationNotFound)
	}
	return &g, nil
}

// GetClaim implements generation.Backend.
func (b *Backend) GetClaim(ctx context.Context, name string) (*generation.ClaimRecord, error) {
	if err := b.check(ctx); err != nil {
		return nil, fmt.Errorf("getting claim %q: %w", name, err)
	}
	if err := generation.ValidateClaimName(name); err != nil {
		return nil, fmt.Errorf("getting claim %q: %w", name, err)
	}
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.claims[name]
	if !ok {
		return nil, fmt.Errorf("getting claim %q: %w", name, generation.ErrClaimNotFound)
	}
	b.obs.Observe(c.Record, c.TTL, b.clock.Now())
	rec := c.Record
	return &rec, nil
}

// AcquireClaim implements generation.Backend.
func (b *Backend) AcquireClaim(ctx context.Context, req generation.AcquireRequest) (*generation.ClaimRecord, error) {
	return b.mutate(ctx, "acquiring", req)
}

// RenewClaim implements generation.Backend.
func (b *Backend) RenewClaim(ctx context.Context, req generation.RenewRequest) (*generation.ClaimRecord, error) {
	return b.mutate(ctx, "renewing", req)
}

// PrepareTransfer implements generation.Backend.
func (b *Backend) PrepareTransfer(ctx context.Context, req generation.TransferRequest) (*generation.ClaimRecord, error) {
	return b.mutate(ctx, "preparing transfer of", req)
}

// CommitTransfer implements generation.Backend.
func (b *Backend) CommitTransfer(ctx context.Context, req generation.CommitRequest) (*generation.ClaimRecord, error) {
	return b.mutate(ctx, "committing transfer of", req)
}

// AbortTransfer implements generation.Backend.
func (b *Backend) AbortTransfer(ctx context.Context, req generation.AbortRequest) (*generation.ClaimRecord, error) {
	return b.mutate(ctx, "aborting transfer of", req)
}

// ReleaseClaim implements generation.Backend.
func (b *Backend) ReleaseClaim(ctx context.Context, req generation.ReleaseRequest) error {
	_, err := b.mutate(ctx, "releasing", req)
	return err
}

// mutate decides req against the stored claim and stores the decision, all
// under the store's lock: the in-memory equivalent of a read and a write
// conditional on the version read.
func (b *Backend) mutate(ctx context.Context, verb string, req generation.Request) (*generation.ClaimRecord, error) {
	name := generation.ClaimName(req)
	if err := b.check(ctx); err != nil {
		return nil, fmt.Errorf("%s claim %q: %w", verb, name, err)
	}
	if err := generation.Validate(req); err != nil {
		return nil, fmt.Errorf("%s claim %q: %w", verb, name, err)
	}
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	now := b.clock.Now()
	f := generation.Facts{Now: now}
	var cur *generation.StoredClaim
	if c, ok := s.claims[name]; ok {
		cur = &c
		f.Expired = b.obs.Observe(c.Record, c.TTL, now)
	}
	if id := generation.NamedGeneration(req); id != "" {
		if g, ok := s.gens[id]; ok {
			f.Generation = &g
		}
	}
	d, err := generation.Decide(cur, req, f)
	if err != nil {
		return nil, fmt.Errorf("%s claim %q: %w", verb, name, err)
	}
	if d.Next == nil {
		rec := d.Result
		return &rec, nil
	}
	next := *d.Next
	s.version++
	next.Record.Version = s.version
	// The memory store never deletes a record, so its first grant's token
	// is 1 and every later one counts up from the token kept on the record.
	next.AssignToken(1)
	s.claims[name] = next
	b.obs.Observe(next.Record, next.TTL, now)
	for w := range s.watchers[name] {
		w.push(generation.ClaimEvent{Claim: next.Record, Time: now, Reason: next.Record.Reason})
	}
	rec := next.Record
	return &rec, nil
}

// WatchClaim implements generation.Backend. The channel receives the
// current record as of the call first, when the claim has one, then every
// change made after it in the order the changes were made.
func (b *Backend) WatchClaim(ctx context.Context, name string) (<-chan generation.ClaimEvent, error) {
	if err := b.check(ctx); err != nil {
		return nil, fmt.Errorf("watching claim %q: %w", name, err)
	}
	if err := generation.ValidateClaimName(name); err != nil {
		return nil, fmt.Errorf("watching claim %q: %w", name, err)
	}
	w := &watcher{wake: make(chan struct{}, 1), stop: make(chan struct{})}
	// The watcher is this Backend's before it is the store's, and only
	// while the Backend is open: a Close from now on stops it, and a Close
	// that came first refuses it.
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, fmt.Errorf("watching claim %q: %w: backend closed", name, generation.ErrBackend)
	}
	b.mine[w] = struct{}{}
	b.mu.Unlock()
	s := b.store
	s.mu.Lock()
	if c, ok := s.claims[name]; ok {
		w.push(generation.ClaimEvent{Claim: c.Record, Time: b.clock.Now(), Reason: c.Record.Reason})
	}
	if s.watchers[name] == nil {
		s.watchers[name] = map[*watcher]struct{}{}
	}
	s.watchers[name][w] = struct{}{}
	s.mu.Unlock()

	out := make(chan generation.ClaimEvent)
	go func() {
		defer close(out)
		defer func() {
			s.mu.Lock()
			delete(s.watchers[name], w)
			s.mu.Unlock()
			b.mu.Lock()
			delete(b.mine, w)
			b.mu.Unlock()
		}()
		for {
			ev, ok := w.pop()
			if !ok {
				select {
				case <-ctx.Done():
					return
				case <-w.stop:
					return
				case <-w.wake:
					continue
				}
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			case <-w.stop:
				return
			}
		}
	}()
	return out, nil
}

// Close ends every watch of this Backend and makes its later calls fail
// with ErrBackend. The Store stays usable by other Backends.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	for w := range b.mine {
		close(w.stop)
	}
	b.mine = map[*watcher]struct{}{}
	return nil
}

// watcher queues events without bound, so that a writer holding the
// store's lock never waits for a slow reader.
type watcher struct {
	mu    sync.Mutex
	queue []generation.ClaimEvent
	wake  chan struct{}
	stop  chan struct{}
}

func (w *watcher) push(ev generation.ClaimEvent) {
	w.mu.Lock()
	w.queue = append(w.queue, ev)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *watcher) pop() (generation.ClaimEvent, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queue) == 0 {
		return generation.ClaimEvent{}, false
	}
	ev := w.queue[0]
	w.queue = w.queue[1:]
	return ev, true
}
