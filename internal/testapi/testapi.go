// Package testapi is what the hand-written custom resources of the tests
// share (this repository has no code generator): the shape of an object and
// of a list of objects, and their deep copies. Test support only.
//
// A kind is a defined type of an Object, so that its fields, its JSON and
// its name in a scheme are those of a struct written out by hand:
//
//	type widget = testapi.Object[WidgetSpec, WidgetStatus]
//	type Widget widget
//	type WidgetList testapi.List[Widget]
package testapi

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// AddToScheme returns the AddToScheme of a group of test kinds: it
// registers objs (each kind and its list) under gv.
func AddToScheme(gv schema.GroupVersion, objs ...runtime.Object) func(*runtime.Scheme) error {
	return func(s *runtime.Scheme) error {
		s.AddKnownTypes(gv, objs...)
		metav1.AddToGroupVersion(s, gv)
		return nil
	}
}

// Object is the shape of a kind: its metadata, a spec and a status.
type Object[Spec, Status any] struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   Spec   `json:"spec,omitempty"`
	Status Status `json:"status,omitempty"`
}

// List is the shape of a list of a kind.
type List[T any] struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []T `json:"items"`
}

// ConditionsStatus is the status of a kind that carries conditions only,
// as the middleware requires of the objects it claims for.
type ConditionsStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Deepen implements Part.
func (s *ConditionsStatus) Deepen() { s.Conditions = Conditions(s.Conditions) }

// Part is a pointer to a spec or a status. Deepen replaces everything the
// part shares with the one it was copied from (a slice, a map) with a copy
// of its own.
type Part[T any] interface {
	*T
	Deepen()
}

// CopyInto makes out a deep copy of in.
func CopyInto[Spec, Status any, PS Part[Spec], PT Part[Status]](in, out *Object[Spec, Status]) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	PS(&out.Spec).Deepen()
	PT(&out.Status).Deepen()
}

// Copy returns a deep copy of in.
func Copy[Spec, Status any, PS Part[Spec], PT Part[Status]](in *Object[Spec, Status]) *Object[Spec, Status] {
	out := new(Object[Spec, Status])
	CopyInto[Spec, Status, PS, PT](in, out)
	return out
}

// CopyList returns a deep copy of l, each item copied by copyInto; the
// copy's items are nil only when l's are.
func CopyList[T any](l *List[T], copyInto func(in, out *T)) *List[T] {
	out := &List[T]{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]T, len(l.Items))
		for i := range l.Items {
			copyInto(&l.Items[i], &out.Items[i])
		}
	}
	return out
}

// Conditions returns a deep copy of in, nil for nil.
func Conditions(in []metav1.Condition) []metav1.Condition {
	if in == nil {
		return nil
	}
	out := make([]metav1.Condition, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}
