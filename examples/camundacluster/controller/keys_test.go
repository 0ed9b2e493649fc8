package controller_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ocf-claim/claim/examples/camundacluster/api/v1alpha1"
	"github.com/ocf-claim/claim/examples/camundacluster/controller"
	"github.com/ocf-claim/claim/pkg/claim"
)

func TestKeys(t *testing.T) {
	tests := []struct {
		name           string
		storage, realm string
		want           []string
		wantErr        bool
	}{{
		name:    "given an Elasticsearch URL, then the key is type|scheme://host:port",
		storage: "elasticsearch|https://es.data.svc:9200",
		want:    []string{"elasticsearch|https://es.data.svc:9200"},
	}, {
		name:    "given case, credentials, a path and no port, then they are normalized away and the default port filled in",
		storage: " ElasticSearch | HTTPS://user:pw@ES.Data.svc/some/path?q=1",
		want:    []string{"elasticsearch|https://es.data.svc:9200"},
	}, {
		name:    "given a bare service name, then it is qualified with the cluster's namespace",
		storage: "opensearch|http://search",
		want:    []string{"opensearch|http://search.team-a.svc:9200"},
	}, {
		name:    "given an RDBMS reference with credentials and no port, then the key keeps host, default port and database",
		storage: "rdbms|app:secret@Postgres.data.svc/camunda",
		want:    []string{"rdbms|postgres.data.svc:5432/camunda"},
	}, {
		name:    "given a realm URL with credentials, default port and trailing slash, then the realm key drops them",
		storage: "rdbms|pg:6543/camunda",
		realm:   "https://admin:pw@Keycloak.auth.svc:443/auth/realms/camunda/",
		want:    []string{"rdbms|pg.team-a.svc:6543/camunda", "keycloak|https://keycloak.auth.svc/auth/realms/camunda"},
	}, {
		name: "given a realm on a non-default port, then the port stays", storage: "rdbms|pg/db",
		realm: "http://kc.auth.svc:8080/realms/x",
		want:  []string{"rdbms|pg.team-a.svc:5432/db", "keycloak|http://kc.auth.svc:8080/realms/x"},
	},
		{name: "given an unknown storage type, then it is invalid", storage: "elastic|https://es:9200", wantErr: true},
		{name: "given no separator, then it is invalid", storage: "https://es:9200", wantErr: true},
		{name: "given a non-HTTP search URL, then it is invalid", storage: "elasticsearch|ftp://es", wantErr: true},
		{name: "given a bad port, then it is invalid", storage: "elasticsearch|https://es:http", wantErr: true},
		{name: "given an RDBMS reference without database, then it is invalid", storage: "rdbms|pg:5432", wantErr: true},
		{name: "given a realm URL without /realms/, then it is invalid", storage: "rdbms|pg/db", realm: "https://kc/camunda", wantErr: true},
		{name: "given a realm URL with a sub-path after the realm, then it is invalid", storage: "rdbms|pg/db", realm: "https://kc/realms/a/b", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cc := &v1alpha1.CamundaCluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c"},
				Spec:       v1alpha1.CamundaClusterSpec{SecondaryStorage: tt.storage, KeycloakRealm: tt.realm},
			}
			got, err := controller.Keys(cc)
			if tt.wantErr {
				if !errors.Is(err, controller.ErrInvalidReference) {
					t.Fatalf("Keys() = %q, %v; want an error wrapping ErrInvalidReference", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Keys() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodsOfKeySelectsByTheKeysKindHashAndThePreviousHoldersUID(t *testing.T) {
	storage, realm := "elasticsearch|https://es.data.svc:9200", "keycloak|https://kc.auth.svc/realms/x"
	tests := []struct {
		key  string
		want map[string]string
	}{
		{storage, map[string]string{controller.LabelStorageClaim: controller.KeyHash(storage), controller.LabelClusterUID: "u1"}},
		{realm, map[string]string{controller.LabelRealmClaim: controller.KeyHash(realm), controller.LabelClusterUID: "u1"}},
	}
	for _, tt := range tests {
		got := controller.PodsOfKey(tt.key, holder("u1"))
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("PodsOfKey(%q) (-want +got):\n%s", tt.key, diff)
		}
	}
}

func holder(uid string) claim.Holder {
	return claim.Holder{Kind: v1alpha1.Kind, Namespace: "team-a", Name: "old", UID: types.UID(uid)}
}

func TestAPasswordNeverSplitsADatabaseNorReachesAMessage(t *testing.T) {
	for _, tc := range []struct {
		name, storage, realm string
	}{
		{name: "given a password with @ in an RDBMS reference", storage: "rdbms|app:p@ss@Postgres.data.svc/camunda"},
		{name: "given a password with / and @ in an RDBMS reference", storage: "rdbms|app:p/s@s@postgres.data.svc:5432/camunda"},
		{name: "given a password with @ in a realm URL", storage: "rdbms|postgres.data.svc/camunda", realm: "https://admin:p%40ss@keycloak.auth.svc/realms/camunda"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cc := &v1alpha1.CamundaCluster{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c"},
				Spec:       v1alpha1.CamundaClusterSpec{SecondaryStorage: tc.storage, KeycloakRealm: tc.realm},
			}
			// Then the database is the one key it is without credentials
			keys, err := controller.Keys(cc)
			if err != nil {
				t.Fatal(err)
			}
			if keys[0] != "rdbms|postgres.data.svc:5432/camunda" {
				t.Errorf("storage key %q, want rdbms|postgres.data.svc:5432/camunda", keys[0])
			}
			for _, k := range keys {
				if strings.Contains(k, "ss") && strings.Contains(k, "p") && strings.Contains(k, "@") {
					t.Errorf("key %q keeps credentials", k)
				}
			}
		})
	}
	// Given invalid references carrying passwords, then the error (the
	// InvalidKey message) never echoes the password
	for _, ref := range []struct{ storage, realm string }{
		{storage: "rdbms|app:hunter2@postgres.data.svc"},            // no database
		{storage: "mongo|app:hunter2@mongo.data.svc/db"},            // unknown type
		{storage: "elasticsearch|https://u:hunter2@es:badport"},     // bad port
		{storage: "rdbms|pg/db", realm: "https://u:hunter2@kc/x"},   // no /realms/
		{storage: "rdbms|pg/db", realm: "https://u:hunter2@kc/%zz"}, // unparsable
	} {
		cc := &v1alpha1.CamundaCluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "c"},
			Spec:       v1alpha1.CamundaClusterSpec{SecondaryStorage: ref.storage, KeycloakRealm: ref.realm},
		}
		_, err := controller.Keys(cc)
		if err == nil {
			t.Errorf("%+v: no error", ref)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error %q echoes the password", err)
		}
	}
}

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

// The example's normalizer cuts credentials at the last '@', and no
// condition, event or log line echoes a raw key with credentials, also when
// the password holds '/', '?' or '#', which end the URL authority early for
// net/url (url.Parse would see "user:<password prefix>" as host:port) in the
// http(s) references: elasticsearch, opensearch, keycloakRealm.

// TestASearchPasswordHoldingASlashIsNeverInAKeyOrError: no part of the
// password reaches the key or the InvalidKey message of an elasticsearch or
// opensearch reference.
func TestASearchPasswordHoldingASlashIsNeverInAKeyOrError(t *testing.T) {
	for _, ref := range []string{
		"elasticsearch|https://elastic:hunter2/x@es.data.svc:9200",
		"elasticsearch|https://elastic:hunter2?x@es.data.svc:9200",
		"opensearch|https://elastic:hunter2#x@es.data.svc:9200",
	} {
		t.Run(ref, func(t *testing.T) {
			// Given a tenant's spec.secondaryStorage whose password holds '/', '?' or '#'
			// When the example's normalizer builds the key
			key, err := controller.StorageKey("tenant", ref)
			// Then neither the key nor the error (the InvalidKey condition) carries any part of the password
			if strings.Contains(key, "hunter2") {
				t.Errorf("key %q carries the password", key)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error echoes the password: %v", err)
			}
		})
	}
}

// TestARealmPasswordHoldingASlashIsNeverInAKeyOrError: the same through keycloakRealm.
func TestARealmPasswordHoldingASlashIsNeverInAKeyOrError(t *testing.T) {
	for _, ref := range []string{
		"https://admin:hunter2/x@keycloak.auth.svc/realms/camunda",
		"https://admin:hunter2?x@keycloak.auth.svc/realms/camunda",
	} {
		t.Run(ref, func(t *testing.T) {
			// Given a realm URL whose password holds '/' or '?'
			// When the example's normalizer builds the key
			key, err := controller.RealmKey("tenant", ref)
			// Then no part of the password is echoed
			if strings.Contains(key, "hunter2") || (err != nil && strings.Contains(err.Error(), "hunter2")) {
				t.Errorf("password echoed: key %q, err %v", key, err)
			}
		})
	}
}

// TestASearchPasswordStartingWithDigitsIsCutAtTheLastAt: a password that
// starts with digits followed by '/' would parse as host and port (the user
// name the host, the password prefix the port), naming a backend nobody uses
// and carrying part of the password in clear on the record; cut at the last
// '@', the key is the one of the same backend without credentials.
func TestASearchPasswordStartingWithDigitsIsCutAtTheLastAt(t *testing.T) {
	// Given two clusters naming the same Elasticsearch, one with credentials whose password is "1234/abc"
	plain, err := controller.StorageKey("tenant", "elasticsearch|https://es.data.svc:9200")
	if err != nil {
		t.Fatal(err)
	}
	// When the normalizer builds the key of the one with credentials
	withCreds, err := controller.StorageKey("tenant", "elasticsearch|https://elastic:1234/abc@es.data.svc:9200")
	// Then it is cut at the last '@': the same key, one claim for one backend
	if err != nil {
		t.Fatalf("StorageKey: %v", err)
	}
	if withCreds != plain {
		t.Errorf("credentials not cut at the last '@': key %q, want %q", withCreds, plain)
	}
	if err := claim.ValidateKey(withCreds); err != nil {
		t.Logf("ValidateKey: %v", err)
	}
}
