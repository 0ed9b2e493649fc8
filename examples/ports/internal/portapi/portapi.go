// Package portapi defines the custom resources the ported claims of
// examples/ports act for, standing in for the API types of the operator the
// claims were ported from: Backup, Restore and Export (holders of a claim per
// CamundaCluster), Database (holder of a claim per logical database) and
// IdentityPlane (holder of a claim per Keycloak realm). The types, their
// DeepCopy and their CRDs are written by hand; Export's CRD exists so that a
// test can leave it uninstalled, as a kind the API server does not serve.
package portapi

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ocf-claim/claim/envtest"
)

// GroupVersion is the API group and version of every type here.
var GroupVersion = schema.GroupVersion{Group: "ports.example.camunda.io", Version: "v1"}

// Phase is the lifecycle phase of a Backup, Restore or Export.
type Phase string

// The phases. Completed and Failed are terminal.
const (
	PhaseRunning   Phase = "Running"
	PhaseCompleted Phase = "Completed"
	PhaseFailed    Phase = "Failed"
)

// Terminal reports whether p is a phase nothing follows.
func (p Phase) Terminal() bool { return p == PhaseCompleted || p == PhaseFailed }

// AddToScheme registers every type of the package.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Backup{}, &BackupList{}, &Restore{}, &RestoreList{}, &Export{}, &ExportList{},
		&Database{}, &DatabaseList{}, &IdentityPlane{}, &IdentityPlaneList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// JobSpec names the CamundaCluster a Backup, Restore or Export works on, in
// its own namespace.
type JobSpec struct {
	Cluster string `json:"cluster,omitempty"`
}

// JobStatus is the progress of a Backup, Restore or Export.
type JobStatus struct {
	Phase Phase `json:"phase,omitempty"`
	// ResumeFailed is set by a Backup that paused its cluster and could not
	// resume it.
	ResumeFailed bool               `json:"resumeFailed,omitempty"`
	Conditions   []metav1.Condition `json:"conditions,omitempty"`
}

// Backup pauses a CamundaCluster, backs it up and resumes it.
type Backup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              JobSpec   `json:"spec,omitempty"`
	Status            JobStatus `json:"status,omitempty"`
}

// BackupList is a list of Backups.
type BackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Backup `json:"items"`
}

// Restore restores a CamundaCluster from a backup.
type Restore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              JobSpec   `json:"spec,omitempty"`
	Status            JobStatus `json:"status,omitempty"`
}

// RestoreList is a list of Restores.
type RestoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Restore `json:"items"`
}

// Export copies a CamundaCluster's data out. Its CRD is optional.
type Export struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              JobSpec   `json:"spec,omitempty"`
	Status            JobStatus `json:"status,omitempty"`
}

// ExportList is a list of Exports.
type ExportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Export `json:"items"`
}

// DatabaseSpec names a logical database of a PostgreSQL system.
type DatabaseSpec struct {
	// SystemIdentifier is the PostgreSQL system identifier of the server
	// (pg_control_system()), which stays the same across host names.
	SystemIdentifier string `json:"systemIdentifier,omitempty"`
	// Name is the database name.
	Name string `json:"name,omitempty"`
}

// Database is a logical database an operator creates and owns.
type Database struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              DatabaseSpec   `json:"spec,omitempty"`
	Status            DatabaseStatus `json:"status,omitempty"`
}

// DatabaseStatus carries the conditions.
type DatabaseStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DatabaseList is a list of Databases.
type DatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Database `json:"items"`
}

// IdentityPlaneSpec names the Keycloak realm a plane configures.
type IdentityPlaneSpec struct {
	KeycloakURL string `json:"keycloakURL,omitempty"`
	Realm       string `json:"realm,omitempty"`
	// Suspended stops every action of the plane, claims included.
	Suspended bool `json:"suspended,omitempty"`
}

// IdentityPlaneStatus records the realm the plane configured last.
type IdentityPlaneStatus struct {
	KeycloakURL string             `json:"keycloakURL,omitempty"`
	Realm       string             `json:"realm,omitempty"`
	Conditions  []metav1.Condition `json:"conditions,omitempty"`
}

// IdentityPlane configures a Keycloak realm for the workloads it runs.
type IdentityPlane struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              IdentityPlaneSpec   `json:"spec,omitempty"`
	Status            IdentityPlaneStatus `json:"status,omitempty"`
}

// IdentityPlaneList is a list of IdentityPlanes.
type IdentityPlaneList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IdentityPlane `json:"items"`
}

func copyConditions(in []metav1.Condition) []metav1.Condition {
	if in == nil {
		return nil
	}
	out := make([]metav1.Condition, len(in))
	for i := range in {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// Every spec and status field is a value apart from the conditions, so a
// copy is the struct, its ObjectMeta and its conditions.

// DeepCopyObject implements runtime.Object.
func (o *Backup) DeepCopyObject() runtime.Object {
	out := *o
	o.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Status.Conditions = copyConditions(o.Status.Conditions)
	return &out
}

// DeepCopyObject implements runtime.Object.
func (o *Restore) DeepCopyObject() runtime.Object {
	out := *o
	o.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Status.Conditions = copyConditions(o.Status.Conditions)
	return &out
}

// DeepCopyObject implements runtime.Object.
func (o *Export) DeepCopyObject() runtime.Object {
	out := *o
	o.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Status.Conditions = copyConditions(o.Status.Conditions)
	return &out
}

// DeepCopyObject implements runtime.Object.
func (o *Database) DeepCopyObject() runtime.Object {
	out := *o
	o.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Status.Conditions = copyConditions(o.Status.Conditions)
	return &out
}

// DeepCopyObject implements runtime.Object.
func (o *IdentityPlane) DeepCopyObject() runtime.Object {
	out := *o
	o.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Status.Conditions = copyConditions(o.Status.Conditions)
	return &out
}

// DeepCopyObject implements runtime.Object.
func (l *BackupList) DeepCopyObject() runtime.Object {
	out := &BackupList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		out.Items = append(out.Items, *l.Items[i].DeepCopyObject().(*Backup))
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *RestoreList) DeepCopyObject() runtime.Object {
	out := &RestoreList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		out.Items = append(out.Items, *l.Items[i].DeepCopyObject().(*Restore))
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *ExportList) DeepCopyObject() runtime.Object {
	out := &ExportList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		out.Items = append(out.Items, *l.Items[i].DeepCopyObject().(*Export))
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *DatabaseList) DeepCopyObject() runtime.Object {
	out := &DatabaseList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		out.Items = append(out.Items, *l.Items[i].DeepCopyObject().(*Database))
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *IdentityPlaneList) DeepCopyObject() runtime.Object {
	out := &IdentityPlaneList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	for i := range l.Items {
		out.Items = append(out.Items, *l.Items[i].DeepCopyObject().(*IdentityPlane))
	}
	return out
}

// The CRDs. Spec and status keep unknown fields: the schemas are not what
// these tests are about.

// BackupCRD is the CRD of Backup.
func BackupCRD() *apiextensionsv1.CustomResourceDefinition { return crd("Backup", "backups") }

// RestoreCRD is the CRD of Restore.
func RestoreCRD() *apiextensionsv1.CustomResourceDefinition { return crd("Restore", "restores") }

// ExportCRD is the CRD of Export.
func ExportCRD() *apiextensionsv1.CustomResourceDefinition { return crd("Export", "exports") }

// DatabaseCRD is the CRD of Database.
func DatabaseCRD() *apiextensionsv1.CustomResourceDefinition { return crd("Database", "databases") }

// IdentityPlaneCRD is the CRD of IdentityPlane.
func IdentityPlaneCRD() *apiextensionsv1.CustomResourceDefinition {
	return crd("IdentityPlane", "identityplanes")
}

func crd(kind, plural string) *apiextensionsv1.CustomResourceDefinition {
	return envtest.CRD(GroupVersion.WithKind(kind), plural, nil)
}
