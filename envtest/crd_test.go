package envtest_test

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ocf-claim/claim/envtest"
)

// The shape a CRD test compares is read from the manifest as the API server
// would serve it: names, first version, status subresource and the fields
// of spec and status, sorted.
func TestTheShapeOfACRDIsItsNamesVersionStatusAndFields(t *testing.T) {
	spec := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"zeta": {Type: "string"}, "alpha": {Type: "integer"},
	}}
	def := envtest.CRD(schema.GroupVersionKind{Group: "test.example.com", Version: "v2", Kind: "Thing"}, "things", spec)
	want := envtest.CRDShape{
		Name: "things.test.example.com", Group: "test.example.com", Kind: "Thing", ListKind: "ThingList",
		Plural: "things", Version: "v2", Status: true,
		SpecFields: []string{"alpha", "zeta"}, StatusFields: nil,
	}
	if diff := cmp.Diff(want, envtest.ShapeOf(def)); diff != "" {
		t.Errorf("ShapeOf (-want +got):\n%s", diff)
	}
}

func TestJSONFieldsAreTheTaggedNamesOfAStructSorted(t *testing.T) {
	type fields struct {
		Zeta     string `json:"zeta,omitempty"`
		Alpha    int    `json:"alpha"`
		Skipped  bool   `json:"-"`
		Untagged string
		Inline   struct{} `json:",inline"`
	}
	tests := []struct {
		name string
		typ  reflect.Type
		want []string
	}{
		{"tagged fields only, sorted, options dropped", reflect.TypeFor[fields](), []string{"alpha", "zeta"}},
		{"no fields", reflect.TypeFor[struct{}](), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, envtest.JSONFields(tt.typ)); diff != "" {
				t.Errorf("JSONFields (-want +got):\n%s", diff)
			}
		})
	}
}
