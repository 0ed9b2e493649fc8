package claimsctl

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// legacyConfig is the configuration of an operator ported from a
// hand-written claim: its own prefix, annotation keys and holder label.
var legacyConfig = `# published by the widget operator
namespace: legacy-ops
prefix: storage-claim-
holderUIDLabel: widgets.example.com/claim-holder-uid
annotations:
  key: widgets.example.com/claim-key
  holderNamespace: widgets.example.com/claim-holder-namespace
  holderName: widgets.example.com/claim-holder-name
  holderUID: widgets.example.com/claim-holder-uid
`

// TestPublishedConfig: Given records written under a non-default claim
// configuration, When list runs with that configuration published in the
// ConfigMap, or given as flags, Then it reads them as held records; without
// it, it reads them as foreign records.
func TestPublishedConfig(t *testing.T) {
	ctx := context.Background()
	n := &names{}
	published, err := ParsePublished([]byte(legacyConfig))
	if err != nil {
		t.Fatal(err)
	}
	holderNS := "legacy-team"
	namespace(t, holderNS)
	w := widget(t, holderNS, "orders", conditions.ReasonClaimed, "")
	n.add(string(w.GetUID()), "0a1b2c3d-1111-4000-8000-000000000001")
	for _, ns := range []string{"legacy-ops", "legacy-flags"} {
		namespace(t, ns)
		uidLabel := published.HolderUIDLabel
		a := published.Annotations
		c := claimer(t, claim.Config{
			Namespace: ns, Prefix: published.Prefix,
			HolderLabels: func(h claim.Holder) map[string]string { return map[string]string{uidLabel: string(h.UID)} },
			Annotations:  backends.Annotations{Key: a.Key, HolderNamespace: a.HolderNamespace, HolderName: a.HolderName, HolderUID: a.HolderUID},
		})
		acquire(t, n, c, "storage|orders", w, "3001")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "legacy-ops", Name: ConfigMapName}, Data: map[string]string{ConfigMapKey: legacyConfig}}
	if err := env.TestClient(t).Create(ctx, cm); err != nil {
		t.Fatal(err)
	}

	flags := []string{
		"--prefix", "storage-claim-", "--holder-uid-label", "widgets.example.com/claim-holder-uid",
		"--annotation-keys", "key=widgets.example.com/claim-key,holderNamespace=widgets.example.com/claim-holder-namespace," +
			"holderName=widgets.example.com/claim-holder-name,holderUID=widgets.example.com/claim-holder-uid",
	}
	tests := []goldenRun{
		{"published in the claim namespace", []string{"list", "-n", "legacy-ops"}, "config-published.golden"},
		{"published, found through --claim-namespace", []string{"list", "--claim-namespace", "legacy-ops"}, "config-published.golden"},
		{"published, named with --config-map", []string{"list", "-n", "legacy-flags", "--config-map", "legacy-ops/" + ConfigMapName}, "config-published.golden"},
		{"given as flags", append([]string{"list", "-n", "legacy-flags"}, flags...), "config-published.golden"},
		{"without it, the records read as foreign (some annotation keys are the defaults)", []string{"list", "-n", "legacy-flags"}, "config-none.golden"},
	}
	runGolden(t, n, tests)

	t.Run("a ConfigMap named with --config-map must exist", func(t *testing.T) {
		r := run(t, n, nil, "list", "-n", "legacy-ops", "--config-map", "missing")
		if r.err == nil || !strings.Contains(r.err.Error(), "legacy-ops/missing") {
			t.Fatalf("want an error naming legacy-ops/missing, got %v", r.err)
		}
	})
}

// TestParsePublished: the published configuration is strict YAML or JSON;
// flags override it field by field.
func TestParsePublished(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    Published
		wantErr string
	}{
		{"empty is every default", "", Published{}, ""},
		{"json", `{"prefix":"x-","annotations":{"token":"a.io/t"}}`, Published{Prefix: "x-", Annotations: AnnotationKeys{Token: "a.io/t"}}, ""},
		{"a misspelt field is an error", "prefx: x-\n", Published{}, `unknown field "prefx"`},
		{"a misspelt annotation field is an error", "annotations:\n  holderUUID: a.io/u\n", Published{}, `unknown field "holderUUID"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParsePublished([]byte(tt.data))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("want an error with %q, got %v", tt.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
	base := Published{Namespace: "ops", Prefix: "a-", Annotations: AnnotationKeys{Key: "a.io/k", Token: "a.io/t"}}
	got := base.override(Published{Prefix: "b-", Annotations: AnnotationKeys{Token: "b.io/t"}})
	want := Published{Namespace: "ops", Prefix: "b-", Annotations: AnnotationKeys{Key: "a.io/k", Token: "b.io/t"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("override (-want +got):\n%s", diff)
	}
}

// TestEveryRecordAnnotationCanBePublished: Given the annotation keys a
// claim.Config can rename (backends.Annotations), Then the published
// configuration and the --annotation-keys flag can name each of them, so
// that the plugin can follow an operator that renamed any one.
func TestEveryRecordAnnotationCanBePublished(t *testing.T) {
	published := reflect.TypeFor[AnnotationKeys]()
	flagged := (&AnnotationKeys{}).fields()
	for f := range reflect.TypeFor[backends.Annotations]().Fields() {
		if _, ok := published.FieldByName(f.Name); !ok {
			t.Errorf("backends.Annotations.%s has no field in the published AnnotationKeys", f.Name)
		}
		flag := strings.ToLower(f.Name[:1]) + f.Name[1:]
		if _, ok := flagged[flag]; !ok {
			t.Errorf("backends.Annotations.%s cannot be given to --annotation-keys as %q", f.Name, flag)
		}
	}
}
