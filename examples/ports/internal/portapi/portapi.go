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

// resource is the shape of every kind here: a spec and a status, each with
// its JSON field name.
type resource[Spec, Status any] struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec   `json:"spec,omitempty"`
	Status            Status `json:"status,omitempty"`
}

// list is the shape of every list kind here.
type list[T any] struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []T `json:"items"`
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
type Backup resource[JobSpec, JobStatus]

// BackupList is a list of Backups.
type BackupList list[Backup]

// Restore restores a CamundaCluster from a backup.
type Restore resource[JobSpec, JobStatus]

// RestoreList is a list of Restores.
type RestoreList list[Restore]

// Export copies a CamundaCluster's data out. Its CRD is optional.
type Export resource[JobSpec, JobStatus]

// ExportList is a list of Exports.
type ExportList list[Export]

// DatabaseSpec names a logical database of a PostgreSQL system.
type DatabaseSpec struct {
	// SystemIdentifier is the PostgreSQL system identifier of the server
	// (pg_control_system()), which stays the same across host names.
	SystemIdentifier string `json:"systemIdentifier,omitempty"`
	// Name is the database name.
	Name string `json:"name,omitempty"`
}

// Database is a logical database an operator creates and owns.
type Database resource[DatabaseSpec, DatabaseStatus]

// DatabaseStatus carries the conditions.
type DatabaseStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DatabaseList is a list of Databases.
type DatabaseList list[Database]

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
type IdentityPlane resource[IdentityPlaneSpec, IdentityPlaneStatus]

// IdentityPlaneList is a list of IdentityPlanes.
type IdentityPlaneList list[IdentityPlane]

// Every spec and status field is a value apart from the status's
// conditions, so a copy is the struct with its ObjectMeta and conditions
// copied again: each status names its conditions, copyResource does the rest.

func (s *JobStatus) conditions() *[]metav1.Condition           { return &s.Conditions }
func (s *DatabaseStatus) conditions() *[]metav1.Condition      { return &s.Conditions }
func (s *IdentityPlaneStatus) conditions() *[]metav1.Condition { return &s.Conditions }

// status is a pointer to a status of this package.
type status[T any] interface {
	*T
	conditions() *[]metav1.Condition
}

// copyResource returns a copy of r that shares no memory with it.
func copyResource[Spec, Status any, P status[Status]](r *resource[Spec, Status]) *resource[Spec, Status] {
	out := *r
	r.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if conds := P(&out.Status).conditions(); *conds != nil {
		copied := make([]metav1.Condition, len(*conds))
		for i := range *conds {
			(*conds)[i].DeepCopyInto(&copied[i])
		}
		*conds = copied
	}
	return &out
}

// copyList returns a copy of l that shares no memory with it (its items
// nil when there are none), copying each item with copyItem.
func copyList[T any](l *list[T], copyItem func(*T) runtime.Object) *list[T] {
	out := &list[T]{TypeMeta: l.TypeMeta, ListMeta: *l.ListMeta.DeepCopy()}
	for i := range l.Items {
		out.Items = append(out.Items, *any(copyItem(&l.Items[i])).(*T))
	}
	return out
}

// DeepCopyObject implements runtime.Object.
func (o *Backup) DeepCopyObject() runtime.Object {
	return (*Backup)(copyResource((*resource[JobSpec, JobStatus])(o)))
}

// DeepCopyObject implements runtime.Object.
func (o *Restore) DeepCopyObject() runtime.Object {
	return (*Restore)(copyResource((*resource[JobSpec, JobStatus])(o)))
}

// DeepCopyObject implements runtime.Object.
func (o *Export) DeepCopyObject() runtime.Object {
	return (*Export)(copyResource((*resource[JobSpec, JobStatus])(o)))
}

// DeepCopyObject implements runtime.Object.
func (o *Database) DeepCopyObject() runtime.Object {
	return (*Database)(copyResource((*resource[DatabaseSpec, DatabaseStatus])(o)))
}

// DeepCopyObject implements runtime.Object.
func (o *IdentityPlane) DeepCopyObject() runtime.Object {
	return (*IdentityPlane)(copyResource((*resource[IdentityPlaneSpec, IdentityPlaneStatus])(o)))
}

// DeepCopyObject implements runtime.Object.
func (l *BackupList) DeepCopyObject() runtime.Object {
	return (*BackupList)(copyList((*list[Backup])(l), (*Backup).DeepCopyObject))
}

// DeepCopyObject implements runtime.Object.
func (l *RestoreList) DeepCopyObject() runtime.Object {
	return (*RestoreList)(copyList((*list[Restore])(l), (*Restore).DeepCopyObject))
}

// DeepCopyObject implements runtime.Object.
func (l *ExportList) DeepCopyObject() runtime.Object {
	return (*ExportList)(copyList((*list[Export])(l), (*Export).DeepCopyObject))
}

// DeepCopyObject implements runtime.Object.
func (l *DatabaseList) DeepCopyObject() runtime.Object {
	return (*DatabaseList)(copyList((*list[Database])(l), (*Database).DeepCopyObject))
}

// DeepCopyObject implements runtime.Object.
func (l *IdentityPlaneList) DeepCopyObject() runtime.Object {
	return (*IdentityPlaneList)(copyList((*list[IdentityPlane])(l), (*IdentityPlane).DeepCopyObject))
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
