// Package v1alpha1 is the API of the ocf-shaped example operator: a Database
// is one logical PostgreSQL database that an application uses, and at most one
// Database may manage a given database at a time (see the controller package).
//
// Database is an owner in the sense of the operator-component-framework (ocf):
// besides being a client.Object it implements GetStatusConditions and GetKind,
// ocf's OperatorCRD contract, so the claim middleware reaches its conditions
// through that method, without reflection.
//
// The types and their DeepCopy are written by hand, as in the camundacluster
// example: one kind, and no code generator for a reader to install.
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and version of the example API.
const (
	Group   = "db.example.com"
	Version = "v1alpha1"
	// Kind is the kind of the only type of the API.
	Kind = "Database"
	// Plural is the resource name the API server serves Databases under.
	Plural = "databases"
)

// GroupVersion is the API group and version of Database.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// AddToScheme registers Database and DatabaseList with s.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Database{}, &DatabaseList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Database is one logical database on a PostgreSQL server, managed for one
// application: its schema is migrated and its connection details published.
type Database struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DatabaseSpec   `json:"spec,omitempty"`
	Status DatabaseStatus `json:"status,omitempty"`
}

// GetStatusConditions hands out the status conditions by pointer: ocf's owner
// contract, which the claim middleware and the controller's components write
// through.
func (d *Database) GetStatusConditions() *[]metav1.Condition { return &d.Status.Conditions }

// GetKind returns the kind even when TypeMeta is empty, as it is on objects
// the client decoded: ocf names components' owners by it.
func (d *Database) GetKind() string { return Kind }

// DatabaseSpec is what a Database wants.
type DatabaseSpec struct {
	// URL names the database as a PostgreSQL connection URL,
	// `postgres://[user@]host[:port]/dbname[?options]`. User, password and
	// options do not change which database it is: the claim key drops them,
	// lower-cases the host and fills in the default port 5432. At most one
	// Database manages a database at a time.
	URL string `json:"url"`
	// SchemaVersion is the schema version the database is migrated to.
	SchemaVersion int32 `json:"schemaVersion,omitempty"`
}

// DatabaseStatus is what the operator observed.
type DatabaseStatus struct {
	// Conditions: Claimed (written by the claim middleware), one condition
	// per component (SchemaReady, ConnectionReady) and Ready, their
	// aggregate.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DatabaseList is a list of Databases.
type DatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Database `json:"items"`
}
