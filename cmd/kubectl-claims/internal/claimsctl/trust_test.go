package claimsctl

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// plantedConfig is what a tenant writes into its own namespace to make
// another claim read as foreign: annotation keys no record carries.
const plantedConfig = `namespace: trust-claims
annotations:
  key: tenant.example.com/key
  holderUID: tenant.example.com/uid
conditionType: Planted
`

// TestWhyNeverReadsTheConfigurationFromTheObjectNamespace: why's -n names
// the object's namespace, which its tenant writes. A ConfigMap planted
// there must not change how the records read: the claim configuration comes
// only from --claim-namespace or --config-map, and a configuration read
// from elsewhere than the claim namespace is named in a warning.
func TestWhyNeverReadsTheConfigurationFromTheObjectNamespace(t *testing.T) {
	ctx := context.Background()
	const tenant, claims = "trust-tenant", "trust-claims"
	namespace(t, tenant)
	namespace(t, claims)
	n := &names{}
	w := widget(t, tenant, "orders", conditions.ReasonClaimed, `Holds key "rdbms|pg.trust.svc:5432/orders".`)
	n.add(string(w.GetUID()), "0a1b2c3d-1111-4000-8000-000000000001")
	acquire(t, n, claimer(t, claim.Config{Namespace: claims}), "rdbms|pg.trust.svc:5432/orders", w, "4001")
	// Given a tenant planted a claim configuration in its own namespace
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: ConfigMapName}, Data: map[string]string{ConfigMapKey: plantedConfig}}
	if err := env.TestClient(t).Create(ctx, cm); err != nil {
		t.Fatal(err)
	}

	t.Run("why -n <tenant namespace> ignores it", func(t *testing.T) {
		// When an administrator asks why about the tenant's object
		r := run(t, n, nil, "why", "widget/orders", "-n", tenant)
		if r.err != nil {
			t.Fatalf("why: %v\nstderr: %s", r.err, r.errOut)
		}
		// Then the record reads as the Widget's, under the defaults
		if !strings.Contains(r.out, roleHolds) || strings.Contains(strings.ToLower(r.out), "foreign") || strings.Contains(r.out, "Planted") {
			t.Errorf("why read the planted configuration:\n%s\nstderr: %s", r.out, r.errOut)
		}
	})
	t.Run("why -n <tenant namespace> --claim-namespace <claim namespace> ignores it", func(t *testing.T) {
		r := run(t, n, nil, "why", "widget/orders", "-n", tenant, "--claim-namespace", claims)
		if r.err != nil {
			t.Fatalf("why: %v\nstderr: %s", r.err, r.errOut)
		}
		if !strings.Contains(r.out, roleHolds) || strings.Contains(strings.ToLower(r.out), "foreign") {
			t.Errorf("why read the planted configuration:\n%s", r.out)
		}
	})
	t.Run("a --config-map outside the claim namespace is warned about", func(t *testing.T) {
		r := run(t, n, nil, "why", "widget/orders", "-n", tenant, "--claim-namespace", claims, "--config-map", tenant+"/"+ConfigMapName)
		if r.err != nil {
			t.Fatalf("why: %v\nstderr: %s", r.err, r.errOut)
		}
		if !strings.Contains(r.errOut, "Warning: the claim configuration is read from namespace "+tenant+", not from the claim namespace "+claims) {
			t.Errorf("no warning that the configuration comes from another namespace; stderr:\n%s", r.errOut)
		}
	})
	t.Run("a --config-map without a namespace is refused for why", func(t *testing.T) {
		r := run(t, n, nil, "why", "widget/orders", "-n", tenant, "--config-map", ConfigMapName)
		if r.err == nil || !strings.Contains(r.err.Error(), "name its namespace") || r.out != "" {
			t.Errorf("want an error asking for the ConfigMap's namespace and no output, got %v and %q", r.err, r.out)
		}
	})
}

// TestStructuredOutputRedactsEveryStringField: -o json and -o yaml redact
// credentials wherever they reached: a record's detail and a condition
// message quote a key again, not only its key field.
func TestStructuredOutputRedactsEveryStringField(t *testing.T) {
	const secret = "hunter2"
	key := "rdbms|admin:" + secret + "@pg.data.svc/app"
	v := WhyView{
		Object:    HolderView{Kind: "Widget", Namespace: "team-a", Name: "orders"},
		Condition: &metav1.Condition{Type: "Claimed", Message: `Key "` + key + `" is held by Widget team-a/x.`},
		InWords:   "waits for " + key,
		Claims: []WhyClaimRef{{Role: roleWaitsFor, Claim: ClaimView{
			Key: key, Detail: `foreign record of key "` + key + `"; password=` + secret,
			Record: ObjectRef{Namespace: "ops", Name: "host=h password=" + secret},
			Holder: &HolderView{Name: "db?token=" + secret},
		}}},
	}
	for _, format := range []string{outputJSON, outputYAML} {
		var b bytes.Buffer
		if err := writeStructured(&b, format, v); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(b.String(), secret) {
			t.Errorf("-o %s shows the credential:\n%s", format, b.String())
		}
		if !strings.Contains(b.String(), "REDACTED") {
			t.Errorf("-o %s redacted nothing:\n%s", format, b.String())
		}
	}
	if !strings.Contains(v.Claims[0].Claim.Detail, secret) {
		t.Errorf("writeStructured changed the view it was given")
	}
}

// TestBlankLookingCharactersAreShownEscaped: U+2800 and the Hangul fillers
// print as nothing; a key holding one would look like another key (or an
// empty cell), so every output shows them escaped.
func TestBlankLookingCharactersAreShownEscaped(t *testing.T) {
	for _, r := range []rune{'\u2800', '\u3164', '\uFFA0', '\u00A0', '\u2028', '\uE000', '\uFDD0'} {
		key := "pg.data.svc/d" + string(r) + "b"
		var b bytes.Buffer
		if err := (table{header: []string{"KEY"}, rows: [][]string{{key}}}).write(&b, ""); err != nil {
			t.Fatal(err)
		}
		if strings.ContainsRune(b.String(), r) {
			t.Errorf("%U printed raw in a table: %q", r, b.String())
		}
		for _, format := range []string{outputJSON, outputYAML} {
			var s bytes.Buffer
			if err := writeStructured(&s, format, ClaimView{Key: key}); err != nil {
				t.Fatal(err)
			}
			if strings.ContainsRune(s.String(), r) {
				t.Errorf("%U printed raw in -o %s: %q", r, format, s.String())
			}
		}
	}
}

// TestThePluginNeverPrintsAPasswordHoldingSlashes: no kubectl plugin output
// shows the user info of a URL in a key, including passwords holding '/' and
// '//', as the base64 password "Xy9kQ//zP/4w+e=" does. ValidateKey refuses
// such a key, but a record of it can still exist (written by hand or by an
// older release), and neither `kubectl claims list` nor `kubectl claims
// release` prints its user info.
func TestThePluginNeverPrintsAPasswordHoldingSlashes(t *testing.T) {
	const key = "postgres://admin:Xy9kQ//zP/4w+e=@db.data.svc:5432/app"
	secrets := []string{"Xy9kQ", "zP/4w", "admin:"}
	ns := "rel-password-slashes"
	namespace(t, ns)
	n := &names{}
	w := widget(t, ns, "holder", conditions.ReasonClaimed, "")
	n.add(string(w.GetUID()), "0a1b2c3d-1111-4000-8000-000000000001")
	// The claim refuses such a key now (ValidateKey); a record of it is
	// written by hand, or by a release before the refusal.
	createLease(t, n, claim.Config{Namespace: ns}, claim.Record{Key: key, Holder: claim.HolderOf(w)}, "2001")
	if err := env.TestClient(t).Delete(context.Background(), w); err != nil {
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
