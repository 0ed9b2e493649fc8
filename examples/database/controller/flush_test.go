package controller_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/examples/database/controller"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// TestMergeUnownedIsOCFsConflictHandling pins the example's flush to ocf's
// FlushStatus on a 409: the staged conditions of owned types stay, every
// other type is the server's, absence included.
func TestMergeUnownedIsOCFsConflictHandling(t *testing.T) {
	c := func(typ, reason string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: reason}
	}
	owned := []conditions.Type{controller.SchemaReady, controller.ConnectionReady}
	for _, tc := range []struct {
		name           string
		staged, server []metav1.Condition
		want           []metav1.Condition
	}{
		{
			name:   "given a claim transition then Claimed is the server's and the staged Ready is replaced by the server's older one",
			staged: []metav1.Condition{c("SchemaReady", "PrerequisiteNotMet"), c("Claimed", "Claimed"), c("Ready", "PrerequisiteNotMet")},
			server: []metav1.Condition{c("SchemaReady", "Operational"), c("Claimed", "Parked"), c("Ready", "Operational")},
			want:   []metav1.Condition{c("SchemaReady", "PrerequisiteNotMet"), c("Claimed", "Parked"), c("Ready", "Operational")},
		},
		{
			name:   "given a first write then a staged Ready the server lacks is dropped",
			staged: []metav1.Condition{c("SchemaReady", "Operational"), c("Ready", "Operational")},
			server: []metav1.Condition{c("Claimed", "Claimed")},
			want:   []metav1.Condition{c("SchemaReady", "Operational"), c("Claimed", "Claimed")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := append([]metav1.Condition(nil), tc.staged...)
			controller.MergeUnowned(&got, tc.server, owned)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("MergeUnowned (-want +got):\n%s", diff)
			}
		})
	}
}
