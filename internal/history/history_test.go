package history

import (
	"k8s.io/apimachinery/pkg/types"

	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ocf-claim/claim/pkg/claim"
)

// at returns a time n milliseconds after a fixed origin.
func at(n int) time.Time { return time.Unix(1000, 0).Add(time.Duration(n) * time.Millisecond) }

func acquire(holder string, inv, ret int, reason claim.Reason, token string) Op {
	return Op{Kind: OpAcquire, Key: "k", Holder: typesUID(holder), Invoked: at(inv), Returned: at(ret), Reason: reason, Token: claim.Token(token)}
}

func version(holder, rv string, seen int) Version {
	return Version{Key: "k", Name: "claim-k", UID: "lease-1", ResourceVersion: rv, Holder: typesUID(holder), Seen: at(seen)}
}

func deletion(holder, rv string, seen int) Version {
	v := version(holder, rv, seen)
	v.Deleted = true
	return v
}

func TestCheck(t *testing.T) {
	release := func(holder string, inv int) Op {
		return Op{Kind: OpRelease, Holder: typesUID(holder), Invoked: at(inv), Returned: at(inv + 1)}
	}
	deleteHolder := func(holder string, inv int) Op {
		return Op{Kind: OpDeleteHolder, Holder: typesUID(holder), Invoked: at(inv), Returned: at(inv + 1)}
	}
	tests := []struct {
		name     string
		ops      []Op
		versions []Version
		left     []Version
		want     []string // rules violated, in order
	}{
		{
			name: "given a grant, a release and a grant to another holder then nothing is violated",
			ops: []Op{
				acquire("a", 0, 2, claim.ReasonAcquired, "10"), acquire("a", 3, 4, claim.ReasonHeld, "10"),
				release("a", 5), acquire("b", 8, 9, claim.ReasonAcquired, "12"),
				{Kind: OpAcquire, Key: "k", Holder: "c", Invoked: at(8), Returned: at(9), Err: errors.New("timeout")},
			},
			versions: []Version{version("a", "10", 2), deletion("a", "10", 7), {Key: "k", Name: "claim-k", UID: "lease-2", ResourceVersion: "12", Holder: "b", Seen: at(9)}},
		},
		{
			name:     "given a takeover after the holder was deleted then nothing is violated",
			ops:      []Op{acquire("a", 0, 2, claim.ReasonAcquired, "10"), deleteHolder("a", 3), acquire("b", 4, 6, claim.ReasonTakenOver, "11")},
			versions: []Version{version("a", "10", 2), version("b", "11", 6)},
		},
		{
			name: "given a grant no stored version backs then it is reported",
			ops:  []Op{acquire("a", 0, 2, claim.ReasonAcquired, "10")},
			want: []string{RuleBacked},
		},
		{
			name:     "given a token backed by another holder's version then it is reported",
			ops:      []Op{acquire("a", 0, 2, claim.ReasonHeld, "10")},
			versions: []Version{version("b", "10", 1)},
			want:     []string{RuleBacked},
		},
		{
			name:     "given two holders granted one token then it is reported",
			ops:      []Op{acquire("a", 0, 2, claim.ReasonAcquired, "10"), acquire("b", 0, 2, claim.ReasonHeld, "10")},
			versions: []Version{version("a", "10", 1)},
			want:     []string{RuleBacked, RuleToken},
		},
		{
			name: "given a later grant with a smaller token then it is reported",
			ops: []Op{acquire("a", 0, 2, claim.ReasonAcquired, "12"), deleteHolder("a", 3),
				acquire("b", 5, 6, claim.ReasonTakenOver, "11")},
			versions: []Version{version("a", "12", 1), {Key: "k", Name: "claim-k", UID: "lease-2", ResourceVersion: "11", Holder: "b", Seen: at(6)}},
			want:     []string{RuleToken, RuleOverlap},
		},
		{
			name: "given an old holder told it holds after a newer grant completed then it is reported",
			ops: []Op{acquire("a", 0, 2, claim.ReasonAcquired, "10"), deleteHolder("a", 3),
				acquire("b", 4, 6, claim.ReasonTakenOver, "11"), acquire("a", 7, 8, claim.ReasonHeld, "10")},
			versions: []Version{version("a", "10", 1), version("b", "11", 6)},
			want:     []string{RuleOverlap},
		},
		{
			name:     "given an old holder's call invoked before the newer grant completed then it is not an overlap",
			ops:      []Op{acquire("a", 0, 2, claim.ReasonAcquired, "10"), deleteHolder("a", 3), acquire("b", 4, 6, claim.ReasonTakenOver, "11"), acquire("a", 5, 8, claim.ReasonHeld, "10")},
			versions: []Version{version("a", "10", 1), version("b", "11", 6)},
		},
		{
			name:     "given a record deleted without its holder asking then it is reported",
			ops:      []Op{acquire("a", 0, 2, claim.ReasonAcquired, "10")},
			versions: []Version{version("a", "10", 1), deletion("a", "10", 5)},
			want:     []string{RuleReleased},
		},
		{
			name:     "given a record passed to another holder while the first lived then it is reported",
			ops:      []Op{acquire("a", 0, 2, claim.ReasonAcquired, "10"), acquire("b", 4, 6, claim.ReasonTakenOver, "11")},
			versions: []Version{version("a", "10", 1), version("b", "11", 5)},
			want:     []string{RuleTakenOver},
		},
		{
			name:     "given a record left after the sweep then it is reported",
			ops:      []Op{acquire("a", 0, 2, claim.ReasonAcquired, "10")},
			versions: []Version{version("a", "10", 1)},
			left:     []Version{version("a", "10", 1)},
			want:     []string{RuleLeak},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, vs := Check(tt.ops, tt.versions, tt.left)
			var got []string
			for _, v := range vs {
				got = append(got, v.Rule)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("rules violated (-want +got):\n%s\n%s", diff, Report(Summary{}, vs))
			}
		})
	}
}

func typesUID(s string) types.UID { return types.UID(s) }
