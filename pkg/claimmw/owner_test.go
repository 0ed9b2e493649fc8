package claimmw

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// ocfOwner has ocf's owner contract and keeps its conditions where no
// reflection on Status.Conditions would find them.
type ocfOwner struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	Observed struct{ Conds []metav1.Condition }
}

func (o *ocfOwner) GetStatusConditions() *[]metav1.Condition { return &o.Observed.Conds }
func (o *ocfOwner) GetKind() string                          { return "Database" }
func (o *ocfOwner) DeepCopyObject() runtime.Object {
	c := *o
	c.ObjectMeta = *o.ObjectMeta.DeepCopy()
	c.Observed.Conds = append([]metav1.Condition(nil), o.Observed.Conds...)
	return &c
}

func TestAnOcfOwnerGetsItsConditionWithoutReflection(t *testing.T) {
	// Given an object with GetStatusConditions and no Status.Conditions field
	o := &ocfOwner{}
	if _, err := conditionsOf(o); err != nil {
		t.Fatalf("conditionsOf: %v", err)
	}
	// When the middleware sets its condition
	cond := conditions.New(conditions.Claimed, conditions.ReasonParked, "held", 2)
	changed, err := setConditionOn(o, cond)
	// Then it lands in the slice the owner hands out, once
	if err != nil || !changed {
		t.Fatalf("setConditionOn = %t, %v", changed, err)
	}
	if diff := cmp.Diff([]string{"Claimed"}, typesOf(o.Observed.Conds)); diff != "" {
		t.Errorf("conditions (-want +got):\n%s", diff)
	}
	if again, _ := setConditionOn(o, cond); again {
		t.Error("setting the same condition again reported a change")
	}
}

func typesOf(conds []metav1.Condition) []string {
	var out []string
	for _, c := range conds {
		out = append(out, c.Type)
	}
	return out
}

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

// TestAnOcfOwnerWithAnUnsetStatusGetsItsCondition: the middleware "works,
// without reflection, on any object with GetStatusConditions", including one
// whose status was never written (GetStatusConditions returns nil): the
// condition lands on it as the reflection path, which allocates a nil Status
// pointer, would set it; so such an object is accepted at Wrap (validate
// calls conditionsOf on a new object) and in every pass.
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

// TestAnOcfOwnerRunsItsInnerReconcilerWhileParkedUnlessToldOtherwise: ocf
// components report a condition in every pass, so a GetStatusConditions
// owner defaults to RunInnerWhileParked; an explicit choice wins, and other
// types keep SkipInnerWhileParked.
func TestAnOcfOwnerRunsItsInnerReconcilerWhileParkedUnlessToldOtherwise(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want ParkedMode
	}{
		{"given an ocf owner and no choice then it runs while parked", []Option{For(&ocfOwner{})}, RunInnerWhileParked},
		{"given an ocf owner and an explicit skip then it skips", []Option{For(&ocfOwner{}), WhileParked(SkipInnerWhileParked)}, SkipInnerWhileParked},
		{"given a Status.Conditions type and no choice then it skips", []Option{For(&testcrd.Widget{})}, SkipInnerWhileParked},
		{"given a Status.Conditions type and an explicit run then it runs", []Option{For(&testcrd.Widget{}), WhileParked(RunInnerWhileParked)}, RunInnerWhileParked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c config
			for _, o := range tc.opts {
				o(&c)
			}
			_ = c.validate() // the missing client and keys are not this test's
			if c.parkedMode != tc.want {
				t.Errorf("parked mode %d, want %d", c.parkedMode, tc.want)
			}
		})
	}
}
