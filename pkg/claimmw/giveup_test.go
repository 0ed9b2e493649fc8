package claimmw

import (
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
		name        string
		holdings    []claim.Record
		granted     []heldKey
		keepSetless bool
		want        []string
	}{
		{"given every held key granted then nothing is given up", []claim.Record{rec("a", "s"), rec("b", "s")}, held("a", "b"), false, nil},
		{"given a held key no longer named then it is given up", []claim.Record{rec("a", "s"), rec("old", "s")}, held("a"), false, []string{"old"}},
		{"given a parked object holding a key after the one it waits for then that key is given up", []claim.Record{rec("a", "s"), rec("c", "s")}, held("a"), false, []string{"c"}},
		{"given a set-less record and another middleware on the kind then it is kept", []claim.Record{rec("old", "")}, held(), true, nil},
		{"given a set-less record and no other middleware on the kind then it is given up", []claim.Record{rec("old", "")}, held(), false, []string{"old"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, keys(giveUp(tc.holdings, tc.granted, tc.keepSetless))); diff != "" {
				t.Errorf("giveUp (-want +got):\n%s", diff)
			}
		})
	}
}
