package controller_test

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/ocf-claim/claim/examples/database/api/v1alpha1"
)

// The CRD's YAML is written by hand: this test keeps it in step with the Go
// types, field by field, from their JSON tags.
func TestTheCRDMatchesTheGoAPI(t *testing.T) {
	// Given the manifest the tests install
	b, err := os.ReadFile(filepath.Join("..", "config", "crd", "db.example.com_databases.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	def := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096).Decode(def); err != nil {
		t.Fatal(err)
	}
	// When its shape is read
	type shape struct {
		Name, Group, Kind, ListKind, Plural, Version string
		Status                                       bool
		SpecFields, StatusFields                     []string
	}
	v := def.Spec.Versions[0]
	props := v.Schema.OpenAPIV3Schema.Properties
	got := shape{
		Name: def.Name, Group: def.Spec.Group, Kind: def.Spec.Names.Kind, ListKind: def.Spec.Names.ListKind,
		Plural: def.Spec.Names.Plural, Version: v.Name, Status: v.Subresources != nil && v.Subresources.Status != nil,
		SpecFields: slices.Sorted(maps.Keys(props["spec"].Properties)), StatusFields: slices.Sorted(maps.Keys(props["status"].Properties)),
	}
	// Then it is the Go API's
	want := shape{
		Name: v1alpha1.Plural + "." + v1alpha1.Group, Group: v1alpha1.Group, Kind: v1alpha1.Kind, ListKind: v1alpha1.Kind + "List",
		Plural: v1alpha1.Plural, Version: v1alpha1.Version, Status: true,
		SpecFields: jsonFields(reflect.TypeFor[v1alpha1.DatabaseSpec]()), StatusFields: jsonFields(reflect.TypeFor[v1alpha1.DatabaseStatus]()),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CRD (-want +got):\n%s", diff)
	}
}

// jsonFields returns the JSON names of the fields of struct type t, sorted.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
