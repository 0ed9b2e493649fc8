package backends_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ocf-claim/claim/pkg/backends"
)

func TestLostLabelSelectorsSelectTheObjectsWithoutEachSelectorLabel(t *testing.T) {
	h := backends.Holder{Namespace: "ns", Name: "a", UID: "uid-a"}
	byKindAndUID := func(h backends.Holder) map[string]string {
		return map[string]string{"example.com/uid": string(h.UID), "example.com/kind": "Widget"}
	}
	for _, tc := range []struct {
		name string
		cfg  backends.Config
		base map[string]string
		want []string
	}{
		{"the default holder label", backends.Config{}, nil, []string{"!claim.ocf.io/holder-uid"}},
		{"with the record labels", backends.Config{}, map[string]string{"app": "claims"}, []string{"app=claims,!claim.ocf.io/holder-uid"}},
		{"one selector per key, in key order", backends.Config{HolderLabels: byKindAndUID}, nil, []string{"!example.com/kind", "!example.com/uid"}},
		{"no selector labels, no selector", backends.Config{HolderLabels: func(backends.Holder) map[string]string { return nil }}, nil, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sels, err := tc.cfg.LostLabelSelectors(h, tc.base)
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, s := range sels {
				got = append(got, s.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("selectors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLostLabelSelectorsRefuseAKeyNoSelectorCanName(t *testing.T) {
	cfg := backends.Config{HolderLabels: func(backends.Holder) map[string]string { return map[string]string{"no spaces allowed": "x"} }}
	if _, err := cfg.LostLabelSelectors(backends.Holder{Name: "a", UID: "uid-a"}, nil); err == nil {
		t.Fatal("got no error for an invalid label key")
	}
}

func TestKeepLostAddsOnlyTheHoldersOwnRecordsOnce(t *testing.T) {
	h := backends.Holder{Name: "a", UID: "uid-a"}
	rec := func(name string, uid types.UID, exists bool) backends.Record {
		return backends.Record{Key: name, Holder: backends.Holder{Name: "x", UID: uid}, Exists: exists, Ref: types.NamespacedName{Namespace: "ns", Name: name}}
	}
	for _, tc := range []struct {
		name            string
		labelled, lost  []backends.Record
		wantKeysInOrder []string
	}{
		{"nothing lost", []backends.Record{rec("k1", "uid-a", true)}, nil, []string{"k1"}},
		{"a lost record of the holder", []backends.Record{rec("k1", "uid-a", true)}, []backends.Record{rec("k2", "uid-a", true)}, []string{"k1", "k2"}},
		{"another holder's lost record", nil, []backends.Record{rec("k2", "uid-b", true)}, []string{}},
		{"a record listed by its labels too", []backends.Record{rec("k1", "uid-a", true)}, []backends.Record{rec("k1", "uid-a", true)}, []string{"k1"}},
		{"a record lacking two labels, listed twice", nil, []backends.Record{rec("k2", "uid-a", true), rec("k2", "uid-a", true)}, []string{"k2"}},
		{"an object storing no record", nil, []backends.Record{rec("k2", "uid-a", false)}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := []string{}
			for _, r := range backends.KeepLost(h, tc.labelled, tc.lost) {
				got = append(got, r.Key)
			}
			if diff := cmp.Diff(tc.wantKeysInOrder, got); diff != "" {
				t.Errorf("kept (-want +got):\n%s", diff)
			}
		})
	}
}
