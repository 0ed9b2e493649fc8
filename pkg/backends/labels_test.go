package backends_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ocf-claim/claim/pkg/backends"
)

// TestWriteLabelsKeepOtherLabelsWhileTheHolderStays: a write that keeps the
// holder keeps the labels its Config does not set (another release's holder
// labels, a person's), and sets its own over theirs; a write that changes the
// holder carries only its own, so nothing that selected the former holder
// selects the new one.
func TestWriteLabelsKeepOtherLabelsWhileTheHolderStays(t *testing.T) {
	a := backends.Holder{APIVersion: "g/v1", Kind: "K", Namespace: "ns", Name: "a", UID: "uid-a"}
	b := backends.Holder{APIVersion: "g/v1", Kind: "K", Namespace: "ns", Name: "b", UID: "uid-b"}
	cfg := backends.Config{Labels: map[string]string{"app": "db-operator"}}.WithDefaults()
	stored := func(h backends.Holder, labels map[string]string) backends.Record {
		return backends.Record{Key: "k", Holder: h, Exists: true, Labels: labels}
	}
	tests := []struct {
		name       string
		prev, next backends.Record
		want       map[string]string
	}{{
		name: "first write",
		prev: backends.Record{Key: "k"},
		next: backends.Record{Key: "k", Holder: a},
		want: map[string]string{"app": "db-operator", backends.DefaultHolderUIDLabel: "uid-a"},
	}, {
		name: "same holder keeps another release's holder label",
		prev: stored(a, map[string]string{"app": "db-operator", backends.DefaultHolderUIDLabel: "uid-a", "example.com/holder-name": "a"}),
		next: backends.Record{Key: "k", Holder: a},
		want: map[string]string{"app": "db-operator", backends.DefaultHolderUIDLabel: "uid-a", "example.com/holder-name": "a"},
	}, {
		name: "same holder sets its own labels over other values",
		prev: stored(a, map[string]string{"app": "old-operator", "team": "payments"}),
		next: backends.Record{Key: "k", Holder: a},
		want: map[string]string{"app": "db-operator", backends.DefaultHolderUIDLabel: "uid-a", "team": "payments"},
	}, {
		name: "new holder drops what selected the former one",
		prev: stored(a, map[string]string{"app": "db-operator", backends.DefaultHolderUIDLabel: "uid-a", "example.com/holder-name": "a"}),
		next: backends.Record{Key: "k", Holder: b},
		want: map[string]string{"app": "db-operator", backends.DefaultHolderUIDLabel: "uid-b"},
	}, {
		name: "a record without a holder UID is not kept from",
		prev: stored(backends.Holder{}, map[string]string{"stray": "x"}),
		next: backends.Record{Key: "k", Holder: a},
		want: map[string]string{"app": "db-operator", backends.DefaultHolderUIDLabel: "uid-a"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, cfg.WriteLabels(tt.prev, tt.next)); diff != "" {
				t.Errorf("WriteLabels (-want +got):\n%s", diff)
			}
		})
	}
}
