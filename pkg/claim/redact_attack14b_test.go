package claim_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ocf-claim/claim/pkg/claim"
)

// TestAttack14bPasswordWithDoubleSlashIsNeverEchoed: promise: errors never
// echo URL user info. Generated passwords (base64: openssl rand -base64)
// often hold "//". ValidateKey refuses such a key (it does find the user
// info), but its error quotes the key through the redactor, which cuts the
// URL at the "//" inside the password and so prints the user name and the
// start of the password: "postgres://admin:Xy9REDACTED@db...". Redact, used
// for messages, events and logs, leaks the same way.
func TestAttack14bPasswordWithDoubleSlashIsNeverEchoed(t *testing.T) {
	key := "postgres://admin:Xy9kQ//zP4w+e=@db.data.svc:5432/app"
	err := claim.ValidateKey(key)
	if !errors.Is(err, claim.ErrInvalidKey) {
		t.Fatalf("ValidateKey(%q) = %v, want ErrInvalidKey", key, err)
	}
	for _, secret := range []string{"Xy9kQ", "zP4w", "admin"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("ValidateKey error echoes user info %q: %v", secret, err)
		}
		if got := claim.Redact(key); strings.Contains(got, secret) {
			t.Errorf("Redact(%q) = %q still shows user info %q", key, got, secret)
		}
	}
}
