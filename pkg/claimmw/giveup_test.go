package claimmw

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ocf-claim/claim/pkg/claim"
)

func TestGiveUp(t *testing.T) {
	rec := func(key, set string) claim.Record { return claim.Record{Key: key, Set: set} }
	held := func(keys ...string) []heldKey {
		out := make([]heldKey, len(keys))
		for i, k := range keys {
			out[i] = heldKey{raw: k, o: claim.Outcome{Key: k}}
		}
		return out
	}
	keys := func(recs []claim.Record) []string {
		var out []string
		for _, r := range recs {
			out = append(out, r.Key)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		holdings []claim.Record
		granted  []heldKey
		theirs   []string
		want     []string
	}{
		{"given every held key granted then nothing is given up", []claim.Record{rec("a", "s"), rec("b", "s")}, held("a", "b"), nil, nil},
		{"given a held key no longer named then it is given up", []claim.Record{rec("a", "s"), rec("old", "s")}, held("a"), nil, []string{"old"}},
		{"given a parked object holding a key after the one it waits for then that key is given up", []claim.Record{rec("a", "s"), rec("c", "s")}, held("a"), nil, []string{"c"}},
		{"given a set-less record another middleware of the kind names then it is kept", []claim.Record{rec("old", "")}, held(), []string{"old"}, nil},
		{"given a set-less record no other middleware of the kind names then it is given up", []claim.Record{rec("old", ""), rec("other", "")}, held(), []string{"other"}, []string{"old"}},
		{"given a record of its own set another middleware names then it is given up", []claim.Record{rec("old", "s")}, held(), []string{"old"}, []string{"old"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, keys(giveUp(tc.holdings, tc.granted, func(r claim.Record) bool { return slices.Contains(tc.theirs, r.Key) }))); diff != "" {
				t.Errorf("giveUp (-want +got):\n%s", diff)
			}
		})
	}
}
