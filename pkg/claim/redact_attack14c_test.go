package claim_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
)

// TestAttack14cBase64PasswordWithSlashesIsRefusedOrRedacted: promise 5: no
// error or message built by the library shows the user info of a URL in a
// key, including passwords holding '/' and '//'. A generated base64 password
// such as "Xy9kQ//zP/4w+e=" holds both. hasUserinfo cuts the URL at the
// "//" inside the password, then cuts the next run at its '/' and sees no
// ':' before it, so ValidateKey accepts the key as credential-free: Acquire
// grants it, and its Outcome.Message (and the log lines keyed "claimKey")
// quote the user name and the whole password. ValidateKey's own error for
// the same key with a control character quotes it unredacted too.
func TestAttack14cBase64PasswordWithSlashesIsRefusedOrRedacted(t *testing.T) {
	const key = "postgres://admin:Xy9kQ//zP/4w+e=@db.data.svc:5432/app"
	secrets := []string{"admin", "Xy9kQ", "zP/4w"}

	t.Run("Acquire", func(t *testing.T) {
		c, err := memory.NewClaimer(memory.New(), claim.Config{Namespace: "ns"})
		if err != nil {
			t.Fatal(err)
		}
		self := claim.Holder{Kind: "Worker", Namespace: "ns", Name: "w", UID: "uid-w"}
		_, o, err := c.Acquire(context.Background(), key, self)
		if err != nil {
			if !errors.Is(err, claim.ErrInvalidKey) {
				t.Fatalf("Acquire error = %v, want ErrInvalidKey", err)
			}
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("Acquire error shows user info %q: %v", s, err)
				}
			}
			return
		}
		for _, s := range secrets {
			if strings.Contains(o.Message, s) {
				t.Errorf("Acquire granted a key with user info (%s) and its message shows %q: %s", o.Reason, s, o.Message)
			}
		}
	})
	t.Run("ValidateKey control character", func(t *testing.T) {
		err := claim.ValidateKey(key + "\x01")
		if !errors.Is(err, claim.ErrInvalidKey) {
			t.Fatalf("ValidateKey = %v, want ErrInvalidKey", err)
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("ValidateKey error shows user info %q: %v", s, err)
			}
		}
	})
}

// TestAttack14cPasswordWithABarIsRedacted: promise 5 (the listed characters
// are "including", not "only"): a password holding '|' ends the redactor's
// run at the bar, which it takes for a composite key's separator, so Redact
// leaves "admin:pa" in the clear, ValidateKey accepts the key (no '@' before
// the bar), and NormalizeKey's error for a normalizer that quotes its input
// (url.Parse does: "net/url: invalid userinfo") shows it too.
func TestAttack14cPasswordWithABarIsRedacted(t *testing.T) {
	const key = "postgres://admin:pa|ss@db.data.svc:5432/app"
	if got := claim.Redact(key); strings.Contains(got, "admin:pa") {
		t.Errorf("Redact(%q) = %q, shows the user info", key, got)
	}
	if err := claim.ValidateKey(key); err == nil {
		t.Errorf("ValidateKey(%q) = nil: a URL with user info is accepted and will be stored and quoted in clear", key)
	}
}
