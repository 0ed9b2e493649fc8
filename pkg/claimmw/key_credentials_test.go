package claimmw_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// "No condition/event/log line echoes a raw key with credentials". A
// Config.Normalize that refuses a key the ordinary Go way,
// fmt.Errorf("...%q", key), has its error wrapped by NormalizeKey and shown
// in the InvalidKey condition: the user info is redacted there too, not only
// in ValidateKey's own errors, so the key's password never reaches the
// tenant-readable status.
func TestANormalizerErrorDoesNotEchoCredentials(t *testing.T) {
	cfg := claim.Config{Normalize: func(key string) (string, error) {
		if strings.Contains(key, "@") {
			return "", fmt.Errorf("key %q names a backend this operator does not know", key)
		}
		return key, nil
	}}
	f := start(t, setup{claimCfg: &cfg})
	// Given a tenant whose spec names a reference with credentials the key normalizer refuses
	f.createWidget(t, "w", "postgres://app:hunter2@db.data.svc:5432/app")
	// When the middleware judges it
	cond := f.waitForReason(t, "w", conditions.ReasonInvalidKey, 20*time.Second)
	// Then the InvalidKey condition does not echo the password
	if strings.Contains(cond.Message, "hunter2") {
		t.Errorf("InvalidKey condition echoes the password: %q", cond.Message)
	}
}

// TestAPasswordWithASlashIsRefusedEndToEnd: a key normalizer that forgot to
// strip credentials is caught by ValidateKey, as the docs promise ("keys
// carrying URL user info are refused"), even when the password holds '/'
// (pkg/claim pins ValidateKey alone): the key is never granted, written in
// clear to the Lease, or quoted in the Claimed condition.
func TestAPasswordWithASlashIsRefusedEndToEnd(t *testing.T) {
	f := start(t, setup{})
	// Given a tenant whose spec names a URL with user info whose password holds '/'
	f.createWidget(t, "w", "postgres://app:hunter2/x@db.data.svc:5432/app")
	// When the middleware judges it
	// Then it is InvalidKey, and the condition does not echo the password
	cond := f.waitForReason(t, "w", conditions.ReasonInvalidKey, 20*time.Second)
	if strings.Contains(cond.Message, "hunter2") {
		t.Errorf("condition echoes the password: %q", cond.Message)
	}
}
