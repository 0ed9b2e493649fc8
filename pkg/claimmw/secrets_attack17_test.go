package claimmw_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// Issue 17 item 6: "no condition/event/log line echoes a raw key with
// credentials". A Config.Normalize that refuses a key the ordinary Go way,
// fmt.Errorf("...%q", key), has its error wrapped by NormalizeKey and shown
// whole in the InvalidKey condition: the library redacts user info in
// ValidateKey's own errors, but not in the normalizer error it wraps, so the raw
// key with its password is written to the tenant-readable status.
func TestAttack17_NormalizeErrorDoesNotEchoCredentials(t *testing.T) {
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

// TestAttack17_PasswordWithSlashIsRefusedEndToEnd: a key normalizer that forgot to
// strip credentials is caught by ValidateKey, which the docs promise ("keys
// carrying URL user info are refused"). A password holding '/' slips past it
// (see pkg/claim TestAttack17_ValidateKeyRefusesHiddenUserinfo): the key is
// granted, written in clear to the Lease, and quoted in the Claimed condition.
func TestAttack17_PasswordWithSlashIsRefusedEndToEnd(t *testing.T) {
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
