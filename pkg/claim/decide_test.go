package claim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var (
	self  = Holder{Namespace: "ns", Name: "self", UID: "uid-self"}
	other = Holder{Namespace: "ns", Name: "other", UID: "uid-other"}
	third = Holder{Namespace: "ns", Name: "third", UID: "uid-third"}
)

func TestJudge(t *testing.T) {
	renamedSelf := self
	renamedSelf.Name = "hand-edited"
	tests := []struct {
		name string
		rec  Record
		want verdict
	}{
		{"given no record then the key is free", Record{}, verdictFree},
		{"given a record of self then it is held", Record{Exists: true, Holder: self}, verdictHeld},
		{"given a record of self under an edited name then UID alone decides it is held", Record{Exists: true, Holder: renamedSelf}, verdictHeld},
		{"given a record of another holder then liveness must judge", Record{Exists: true, Holder: other}, verdictOther},
		{"given a foreign record naming self then it is still foreign", Record{Exists: true, Holder: self, Foreign: "missing annotations"}, verdictForeign},
		{"given a foreign record then it blocks", Record{Exists: true, Foreign: "written for key \"x\""}, verdictForeign},
		{"given a record without holder UID then it is not self", Record{Exists: true, Holder: Holder{Name: "self"}}, verdictOther},
		{"given a record of self in the judging set then it is held", Record{Exists: true, Holder: self, Set: "a"}, verdictHeld},
		{"given a record of self written by another set then it is another claim", Record{Exists: true, Holder: self, Set: "b"}, verdictOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := judge(tt.rec, self, "a"); got != tt.want {
				t.Errorf("judge() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAfterLiveness(t *testing.T) {
	tests := []struct {
		alive, open, successor bool
		want                   step
	}{
		{alive: true, open: true, want: stepPark},
		{alive: true, open: false, want: stepPark},
		{alive: false, open: false, want: stepWait},
		{alive: false, open: true, want: stepTakeOver},
		// A prepared successor waits for the commit while the holder lives.
		{alive: true, open: true, successor: true, want: stepWait},
		// A holder that died after preparing never commits: the successor
		// takes over like anyone else, through the gate.
		{alive: false, open: false, successor: true, want: stepWait},
		{alive: false, open: true, successor: true, want: stepTakeOver},
	}
	for _, tt := range tests {
		if got := afterLiveness(tt.alive, tt.open, tt.successor); got != tt.want {
			t.Errorf("afterLiveness(alive=%v, open=%v, successor=%v) = %v, want %v", tt.alive, tt.open, tt.successor, got, tt.want)
		}
	}
}

func TestAfterTakeoverConflict(t *testing.T) {
	tests := []struct {
		name   string
		reread Record
		want   raceResult
	}{
		{"given the record vanished then start over", Record{}, raceFreed},
		{"given self is recorded then our lost write landed", Record{Exists: true, Holder: self}, raceSelf},
		{"given a foreign record then it blocks", Record{Exists: true, Foreign: "x"}, raceForeign},
		{"given a third holder then it won and is named", Record{Exists: true, Holder: third}, raceWinner},
		{"given the judged holder is still recorded then it keeps the claim", Record{Exists: true, Holder: other}, raceStale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := afterTakeoverConflict(tt.reread, other, self, "a"); got != tt.want {
				t.Errorf("afterTakeoverConflict() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFirstClaimant(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(h Holder, d time.Duration) Holder { h.Created = t0.Add(d); return h }
	a := Holder{Namespace: "a", Name: "x", UID: "a"}
	b := Holder{Namespace: "b", Name: "x", UID: "b"}
	me := Holder{Namespace: "m", Name: "me", UID: "me"}
	tests := []struct {
		name     string
		self     Holder
		siblings []Holder
		want     Holder
		wantOK   bool
	}{
		{"given no siblings then self goes first", at(me, 0), nil, Holder{}, false},
		{"given only self listed then self goes first", at(me, 0), []Holder{at(me, 0)}, Holder{}, false},
		{"given a younger sibling then self goes first", at(me, 0), []Holder{at(a, time.Second)}, Holder{}, false},
		{"given an older sibling then it goes first", at(me, time.Second), []Holder{at(a, 0)}, at(a, 0), true},
		{"given two older siblings then the oldest is named", at(me, time.Hour), []Holder{at(b, time.Minute), at(a, time.Second)}, at(a, time.Second), true},
		{"given a tie then the smaller namespace/name goes first", at(me, 0), []Holder{at(a, 0)}, at(a, 0), true},
		{"given a tie where self is smaller then self goes first", at(Holder{Namespace: "0", Name: "me", UID: "me"}, 0), []Holder{at(a, 0)}, Holder{}, false},
		{"given a sibling without creation time then it is ignored", at(me, time.Second), []Holder{a}, Holder{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := firstClaimant(tt.self, tt.siblings)
			if ok != tt.wantOK || !got.Is(tt.want) && tt.wantOK {
				t.Errorf("firstClaimant() = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestReasonGranted(t *testing.T) {
	got := map[Reason]bool{}
	for _, r := range []Reason{ReasonAcquired, ReasonHeld, ReasonTakenOver, ReasonHeldElsewhere, ReasonForeign, ReasonNotFirst, ReasonWaitingForHandover} {
		got[r] = r.Granted()
	}
	want := map[Reason]bool{
		ReasonAcquired: true, ReasonHeld: true, ReasonTakenOver: true,
		ReasonHeldElsewhere: false, ReasonForeign: false, ReasonNotFirst: false, ReasonWaitingForHandover: false,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Granted() (-want +got):\n%s", diff)
	}
}
