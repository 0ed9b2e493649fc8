package crd_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/examples/camundacluster/api/v1alpha1"
	"github.com/ocf-claim/claim/examples/camundacluster/config/crd"
)

// The YAML is written by hand: this test keeps it in step with the Go API.
func TestTheCRDMatchesTheGoAPI(t *testing.T) {
	def, err := crd.CamundaCluster()
	if err != nil {
		t.Fatal(err)
	}
	want := envtest.CRDShape{
		Name: "camundaclusters." + v1alpha1.Group, Group: v1alpha1.Group, Kind: v1alpha1.Kind, ListKind: v1alpha1.Kind + "List",
		Plural: "camundaclusters", Version: v1alpha1.Version, Status: true,
		SpecFields:   []string{"handoverTo", "keycloakRealm", "replicas", "secondaryStorage"},
		StatusFields: []string{"conditions", "observedGeneration", "storageToken"},
	}
	if diff := cmp.Diff(want, envtest.ShapeOf(def)); diff != "" {
		t.Errorf("CRD (-want +got):\n%s", diff)
	}
}
