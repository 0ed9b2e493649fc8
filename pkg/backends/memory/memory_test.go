package memory_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/backendtest"
	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
)

const recordNamespace = "claims"

// harness runs the contract against a fresh Store per case; wrap, when not
// nil, decorates every backend built (to break it on purpose).
func harness(wrap func(backends.Backend) backends.Backend) backendtest.Harness {
	return func(*testing.T) backendtest.Env {
		s := memory.New()
		c := fake.NewClientBuilder().Build() // never read: the store is the liveness
		var serial atomic.Int64
		return backendtest.Env{
			Reader: c,
			Writer: c,
			Config: claim.Config{Namespace: recordNamespace},
			Backend: func(r client.Reader, w client.Client, cfg backends.Config) (backends.Backend, error) {
				b, err := s.Backend(r, w, cfg)
				if err != nil || wrap == nil {
					return b, err
				}
				return wrap(b), nil
			},
			Liveness: s,
			NewKey:   func(*testing.T) string { return fmt.Sprintf("key-%d", serial.Add(1)) },
			NewHolder: func(*testing.T) claim.Holder {
				return newHolder(fmt.Sprintf("holder-%d", serial.Add(1)))
			},
			Kill: func(_ *testing.T, h claim.Holder) { s.Kill(h) },
			SeedForeign: func(_ *testing.T, key string) {
				// A record at the key's name without the holder annotations.
				s.Put(memory.Object{Namespace: recordNamespace, Name: backends.HashName(backends.DefaultPrefix, key),
					Annotations: map[string]string{"example.com/owner": "someone else"}})
			},
		}
	}
}

func newHolder(name string) claim.Holder {
	return claim.Holder{APIVersion: "example.com/v1", Kind: "Widget", Namespace: "apps", Name: name, UID: types.UID("uid-" + name)}
}

// newStore returns a new store and a claimer over it.
func newStore(t *testing.T) (*memory.Store, *claim.Claimer) {
	t.Helper()
	s := memory.New()
	c, err := memory.NewClaimer(s, claim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s, c
}

// mustAcquire acquires key k for h through c and fails t, with format (of
// the error and the reason), unless the outcome has reason.
func mustAcquire(t *testing.T, c *claim.Claimer, h claim.Holder, reason claim.Reason, format string) {
	t.Helper()
	if _, o, err := c.Acquire(context.Background(), "k", h); err != nil || o.Reason != reason {
		t.Fatalf(format, err, o.Reason)
	}
}

func TestMemoryBackendHonoursTheContract(t *testing.T) {
	backendtest.Run(t, harness(nil))
}

// lastWriterWins is the broken backend: its Update writes over whatever is
// stored, whatever version the protocol read. It retries its own read and
// write until they meet, so that it is broken on every run: a broken backend
// that sometimes behaves would make the suite's proof below flaky (it did:
// another writer slipped in between its read and its write).
type lastWriterWins struct{ backends.Backend }

func (b lastWriterWins) Update(ctx context.Context, prev, next claim.Record) (claim.Record, error) {
	for range 100 {
		cur, err := b.Get(ctx, prev.Key)
		if err != nil {
			return claim.Record{}, err
		}
		prev.UID, prev.Version = cur.UID, cur.Version
		got, err := b.Backend.Update(ctx, prev, next)
		if !errors.Is(err, backends.ErrConflict) {
			return got, err
		}
	}
	return claim.Record{}, fmt.Errorf("overwriting %q: %w", prev.Key, backends.ErrConflict)
}

func TestSuiteCatchesABackendThatSkipsTheVersionCheckOnUpdate(t *testing.T) {
	// Given a memory backend whose Update skips the version check
	broken := harness(func(b backends.Backend) backends.Backend { return lastWriterWins{b} })
	tests := []struct {
		caseName string
		want     error
	}{
		{"OneOfConcurrentTakeoversWins", backendtest.ErrDoubleGrant},
		{"StaleRecordConflicts", backendtest.ErrUnfenced},
	}
	for _, tt := range tests {
		t.Run(tt.caseName, func(t *testing.T) {
			c, ok := findCase(tt.caseName)
			if !ok {
				t.Fatalf("the suite has no case %q", tt.caseName)
			}
			// When the suite's case runs against it
			err := backendtest.Check(t, broken, c)
			// Then the case fails, reporting what went wrong
			if !errors.Is(err, tt.want) {
				t.Fatalf("case %s against a backend without version check: got %v, want an error wrapping %q", tt.caseName, err, tt.want)
			}
			t.Logf("the suite reported: %v", err)
		})
	}
}

func findCase(name string) (backendtest.Case, bool) {
	for _, c := range backendtest.Cases() {
		if c.Name == name {
			return c, true
		}
	}
	return backendtest.Case{}, false
}

func TestVersionsAreSharedAcrossKeysAndUIDsAreNewPerCreate(t *testing.T) {
	ctx := context.Background()
	// Given a store and a claimer
	_, c := newStore(t)
	a, b := newHolder("a"), newHolder("b")
	// When key x is granted, key y is granted, x is released and granted again
	var got []claim.Record
	for _, step := range []struct {
		key    string
		holder claim.Holder
	}{{"x", a}, {"y", b}, {"x", b}} {
		if err := c.Release(ctx, a); err != nil {
			t.Fatal(err)
		}
		_, o, err := c.Acquire(ctx, step.key, step.holder)
		if err != nil || o.Reason != claim.ReasonAcquired {
			t.Fatalf("acquiring %s for %s: %v %s", step.key, step.holder, err, o.Reason)
		}
		got = append(got, o.Record)
	}
	// Then versions count every write of the store, tokens are the grants'
	// versions, and the re-created record of x has a new UID
	type stamp struct {
		Version string
		Token   claim.Token
	}
	var stamps []stamp
	for _, r := range got {
		stamps = append(stamps, stamp{r.Version, r.Token})
	}
	want := []stamp{{"1", "1"}, {"2", "2"}, {"3", "3"}}
	if diff := cmp.Diff(want, stamps); diff != "" {
		t.Errorf("versions and tokens (-want +got):\n%s", diff)
	}
	if got[0].UID == got[2].UID {
		t.Errorf("re-created record of x kept UID %s", got[0].UID)
	}
}

func TestStaleReadsNeverGrantASecondHolder(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		stale func(*memory.Store)
		fresh func(*memory.Store)
	}{
		{"reads lag one write", func(s *memory.Store) { s.SetLag(1) }, func(s *memory.Store) { s.SetLag(0) }},
		{"reads are frozen", (*memory.Store).Freeze, (*memory.Store).Unfreeze},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given reads that lag behind writes, and a key granted to A
			s, c := newStore(t)
			a, b := newHolder("a"), newHolder("b")
			tt.stale(s)
			mustAcquire(t, c, a, claim.ReasonAcquired, "acquiring for A: %v %s")
			// When B, whose reads still show the key free, acquires it
			_, o, err := c.Acquire(ctx, "k", b)
			// Then every create B tries is refused: B is not granted
			if !errors.Is(err, claim.ErrRaced) || o.Granted() {
				t.Fatalf("B on a stale read: reason %s err %v, want ErrRaced and no grant", o.Reason, err)
			}
			// And once reads catch up B is told A holds the key
			tt.fresh(s)
			_, o, err = c.Acquire(ctx, "k", b)
			if err != nil || o.Reason != claim.ReasonHeldElsewhere || !o.Holder.Is(a) {
				t.Fatalf("B on a fresh read: reason %s holder %s err %v, want HeldElsewhere naming A", o.Reason, o.Holder, err)
			}
		})
	}
}

func TestTakeoverJudgedOnAStaleReadIsRefused(t *testing.T) {
	ctx := context.Background()
	// Given a key held by A, reads frozen on A's record, and A dead
	s, c := newStore(t)
	a, b, cc := newHolder("a"), newHolder("b"), newHolder("c")
	mustAcquire(t, c, a, claim.ReasonAcquired, "acquiring for A: %v %s")
	s.Freeze()
	s.Kill(a)
	// And B took the key over (its read was still current)
	mustAcquire(t, c, b, claim.ReasonTakenOver, "taking over for B: %v %s")
	// When C, whose reads still show A, takes the key over
	_, o, err := c.Acquire(ctx, "k", cc)
	// Then the takeover is refused with ErrConflict and B keeps the key
	if !errors.Is(err, backends.ErrConflict) || o.Granted() {
		t.Fatalf("C on a stale read: reason %s err %v, want ErrConflict and no grant", o.Reason, err)
	}
	s.Unfreeze()
	if ok, err := c.Holds(ctx, "k", b); err != nil || !ok {
		t.Fatalf("Holds(k, B) = %t, %v; want true", ok, err)
	}
}

func TestOutOfBandWritesLookLikeAnotherClient(t *testing.T) {
	ctx := context.Background()
	// Given a key held by A
	s, c := newStore(t)
	a := newHolder("a")
	_, o, err := c.Acquire(ctx, "k", a)
	if err != nil {
		t.Fatal(err)
	}
	// When someone edits the record's labels out of band
	mutated, ok := s.Mutate(o.Record.Ref, func(obj *memory.Object) { obj.Labels["team"] = "storage" })
	if !ok {
		t.Fatalf("record %s not found", o.Record.Ref)
	}
	// Then the version rose, the UID stayed, and A still holds the key with
	// the grant's token (the version of the edit is not a grant)
	if mutated.UID != o.Record.UID || mutated.Version == o.Record.Version {
		t.Errorf("mutated record: uid %s version %s, was uid %s version %s", mutated.UID, mutated.Version, o.Record.UID, o.Record.Version)
	}
	_, again, err := c.Acquire(ctx, "k", a)
	if err != nil || again.Reason != claim.ReasonHeld {
		t.Fatalf("re-entry after the edit: %v %s", err, again.Reason)
	}
	// The memory store stamps no token annotation, so the token follows the
	// version, as on the annotation backend.
	if c, _ := again.Token.Compare(o.Token); c <= 0 {
		t.Errorf("token after an out-of-band write = %s, want newer than %s", again.Token, o.Token)
	}
	// And a holder from a typed object gets its kind from the scheme
	h, err := c.HolderOf(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", UID: "u"}})
	if err != nil || h.Kind != "ConfigMap" || h.APIVersion != "v1" {
		t.Errorf("HolderOf(ConfigMap) = %+v, %v; want kind ConfigMap v1", h, err)
	}
}
