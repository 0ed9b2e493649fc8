// Package portapi defines the custom resources the ported claims of
// examples/ports act for, standing in for the API types of the operator the
// claims were ported from: Backup, Restore and Export (holders of a claim per
// CamundaCluster), Database (holder of a claim per logical database) and
// IdentityPlane (holder of a claim per Keycloak realm). The types take their
// shape and deep copies from internal/testapi, as the tests' own kinds do;
// Export's CRD exists so that a test can leave it uninstalled, as a kind the
// API server does not serve.
package portapi

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/internal/testapi"
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
var AddToScheme = testapi.AddToScheme(GroupVersion,
	&Backup{}, &BackupList{}, &Restore{}, &RestoreList{}, &Export{}, &ExportList{},
	&Database{}, &DatabaseList{}, &IdentityPlane{}, &IdentityPlaneList{})

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
type Backup testapi.Object[JobSpec, JobStatus]

// BackupList is a list of Backups.
type BackupList testapi.List[Backup]

// Restore restores a CamundaCluster from a backup.
type Restore testapi.Object[JobSpec, JobStatus]

// RestoreList is a list of Restores.
type RestoreList testapi.List[Restore]

// Export copies a CamundaCluster's data out. Its CRD is optional.
type Export testapi.Object[JobSpec, JobStatus]

// ExportList is a list of Exports.
type ExportList testapi.List[Export]

// DatabaseSpec names a logical database of a PostgreSQL system.
type DatabaseSpec struct {
	// SystemIdentifier is the PostgreSQL system identifier of the server
	// (pg_control_system()), which stays the same across host names.
	SystemIdentifier string `json:"systemIdentifier,omitempty"`
	// Name is the database name.
	Name string `json:"name,omitempty"`
}

// Database is a logical database an operator creates and owns.
type Database testapi.Object[DatabaseSpec, DatabaseStatus]

// DatabaseStatus carries the conditions.
type DatabaseStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DatabaseList is a list of Databases.
type DatabaseList testapi.List[Database]

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
type IdentityPlane testapi.Object[IdentityPlaneSpec, IdentityPlaneStatus]

// IdentityPlaneList is a list of IdentityPlanes.
type IdentityPlaneList testapi.List[IdentityPlane]

// Every spec and status field is a value apart from the status's
// conditions, so a copy is the struct with its ObjectMeta and conditions
// copied again: each spec deepens nothing, each status its conditions, and
// testapi.CopyInto and testapi.CopyList do the rest.

// Deepen implements testapi.Part.
func (*JobSpec) Deepen() {}

// Deepen implements testapi.Part.
func (*DatabaseSpec) Deepen() {}

// Deepen implements testapi.Part.
func (*IdentityPlaneSpec) Deepen() {}

// Deepen implements testapi.Part.
func (s *JobStatus) Deepen() { s.Conditions = testapi.Conditions(s.Conditions) }

// Deepen implements testapi.Part.
func (s *DatabaseStatus) Deepen() { s.Conditions = testapi.Conditions(s.Conditions) }

// Deepen implements testapi.Part.
func (s *IdentityPlaneStatus) Deepen() { s.Conditions = testapi.Conditions(s.Conditions) }

// The shapes of the kinds.
type (
	job           = testapi.Object[JobSpec, JobStatus]
	database      = testapi.Object[DatabaseSpec, DatabaseStatus]
	identityPlane = testapi.Object[IdentityPlaneSpec, IdentityPlaneStatus]
)

// DeepCopyInto copies o into out.
func (o *Backup) DeepCopyInto(out *Backup) { testapi.CopyInto((*job)(o), (*job)(out)) }

// DeepCopyObject implements runtime.Object.
func (o *Backup) DeepCopyObject() runtime.Object { return (*Backup)(testapi.Copy((*job)(o))) }

// DeepCopyObject implements runtime.Object.
func (l *BackupList) DeepCopyObject() runtime.Object {
	return (*BackupList)(testapi.CopyList((*testapi.List[Backup])(l), (*Backup).DeepCopyInto))
}

// DeepCopyInto copies o into out.
func (o *Restore) DeepCopyInto(out *Restore) { testapi.CopyInto((*job)(o), (*job)(out)) }

// DeepCopyObject implements runtime.Object.
func (o *Restore) DeepCopyObject() runtime.Object { return (*Restore)(testapi.Copy((*job)(o))) }

// DeepCopyObject implements runtime.Object.
func (l *RestoreList) DeepCopyObject() runtime.Object {
	return (*RestoreList)(testapi.CopyList((*testapi.List[Restore])(l), (*Restore).DeepCopyInto))
}

// DeepCopyInto copies o into out.
func (o *Export) DeepCopyInto(out *Export) { testapi.CopyInto((*job)(o), (*job)(out)) }

// DeepCopyObject implements runtime.Object.
func (o *Export) DeepCopyObject() runtime.Object { return (*Export)(testapi.Copy((*job)(o))) }

// DeepCopyObject implements runtime.Object.
func (l *ExportList) DeepCopyObject() runtime.Object {
	return (*ExportList)(testapi.CopyList((*testapi.List[Export])(l), (*Export).DeepCopyInto))
}

// DeepCopyInto copies o into out.
func (o *Database) DeepCopyInto(out *Database) { testapi.CopyInto((*database)(o), (*database)(out)) }

// DeepCopyObject implements runtime.Object.
func (o *Database) DeepCopyObject() runtime.Object { return (*Database)(testapi.Copy((*database)(o))) }

// DeepCopyObject implements runtime.Object.
func (l *DatabaseList) DeepCopyObject() runtime.Object {
	return (*DatabaseList)(testapi.CopyList((*testapi.List[Database])(l), (*Database).DeepCopyInto))
}

// DeepCopyInto copies o into out.
func (o *IdentityPlane) DeepCopyInto(out *IdentityPlane) {
	testapi.CopyInto((*identityPlane)(o), (*identityPlane)(out))
}

// DeepCopyObject implements runtime.Object.
func (o *IdentityPlane) DeepCopyObject() runtime.Object {
	return (*IdentityPlane)(testapi.Copy((*identityPlane)(o)))
}

// DeepCopyObject implements runtime.Object.
func (l *IdentityPlaneList) DeepCopyObject() runtime.Object {
	return (*IdentityPlaneList)(testapi.CopyList((*testapi.List[IdentityPlane])(l), (*IdentityPlane).DeepCopyInto))
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
