// Package testclaimant is the custom resource the benchmarks and the
// middleware chaos run reconcile: Claimant names its keys in spec.keys and
// carries the claim condition in status.conditions. Test support only.
package testclaimant

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/internal/testapi"
)

// GroupVersion is the API group of Claimant.
var GroupVersion = schema.GroupVersion{Group: "claimants.claim.ocf.io", Version: "v1"}

// AddToScheme registers Claimant and ClaimantList.
var AddToScheme = testapi.AddToScheme(GroupVersion, &Claimant{}, &ClaimantList{})

// claimant is the shape of a Claimant.
type claimant = testapi.Object[ClaimantSpec, ClaimantStatus]

// Claimant is the holder the middleware reconciles: it names its keys in
// spec.keys and carries the claim condition in status.conditions, as an
// operator's custom resource would.
type Claimant claimant

// ClaimantSpec names the keys.
type ClaimantSpec struct {
	Keys []string `json:"keys,omitempty"`
}

// ClaimantStatus carries the conditions the middleware writes.
type ClaimantStatus = testapi.ConditionsStatus

// ClaimantList is a list of Claimants.
type ClaimantList testapi.List[Claimant]

// Deepen implements testapi.Part.
func (s *ClaimantSpec) Deepen() { s.Keys = append([]string(nil), s.Keys...) }

// DeepCopyInto copies c into out.
func (c *Claimant) DeepCopyInto(out *Claimant) { testapi.CopyInto((*claimant)(c), (*claimant)(out)) }

// DeepCopyObject implements runtime.Object.
func (c *Claimant) DeepCopyObject() runtime.Object {
	if c == nil {
		return nil
	}
	out := new(Claimant)
	c.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *ClaimantList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	return (*ClaimantList)(testapi.CopyList((*testapi.List[Claimant])(l), (*Claimant).DeepCopyInto))
}

// EnvOptions is the control plane of a suite that reconciles Claimants:
// Claimant in the scheme and its CRD installed. Pass it to envtest.Main or
// envtest.Start.
func EnvOptions() envtest.Options {
	return envtest.Options{
		AddToScheme: []func(*runtime.Scheme) error{AddToScheme},
		CRDs:        []*apiextensionsv1.CustomResourceDefinition{crd()},
	}
}

// crd returns the CustomResourceDefinition of Claimant, with the status
// subresource the middleware writes through.
func crd() *apiextensionsv1.CustomResourceDefinition {
	strs := apiextensionsv1.JSONSchemaProps{Type: "string"}
	return envtest.CRD(GroupVersion.WithKind("Claimant"), "claimants", &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"keys": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &strs}},
	}})
}
