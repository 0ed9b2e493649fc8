package claimsctl

import (
	"context"
	"strings"
	"testing"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// TestAttack14cPluginNeverPrintsAPasswordHoldingSlashes: promise 5: no
// kubectl plugin output shows the user info of a URL in a key, including
// passwords holding '/' and '//'. A base64 password "Xy9kQ//zP/4w+e=" holds
// both; the library's ValidateKey did not see the user info behind the
// "//" and accepted the key, so records carried it, and `kubectl claims list`
// and `kubectl claims release` printed it in the clear. ValidateKey refuses
// it now; a record of such a key can still exist (written by hand or by an
// older release), and the plugin must not print it.
func TestAttack14cPluginNeverPrintsAPasswordHoldingSlashes(t *testing.T) {
	const key = "postgres://admin:Xy9kQ//zP/4w+e=@db.data.svc:5432/app"
	secrets := []string{"Xy9kQ", "zP/4w", "admin:"}
	ns := "rel-attack14c"
	namespace(t, ns)
	n := &names{}
	w := widget(t, ns, "holder", conditions.ReasonClaimed, "")
	n.add(string(w.GetUID()), "0a1b2c3d-1111-4000-8000-000000000001")
	// The claim refuses such a key now (ValidateKey); a record of it is
	// written by hand, or by a release before the refusal.
	createLease(t, n, claim.Config{Namespace: ns}, claim.Record{Key: key, Holder: claim.HolderOf(w)}, "2001")
	if err := writer(t).Delete(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	check := func(what string, r result) {
		t.Helper()
		all := r.out + r.errOut
		if r.err != nil {
			all += ErrorText(r.err)
		}
		for _, s := range secrets {
			if strings.Contains(all, s) {
				t.Errorf("%s shows user info %q:\n%s", what, s, all)
			}
		}
	}
	check("list", run(t, n, nil, "list", "-n", ns, "-o", "wide"))
	check("release", run(t, n, nil, "release", key, "-n", ns, "--holder-uid", string(w.GetUID()), "--dry-run=client"))
}
