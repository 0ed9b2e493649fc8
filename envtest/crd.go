package envtest

import (
	"maps"
	"reflect"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// CRD returns the CustomResourceDefinition of a namespaced test type written
// in Go: kind at gvk, served under plural, with a status subresource (which
// the claim middleware writes through), an open status, the given spec
// schema (an open object when spec is nil), and the Claimed condition as
// printer columns. Install it with Options.CRDs or Env.InstallCRDs.
func CRD(gvk schema.GroupVersionKind, plural string, spec *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceDefinition {
	open := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
	specSchema := open
	if spec != nil {
		specSchema = *spec
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + gvk.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvk.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: gvk.Kind, ListKind: gvk.Kind + "List"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: gvk.Version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:       "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": specSchema, "status": open},
				}},
				AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{
					{Name: "Claimed", Type: "string", JSONPath: `.status.conditions[?(@.type=="Claimed")].status`},
					{Name: "Reason", Type: "string", JSONPath: `.status.conditions[?(@.type=="Claimed")].reason`},
				},
			}},
		},
	}
}

// CRDShape is what a CRD written by hand must agree on with the Go types it
// serves: its names, its version, whether it has a status subresource, and
// the JSON fields of spec and status (sorted). A test keeps a manifest in
// step with its API by comparing ShapeOf the manifest with the shape it
// wants.
type CRDShape struct {
	Name, Group, Kind, ListKind, Plural, Version string
	Status                                       bool
	SpecFields, StatusFields                     []string
}

// ShapeOf returns the shape of def's first version.
func ShapeOf(def *apiextensionsv1.CustomResourceDefinition) CRDShape {
	v := def.Spec.Versions[0]
	var props map[string]apiextensionsv1.JSONSchemaProps
	if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
		props = v.Schema.OpenAPIV3Schema.Properties
	}
	return CRDShape{
		Name: def.Name, Group: def.Spec.Group, Kind: def.Spec.Names.Kind, ListKind: def.Spec.Names.ListKind,
		Plural: def.Spec.Names.Plural, Version: v.Name, Status: v.Subresources != nil && v.Subresources.Status != nil,
		SpecFields:   slices.Sorted(maps.Keys(props["spec"].Properties)),
		StatusFields: slices.Sorted(maps.Keys(props["status"].Properties)),
	}
}

// JSONFields returns the JSON names of the fields of struct type t, sorted:
// the fields a CRD's schema of t must list.
func JSONFields(t reflect.Type) []string {
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
