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
