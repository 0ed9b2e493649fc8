package controller_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ocf-claim/claim/examples/camundacluster/controller"
	"github.com/ocf-claim/claim/pkg/claim"
)

// TestKeysHoldOnlyTheParsedHostPortAndDatabase: an rdbms or realm key is
// built from the parsed host, port and database (or realm path) only, so
// that options after the database (";password=", "&password=",
// "?password=") never reach the record's annotations, and every key is one
// ValidateKey accepts.
func TestKeysHoldOnlyTheParsedHostPortAndDatabase(t *testing.T) {
	tests := []struct{ name, storage, realm, want string }{
		{"user info without a scheme", "rdbms|admin:hunter2@db.data.svc/app", "", "rdbms|db.data.svc:5432/app"},
		{"';'-separated password after the database", "rdbms|db.data.svc/app;password=hunter2", "", "rdbms|db.data.svc:5432/app"},
		{"'&'-separated password after the database", "rdbms|db.data.svc/app&password=hunter2", "", "rdbms|db.data.svc:5432/app"},
		{"query password after the database", "rdbms|db.data.svc:6543/app?sslmode=require&password=hunter2", "", "rdbms|db.data.svc:6543/app"},
		{"query password in a realm URL", "", "https://kc.auth.svc/realms/camunda?password=hunter2", "keycloak|https://kc.auth.svc/realms/camunda"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got string
			var err error
			if tt.storage != "" {
				got, err = controller.StorageKey("team-a", tt.storage)
			} else {
				got, err = controller.RealmKey("team-a", tt.realm)
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("key (-want +got):\n%s", diff)
			}
			if err := claim.ValidateKey(got); err != nil {
				t.Errorf("ValidateKey(%q) = %v", got, err)
			}
		})
	}
}

// TestInvalidReferencesAreNeverQuoted: an InvalidKey message says what is
// wrong with the field, never what the tenant wrote: a reference may carry a
// password in any form.
func TestInvalidReferencesAreNeverQuoted(t *testing.T) {
	for _, ref := range []struct{ storage, realm string }{
		{storage: "rdbms|db;password=hunter2/app"},
		{storage: "rdbms|db.data.svc/app%password=hunter2"},
		{storage: "rdbms|db.data.svc:port?password=hunter2/app"},
		{storage: "mongo|db.data.svc/app?password=hunter2"},
		{storage: "elasticsearch|https://es;password=hunter2:9200"},
		{storage: "elasticsearch|https://es.data.svc:x?password=hunter2"},
		{storage: "hunter2"},
		{realm: "https://kc.auth.svc/realms/camunda;password=hunter2"},
		{realm: "https://kc.auth.svc/camunda?password=hunter2"},
		{realm: "ftp://kc.auth.svc/realms/x?password=hunter2"},
		{realm: "https://kc.auth.svc/realms/%zz?password=hunter2"},
	} {
		var err error
		if ref.storage != "" {
			_, err = controller.StorageKey("team-a", ref.storage)
		} else {
			_, err = controller.RealmKey("team-a", ref.realm)
		}
		if err == nil {
			t.Errorf("%+v: no error", ref)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%+v: error %q quotes the reference", ref, err)
		}
	}
}
