package controller_test

import (
	"strings"
	"testing"

	"github.com/ocf-claim/claim/examples/camundacluster/controller"
	"github.com/ocf-claim/claim/pkg/claim"
)

// Issue 17 item 6: "the example's normalizer cuts at the last '@'" and "no
// condition/event/log line echoes a raw key with credentials". A password
// that holds '/', '?' or '#' ends the URL authority early for net/url, so the
// http(s) references (elasticsearch, opensearch, keycloakRealm) are not cut at
// the last '@' at all: url.Parse sees "user:<password prefix>" as host:port.

// TestAttack17_SearchPasswordWithSlashNeverInError: a password prefix leaks
// through the InvalidKey message of an elasticsearch reference.
func TestAttack17_SearchPasswordWithSlashNeverInError(t *testing.T) {
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

// TestAttack17_RealmPasswordWithSlashNeverInError: the same through keycloakRealm.
func TestAttack17_RealmPasswordWithSlashNeverInError(t *testing.T) {
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

// TestAttack17_SearchNumericPasswordPrefixBecomesThePort: a password that
// starts with digits followed by '/' parses: the user name becomes the host,
// the password prefix the port. The key names a backend nobody uses and
// carries part of the password in clear on the record.
func TestAttack17_SearchNumericPasswordPrefixBecomesThePort(t *testing.T) {
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
