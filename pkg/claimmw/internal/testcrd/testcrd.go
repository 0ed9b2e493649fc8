// Package testcrd defines the custom resources the claimmw tests claim with:
// Widget, which carries status.conditions as the middleware requires, and
// Gadget, which does not. The types, their DeepCopy and the Widget CRD are
// written by hand (no code generator in this repository).
package testcrd

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/internal/testapi"
)

// GroupVersion is the API group and version of the test types.
var GroupVersion = schema.GroupVersion{Group: "test.claim.ocf.io", Version: "v1"}

// AddToScheme registers Widget and Gadget.
var AddToScheme = testapi.AddToScheme(GroupVersion, &Widget{}, &WidgetList{}, &Gadget{}, &GadgetList{})

// widget is the shape of a Widget.
type widget = testapi.Object[WidgetSpec, WidgetStatus]

// Widget names the keys it wants in spec.keys.
type Widget widget

// WidgetSpec is what a Widget wants.
type WidgetSpec struct {
	// Keys are the claim keys the Widget needs.
	Keys []string `json:"keys,omitempty"`
	// HandTo names the Widget, in the same namespace, that this Widget
	// hands its keys to (a planned handover).
	HandTo string `json:"handTo,omitempty"`
}

// WidgetStatus carries the conditions the middleware writes.
type WidgetStatus = testapi.ConditionsStatus

// WidgetList is a list of Widgets.
type WidgetList testapi.List[Widget]

// Deepen implements testapi.Part.
func (s *WidgetSpec) Deepen() { s.Keys = append([]string(nil), s.Keys...) }

// DeepCopyInto copies w into out.
func (w *Widget) DeepCopyInto(out *Widget) { testapi.CopyInto((*widget)(w), (*widget)(out)) }

// DeepCopy returns a copy of w.
func (w *Widget) DeepCopy() *Widget {
	if w == nil {
		return nil
	}
	out := new(Widget)
	w.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (w *Widget) DeepCopyObject() runtime.Object { return w.DeepCopy() }

// DeepCopyObject implements runtime.Object.
func (l *WidgetList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	return (*WidgetList)(testapi.CopyList((*testapi.List[Widget])(l), (*Widget).DeepCopyInto))
}

// Gadget has a status without conditions: the middleware refuses it.
type Gadget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status GadgetStatus `json:"status,omitempty"`
}

// GadgetStatus has a phase and no conditions.
type GadgetStatus struct {
	Phase string `json:"phase,omitempty"`
}

// GadgetList is a list of Gadgets.
type GadgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Gadget `json:"items"`
}

// DeepCopyObject implements runtime.Object.
func (g *Gadget) DeepCopyObject() runtime.Object {
	if g == nil {
		return nil
	}
	out := *g
	g.DeepCopyInto(&out.ObjectMeta)
	return &out
}

// DeepCopyObject implements runtime.Object.
func (l *GadgetList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &GadgetList{TypeMeta: l.TypeMeta}
	l.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		out.Items = append(out.Items, *l.Items[i].DeepCopyObject().(*Gadget))
	}
	return out
}

// WidgetCRD is the CustomResourceDefinition of Widget, with the status
// subresource.
func WidgetCRD() *apiextensionsv1.CustomResourceDefinition {
	strs := apiextensionsv1.JSONSchemaProps{Type: "string"}
	return envtest.CRD(GroupVersion.WithKind("Widget"), "widgets", &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"keys":   {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &strs}},
		"handTo": strs,
	}})
}
