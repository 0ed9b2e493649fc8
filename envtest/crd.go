package envtest

import (
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
