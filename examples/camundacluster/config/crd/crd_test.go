package crd_test

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ocf-claim/claim/examples/camundacluster/api/v1alpha1"
	"github.com/ocf-claim/claim/examples/camundacluster/config/crd"
)

// The YAML is written by hand: this test keeps it in step with the Go API.
func TestTheCRDMatchesTheGoAPI(t *testing.T) {
	def, err := crd.CamundaCluster()
	if err != nil {
		t.Fatal(err)
	}
	type shape struct {
		Name, Group, Kind, ListKind, Version string
		Status                               bool
		SpecFields, StatusFields             []string
	}
	v := def.Spec.Versions[0]
	props := v.Schema.OpenAPIV3Schema.Properties
	got := shape{
		Name: def.Name, Group: def.Spec.Group, Kind: def.Spec.Names.Kind, ListKind: def.Spec.Names.ListKind,
		Version: v.Name, Status: v.Subresources != nil && v.Subresources.Status != nil,
		SpecFields: slices.Sorted(maps.Keys(props["spec"].Properties)), StatusFields: slices.Sorted(maps.Keys(props["status"].Properties)),
	}
	want := shape{
		Name: "camundaclusters." + v1alpha1.Group, Group: v1alpha1.Group, Kind: v1alpha1.Kind, ListKind: v1alpha1.Kind + "List",
		Version: v1alpha1.Version, Status: true,
		SpecFields:   []string{"handoverTo", "keycloakRealm", "replicas", "secondaryStorage"},
		StatusFields: []string{"conditions", "observedGeneration", "storageToken"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CRD (-want +got):\n%s", diff)
	}
}
