package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// DeepCopyInto copies c into out.
func (c *CamundaCluster) DeepCopyInto(out *CamundaCluster) {
	*out = *c
	c.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	c.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of c.
func (c *CamundaCluster) DeepCopy() *CamundaCluster {
	if c == nil {
		return nil
	}
	out := new(CamundaCluster)
	c.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (c *CamundaCluster) DeepCopyObject() runtime.Object { return c.DeepCopy() }

// DeepCopyInto copies s into out.
func (s *CamundaClusterStatus) DeepCopyInto(out *CamundaClusterStatus) {
	*out = *s
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
}

// DeepCopyInto copies l into out.
func (l *CamundaClusterList) DeepCopyInto(out *CamundaClusterList) {
	*out = *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]CamundaCluster, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a copy of l.
func (l *CamundaClusterList) DeepCopy() *CamundaClusterList {
	if l == nil {
		return nil
	}
	out := new(CamundaClusterList)
	l.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *CamundaClusterList) DeepCopyObject() runtime.Object { return l.DeepCopy() }
