package claimmw

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ocf-claim/claim/pkg/conditions"
)

// ptrStatusOwner has ocf's owner contract over an optional status, as
// generated types with `Status *FooStatus` have: its GetStatusConditions
// returns nil while no status was ever written.
type ptrStatusOwner struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Status *struct{ Conditions []metav1.Condition }
}

func (o *ptrStatusOwner) GetStatusConditions() *[]metav1.Condition {
	if o.Status == nil {
		return nil
	}
	return &o.Status.Conditions
}
func (o *ptrStatusOwner) GetKind() string { return "Database" }
func (o *ptrStatusOwner) DeepCopyObject() runtime.Object {
	c := *o
	c.ObjectMeta = *o.ObjectMeta.DeepCopy()
	if o.Status != nil {
		s := *o.Status
		s.Conditions = append([]metav1.Condition(nil), o.Status.Conditions...)
		c.Status = &s
	}
	return &c
}

// TestAnOcfOwnerWithAnUnsetStatusGetsItsCondition attacks issue 15, item 1
// ("works, without reflection, on any object with GetStatusConditions"):
// the reflection path allocates a nil Status pointer, the
// StatusConditionsOwner path refuses an object whose status was never
// written, at Wrap (validate calls conditionsOf on a new object) and in
// every pass.
func TestAnOcfOwnerWithAnUnsetStatusGetsItsCondition(t *testing.T) {
	// Given an ocf owner whose status was never written
	o := &ptrStatusOwner{}
	// When the middleware sets its condition on it
	changed, err := setConditionOn(o, conditions.New(conditions.Claimed, conditions.ReasonNoKeys, "Names no key to claim.", 1))
	// Then it lands, as it would through Status.Conditions by reflection
	if err != nil || !changed {
		t.Errorf("setConditionOn(owner with unset status) = %t, %v", changed, err)
	}
}
