package generation_test

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ocf-claim/claim/pkg/generation"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func owned(owner string, token generation.FencingToken) *generation.StoredClaim {
	return &generation.StoredClaim{TTL: 10 * time.Second, Record: generation.ClaimRecord{
		Name: "db", OwnerGeneration: owner, FencingToken: token, Phase: generation.PhaseOwned,
		AcquiredAt: t0, ExpiresAt: t0.Add(10 * time.Second), LastHeartbeat: t0, Reason: generation.ReasonAcquired,
	}}
}

var registered = &generation.Generation{ID: "b", Service: "payments", State: generation.GenerationJoining}

func TestDecideRefusesWithTheNamedError(t *testing.T) {
	maxed := owned("a", math.MaxUint64)
	reserved := owned("a", 7)
	reserved.Record.Phase, reserved.Record.PendingSuccessor = generation.PhaseReserved, "b"
	retired := &generation.Generation{ID: "b", Service: "payments", State: generation.GenerationRetired}
	for _, tc := range []struct {
		name string
		cur  *generation.StoredClaim
		req  generation.Request
		f    generation.Facts
		want error
	}{
		{"a takeover past the last token overflows", maxed, generation.AcquireRequest{ClaimName: "db", GenerationID: "b", TTL: time.Second}, generation.Facts{Now: t0, Expired: true, Generation: registered}, generation.ErrTokenOverflow},
		{"a commit past the last token overflows", func() *generation.StoredClaim {
			c := owned("a", math.MaxUint64)
			c.Record.Phase, c.Record.PendingSuccessor = generation.PhaseReserved, "b"
			return c
		}(), generation.CommitRequest{ClaimName: "db", FromGeneration: "a", ToGeneration: "b", ExpectedToken: math.MaxUint64, TTL: time.Second}, generation.Facts{Now: t0, Generation: registered}, generation.ErrTokenOverflow},
		{"an owner not seen expired is held", owned("a", 7), generation.AcquireRequest{ClaimName: "db", GenerationID: "b", TTL: time.Second}, generation.Facts{Now: t0.Add(time.Hour), Generation: registered}, generation.ErrClaimHeld},
		{"a retired generation acquires nothing", nil, generation.AcquireRequest{ClaimName: "db", GenerationID: "b", TTL: time.Second}, generation.Facts{Now: t0, Generation: retired}, generation.ErrInvalidTransition},
		{"a commit to a retired successor", reserved, generation.CommitRequest{ClaimName: "db", FromGeneration: "a", ToGeneration: "b", ExpectedToken: 7, TTL: time.Second}, generation.Facts{Now: t0, Generation: retired}, generation.ErrInvalidTransition},
		{"a renewal with a newer token than the claim's", owned("a", 7), generation.RenewRequest{ClaimName: "db", GenerationID: "a", Token: 8, TTL: time.Second}, generation.Facts{Now: t0}, generation.ErrStaleToken},
		{"an operation ID longer than a name", owned("a", 7), generation.RenewRequest{ClaimName: "db", GenerationID: "a", Token: 7, TTL: time.Second, OperationID: generation.OperationID(make([]byte, 254))}, generation.Facts{Now: t0}, generation.ErrInvalidRequest},
		{"a claim name that is not UTF-8", nil, generation.AcquireRequest{ClaimName: "\xff", GenerationID: "b", TTL: time.Second}, generation.Facts{Now: t0, Generation: registered}, generation.ErrInvalidRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := generation.Decide(tc.cur, tc.req, tc.f)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Decide = %+v, %v; want an error matching %v", d, err, tc.want)
			}
		})
	}
}

// TestRenewalsMoveTheHeartbeatOnAStoppedClock: an owner whose clock does not
// move still changes the heartbeat on every renewal, so that an Observer
// sees it alive.
func TestRenewalsMoveTheHeartbeatOnAStoppedClock(t *testing.T) {
	cur := owned("a", 7)
	var obs generation.Observer
	obs.Observe(cur.Record, cur.TTL, t0)
	for i := range 3 {
		d, err := generation.Decide(cur, generation.RenewRequest{ClaimName: "db", GenerationID: "a", Token: 7, TTL: 10 * time.Second}, generation.Facts{Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		if !d.Next.Record.LastHeartbeat.After(cur.Record.LastHeartbeat) {
			t.Fatalf("renewal %d: heartbeat %v is not after %v", i, d.Next.Record.LastHeartbeat, cur.Record.LastHeartbeat)
		}
		// Seen an hour after the first observation, but changed: alive.
		if obs.Observe(d.Next.Record, d.Next.TTL, t0.Add(time.Duration(i+1)*time.Hour)) {
			t.Fatalf("renewal %d: judged expired although it changed", i)
		}
		cur = d.Next
	}
}

// TestOutcomesAreBoundedOldestDropped: a record remembers the last
// RememberedOutcomes identified mutations; a dropped one is decided afresh.
func TestOutcomesAreBoundedOldestDropped(t *testing.T) {
	cur := owned("a", 7)
	for i := range generation.RememberedOutcomes + 1 {
		d, err := generation.Decide(cur, generation.RenewRequest{ClaimName: "db", GenerationID: "a", Token: 7, TTL: time.Second, OperationID: generation.OperationID(fmt.Sprintf("renew-%d", i))}, generation.Facts{Now: t0.Add(time.Duration(i) * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		cur = d.Next
	}
	var ids []generation.OperationID
	for _, o := range cur.Outcomes {
		ids = append(ids, o.ID)
	}
	var want []generation.OperationID
	for i := 1; i <= generation.RememberedOutcomes; i++ {
		want = append(want, generation.OperationID(fmt.Sprintf("renew-%d", i)))
	}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Fatalf("remembered outcomes (-want +got):\n%s", diff)
	}
	// renew-1 is remembered: a replay writes nothing.
	d, err := generation.Decide(cur, generation.RenewRequest{ClaimName: "db", GenerationID: "a", Token: 7, TTL: time.Second, OperationID: "renew-1"}, generation.Facts{Now: t0.Add(time.Hour)})
	if err != nil || d.Next != nil || !d.Result.LastHeartbeat.Equal(t0.Add(time.Second)) {
		t.Fatalf("replaying renew-1: %+v, %v; want the first outcome (heartbeat %v) and no write", d, err, t0.Add(time.Second))
	}
	// renew-0 was dropped: it is decided again, and renews again.
	d, err = generation.Decide(cur, generation.RenewRequest{ClaimName: "db", GenerationID: "a", Token: 7, TTL: time.Second, OperationID: "renew-0"}, generation.Facts{Now: t0.Add(time.Hour)})
	if err != nil || d.Next == nil {
		t.Fatalf("renew-0 after it was dropped: %+v, %v; want a new renewal", d, err)
	}
}

func TestGenerationStatesMoveOnlyForward(t *testing.T) {
	for _, tc := range []struct {
		from, to generation.GenerationState
		ok       bool
	}{
		{generation.GenerationJoining, generation.GenerationActive, true},
		{generation.GenerationActive, generation.GenerationDraining, true},
		{generation.GenerationDraining, generation.GenerationActive, true},
		{generation.GenerationDraining, generation.GenerationRetired, true},
		{generation.GenerationActive, generation.GenerationFailed, true},
		{generation.GenerationActive, generation.GenerationActive, true},
		{generation.GenerationActive, generation.GenerationJoining, false},
		{generation.GenerationRetired, generation.GenerationActive, false},
		{generation.GenerationFailed, generation.GenerationRetired, false},
		{"sleeping", "sleeping", false},
	} {
		if got := tc.from.CanBecome(tc.to); got != tc.ok {
			t.Errorf("%s.CanBecome(%s) = %t, want %t", tc.from, tc.to, got, tc.ok)
		}
	}
}
