// Package v1alpha1 is the API of the example operator: a CamundaCluster
// names the secondary-storage backend it writes to and, optionally, the
// Keycloak realm it registers its clients in. Both are single-writer
// resources, so the operator lets at most one CamundaCluster use each at a
// time (see the controller package).
//
// The types and their DeepCopy are written by hand: the example has one
// kind, and a code generator would be the only tool a reader needs to build
// it. The CRD that matches them is in ../../config/crd.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and version of the example API.
const (
	Group   = "camunda.example.com"
	Version = "v1alpha1"
	// Kind is the kind of the only type of the API.
	Kind = "CamundaCluster"
)

// GroupVersion is the API group and version of CamundaCluster.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// AddToScheme registers CamundaCluster and CamundaClusterList with s.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &CamundaCluster{}, &CamundaClusterList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// CamundaCluster is one Camunda installation: a StatefulSet of brokers that
// export to a secondary-storage backend.
type CamundaCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CamundaClusterSpec   `json:"spec,omitempty"`
	Status CamundaClusterStatus `json:"status,omitempty"`
}

// CamundaClusterSpec is what a CamundaCluster wants.
type CamundaClusterSpec struct {
	// SecondaryStorage names the backend the cluster exports to, as
	// `<type>|<address>`: `elasticsearch|https://es.data.svc:9200` or
	// `rdbms|postgres.data.svc:5432/camunda`. A bare service name is taken
	// to be in the cluster's namespace. At most one CamundaCluster uses a
	// backend at a time.
	SecondaryStorage string `json:"secondaryStorage"`
	// KeycloakRealm is the URL of the Keycloak realm the cluster registers
	// its clients in, such as `https://keycloak.auth.svc/realms/camunda`.
	// Optional; at most one CamundaCluster uses a realm at a time.
	KeycloakRealm string `json:"keycloakRealm,omitempty"`
	// Replicas is the number of brokers while the cluster holds its claims.
	// A cluster that does not hold them runs none. Default 1.
	Replicas int32 `json:"replicas,omitempty"`
	// HandoverTo names another CamundaCluster in the same namespace to hand
	// this cluster's backend and realm to (a planned handover): this
	// cluster stops its brokers, and once they are gone the successor holds
	// the keys with a new fencing token. Clearing it before then aborts.
	HandoverTo string `json:"handoverTo,omitempty"`
}

// CamundaClusterStatus is what the operator observed.
type CamundaClusterStatus struct {
	// Conditions: Claimed (written by the claim middleware) and Ready.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation the Ready condition was
	// computed for.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// StorageToken is the fencing token of the cluster's grant of its
	// storage backend, empty while it holds none. The brokers present it
	// to the backend, which refuses tokens older than the newest it saw.
	StorageToken string `json:"storageToken,omitempty"`
}

// CamundaClusterList is a list of CamundaClusters.
type CamundaClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CamundaCluster `json:"items"`
}
