package controller_test

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/ocf-claim/claim/envtest"
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
	got := envtest.ShapeOf(def)
	// Then it is the Go API's
	want := envtest.CRDShape{
		Name: v1alpha1.Plural + "." + v1alpha1.Group, Group: v1alpha1.Group, Kind: v1alpha1.Kind, ListKind: v1alpha1.Kind + "List",
		Plural: v1alpha1.Plural, Version: v1alpha1.Version, Status: true,
		SpecFields:   envtest.JSONFields(reflect.TypeFor[v1alpha1.DatabaseSpec]()),
		StatusFields: envtest.JSONFields(reflect.TypeFor[v1alpha1.DatabaseStatus]()),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CRD (-want +got):\n%s", diff)
	}
}
