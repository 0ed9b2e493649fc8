// Package memory is an in-memory backends.Backend for consumers' fast unit
// tests. It is test-only: records live in one process and vanish with it, so
// it can never exclude a second replica of an operator. Use the lease or
// annotation backend in anything that runs against a cluster.
//
// A [Store] behaves like the API server as far as the claim protocol can
// tell: every stored object has a UID (a new one per create) and a numeric
// resourceVersion drawn from one counter shared by every object of the store,
// so tokens compare with backends.Token.Compare and keep rising across delete
// and re-create, as Kubernetes resourceVersions do (KEP-5504). Create fails
// when the object exists; Update and Delete compare the UID and version they
// were given with the stored ones and fail with an error wrapping
// backends.ErrConflict when either differs. Records are stored as a Lease
// would store them (annotations through backends.Annotations, holder labels
// through Config.RecordLabels), so foreign and hash-colliding records behave
// as they do on the Lease backend.
//
// A test can make reads lag behind writes ([Store.SetLag], [Store.Freeze]),
// the way an informer cache lags the API server, to show that conditional
// writes still refuse a second holder when reads are stale. Writes always
// compare against the current state. [Store.Put], [Store.Mutate] and
// [Store.Remove] write out of band, as another client or a person would, to
// seed foreign records or change records under a Claimer.
//
// A Store is also a claim.Liveness over holders that tests declare dead with
// [Store.Kill]; [NewClaimer] uses it by default.
package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
)

// Object is one stored record object: the metadata and spec a Lease backend
// would write, without the Lease. Values returned by a Store are copies.
type Object struct {
	Namespace   string
	Name        string
	UID         types.UID
	Version     string
	Labels      map[string]string
	Annotations map[string]string
	AcquireTime time.Time
	RenewTime   time.Time
	Transitions int32
}

// Ref is the object's namespace/name.
func (o Object) Ref() types.NamespacedName {
	return types.NamespacedName{Namespace: o.Namespace, Name: o.Name}
}

func (o Object) clone() Object {
	o.Labels = maps.Clone(o.Labels)
	o.Annotations = maps.Clone(o.Annotations)
	return o
}

// state is one immutable generation of the store's objects. A write builds
// a new state; a lagging reader keeps an old one.
type state map[types.NamespacedName]Object

// Store holds record objects in memory. Its zero value is not usable; call
// [New]. A Store is safe for concurrent use; every Backend built from it
// shares its objects, as every Claimer of a cluster shares the API server.
type Store struct {
	mu      sync.Mutex
	version uint64 // the last resourceVersion handed out
	uids    uint64 // the last UID serial handed out
	// history holds the current state last and up to lag older ones.
	history []state
	lag     int
	frozen  state // non-nil while reads are frozen
	dead    map[types.UID]bool
}

// New returns an empty Store without read lag, in which every holder is
// alive.
func New() *Store {
	return &Store{history: []state{{}}, dead: map[types.UID]bool{}}
}

// Backend is the backends.Factory of s. It ignores reader and writer:
// records live in s. Config.Namespace is optional and only names the records.
func (s *Store) Backend(_ client.Reader, _ client.Client, cfg backends.Config) (backends.Backend, error) {
	return &backend{store: s, cfg: cfg.WithDefaults()}, nil
}

// NewClaimer returns a Claimer whose records live in s and whose liveness is
// s (every holder alive until [Store.Kill]). The reader and writer claim.New
// requires are an empty controller-runtime fake client with the client-go
// scheme, used only to fill holders' kinds in Claimer.HolderOf; pass
// claim.WithLiveness to judge holders differently.
func NewClaimer(s *Store, cfg claim.Config, opts ...claim.Option) (*claim.Claimer, error) {
	c := fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build()
	base := []claim.Option{claim.WithBackend(s.Backend), claim.WithLiveness(s)}
	return claim.New(c, c, cfg, append(base, opts...)...)
}

// Alive reports whether h is alive: every holder is, until [Store.Kill].
func (s *Store) Alive(_ context.Context, rec backends.Record) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.dead[rec.Holder.UID], nil
}

// Kill makes h dead for [Store.Alive], as if its object were deleted.
func (s *Store) Kill(h backends.Holder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dead[h.UID] = true
}

// Revive makes a killed holder alive again.
func (s *Store) Revive(h backends.Holder) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.dead, h.UID)
}

// SetLag makes reads trail writes by n (n = 0: reads see every write at
// once). Reads see the state n writes old; the store keeps only as many old
// states as the lag in force asked for, so right after the lag is raised
// reads see the oldest state kept (at worst the state of the call) until
// enough writes have been made.
func (s *Store) SetLag(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lag = max(n, 0)
}

// Freeze makes every later read see the store as it is now, until
// [Store.Unfreeze], the way a cache whose watch stalled serves what it had.
func (s *Store) Freeze() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frozen = s.current()
}

// Unfreeze ends [Store.Freeze]; reads see the current state again (less any
// lag set with [Store.SetLag]).
func (s *Store) Unfreeze() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.frozen = nil
}

// Object returns the current object named ref, ignoring any read lag.
func (s *Store) Object(ref types.NamespacedName) (Object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.current()[ref]
	return o.clone(), ok
}

// Objects returns every current object, ignoring any read lag, in no
// particular order.
func (s *Store) Objects() []Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Object, 0, len(s.current()))
	for _, o := range s.current() {
		out = append(out, o.clone())
	}
	return out
}

// Put stores o unconditionally, as an out-of-band writer would: it creates
// the object (with a new UID) when absent and replaces it (keeping its UID)
// when present. o's UID and Version are ignored. It returns the stored
// object. Tests seed foreign records with it.
func (s *Store) Put(o Object) Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.next()
	if old, ok := next[o.Ref()]; ok {
		o.UID = old.UID
	} else {
		o.UID = s.newUID()
	}
	return s.store(next, o)
}

// Mutate changes the current object named ref with change, unconditionally,
// and stores it under a new version, as another client's write would. It
// reports false when no such object exists. change must not alter the
// object's namespace, name or UID; those are restored.
func (s *Store) Mutate(ref types.NamespacedName, change func(*Object)) (Object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.next()
	old, ok := next[ref]
	if !ok {
		return Object{}, false
	}
	o := old.clone()
	change(&o)
	o.Namespace, o.Name, o.UID = old.Namespace, old.Name, old.UID
	return s.store(next, o), true
}

// Remove deletes the object named ref unconditionally and reports whether it
// existed.
func (s *Store) Remove(ref types.NamespacedName) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := s.next()
	if _, ok := next[ref]; !ok {
		return false
	}
	delete(next, ref)
	s.commit(next)
	return true
}

// current is the newest state. s.mu must be held.
func (s *Store) current() state { return s.history[len(s.history)-1] }

// read is the state reads see, after lag and freeze. s.mu must be held.
func (s *Store) read() state {
	if s.frozen != nil {
		return s.frozen
	}
	i := max(len(s.history)-1-s.lag, 0)
	return s.history[i]
}

// next returns a copy of the current state to write into. s.mu must be held.
func (s *Store) next() state { return maps.Clone(s.current()) }

// store stamps o with a new version, puts it into next and commits next.
// s.mu must be held.
func (s *Store) store(next state, o Object) Object {
	s.version++
	o.Version = strconv.FormatUint(s.version, 10)
	o = o.clone()
	next[o.Ref()] = o
	s.commit(next)
	return o.clone()
}

// commit makes next the current state, keeping as many older states as the
// lag may ask for. s.mu must be held.
func (s *Store) commit(next state) {
	s.history = append(s.history, next)
	if keep := s.lag + 1; len(s.history) > keep {
		s.history = append([]state(nil), s.history[len(s.history)-keep:]...)
	}
}

func (s *Store) newUID() types.UID {
	s.uids++
	return types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", s.uids))
}

// backend is one Claimer's view of a Store.
type backend struct {
	store *Store
	cfg   backends.Config
}

func (b *backend) ref(key string) types.NamespacedName {
	return types.NamespacedName{Namespace: b.cfg.Namespace, Name: b.cfg.RecordName(key)}
}

func (b *backend) Get(_ context.Context, key string) (backends.Record, error) {
	ref := b.ref(key)
	b.store.mu.Lock()
	defer b.store.mu.Unlock()
	o, ok := b.store.read()[ref]
	if !ok {
		return backends.Record{Key: key, Ref: ref}, nil
	}
	return Decode(b.cfg, key, o), nil
}

func (b *backend) Create(_ context.Context, _, next backends.Record) (backends.Record, error) {
	o := Encode(b.cfg, next)
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	state := s.next()
	if _, exists := state[o.Ref()]; exists {
		return backends.Record{}, fmt.Errorf("creating record %s: %w: it already exists", o.Ref(), backends.ErrConflict)
	}
	o.UID = s.newUID()
	return Decode(b.cfg, next.Key, s.store(state, o)), nil
}

func (b *backend) Update(_ context.Context, prev, next backends.Record) (backends.Record, error) {
	o := Encode(b.cfg, next)
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	state := s.next()
	if err := precondition(state, o.Ref(), prev); err != nil {
		return backends.Record{}, fmt.Errorf("updating record %s: %w", o.Ref(), err)
	}
	o.UID = prev.UID
	return Decode(b.cfg, next.Key, s.store(state, o)), nil
}

func (b *backend) Delete(_ context.Context, prev backends.Record) error {
	s := b.store
	s.mu.Lock()
	defer s.mu.Unlock()
	state := s.next()
	if _, ok := state[prev.Ref]; !ok {
		return nil
	}
	if err := precondition(state, prev.Ref, prev); err != nil {
		return fmt.Errorf("deleting record %s: %w", prev.Ref, err)
	}
	delete(state, prev.Ref)
	s.commit(state)
	return nil
}

// List lists as the Lease backend does: the objects with the holder's
// selector labels, and those without one of them (and with every label of
// Config.Labels) that name the holder in their annotations.
func (b *backend) List(_ context.Context, holder backends.Holder) ([]backends.Record, error) {
	selector := b.cfg.SelectorLabels(holder)
	lost, err := b.cfg.LostLabelSelectors(holder, b.cfg.Labels)
	if err != nil {
		return nil, fmt.Errorf("listing records of %s: %w", holder, err)
	}
	b.store.mu.Lock()
	defer b.store.mu.Unlock()
	var labelled, unlabelled []backends.Record
	for _, o := range b.store.read() {
		if o.Namespace != b.cfg.Namespace {
			continue
		}
		switch {
		case matches(o.Labels, selector):
			labelled = append(labelled, withTimes(b.cfg.DecodeListed(o.stored()), o))
		case slices.ContainsFunc(lost, func(sel labels.Selector) bool { return sel.Matches(labels.Set(o.Labels)) }):
			unlabelled = append(unlabelled, withTimes(b.cfg.DecodeListed(o.stored()), o))
		}
	}
	return backends.KeepLost(holder, labelled, unlabelled), nil
}

// precondition reports, wrapping backends.ErrConflict, why the object named ref
// in st is not the one prev was read from.
func precondition(st state, ref types.NamespacedName, prev backends.Record) error {
	cur, ok := st[ref]
	switch {
	case !ok:
		return fmt.Errorf("%w: it no longer exists", backends.ErrConflict)
	case cur.UID != prev.UID:
		return fmt.Errorf("%w: UID is %s, was %s when read", backends.ErrConflict, cur.UID, prev.UID)
	case cur.Version != prev.Version:
		return fmt.Errorf("%w: version is %s, was %s when read", backends.ErrConflict, cur.Version, prev.Version)
	}
	return nil
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Encode returns the object that stores rec under cfg, without UID and
// version.
func Encode(cfg backends.Config, rec backends.Record) Object {
	cfg = cfg.WithDefaults()
	o := Object{
		Namespace:   cfg.Namespace,
		Name:        cfg.RecordName(rec.Key),
		Labels:      cfg.RecordLabels(rec.Holder),
		Annotations: cfg.Annotations.Encode(rec),
		AcquireTime: rec.AcquireTime,
		RenewTime:   rec.RenewTime,
		Transitions: rec.Transitions,
	}
	// As the Lease: the renew time has a field of its own.
	delete(o.Annotations, cfg.Annotations.RenewTime)
	return o
}

// Decode reads the record of key from o. An object whose annotations do not
// form a complete record for key is reported Foreign.
func Decode(cfg backends.Config, key string, o Object) backends.Record {
	return withTimes(cfg.DecodeStored(key, o.stored()), o)
}

func (o Object) stored() backends.Stored {
	return backends.Stored{Ref: o.Ref(), UID: o.UID, Version: o.Version, Annotations: o.Annotations, Labels: o.Labels}
}

// withTimes fills the record fields an Object keeps beside its annotations.
func withTimes(rec backends.Record, o Object) backends.Record {
	rec.AcquireTime, rec.RenewTime, rec.Transitions = o.AcquireTime, o.RenewTime, o.Transitions
	return rec
}
