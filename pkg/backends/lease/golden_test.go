package lease_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
)

var update = flag.Bool("update", false, "rewrite golden files")

// TestLeaseWireShape pins the Lease a record is stored as. A change here is a
// change of the wire format: Leases written by earlier releases must still be
// read as ours (see docs/porting.md).
func TestLeaseWireShape(t *testing.T) {
	acquired := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	long := strings.Repeat("n", 253)
	ns63 := strings.Repeat("s", 63)
	tests := []struct {
		name string
		cfg  claim.Config
		rec  claim.Record
	}{
		{
			name: "acquired",
			cfg:  claim.Config{Namespace: "camunda-system", Labels: map[string]string{"app.kubernetes.io/managed-by": "camunda-operator"}},
			rec: claim.Record{
				Key:         "elasticsearch|https://es.data.svc:9200",
				Holder:      claim.Holder{APIVersion: "camunda.io/v1", Kind: "CamundaCluster", Namespace: "team-a", Name: "orders", UID: "6f1c1d2e-8b51-4c1e-9a57-2a3b4c5d6e7f"},
				AcquireTime: acquired,
			},
		},
		{
			name: "long-holder-name",
			cfg:  claim.Config{Namespace: "camunda-system"},
			rec: claim.Record{
				Key:         "rdbms|postgres.db.svc:5432/orders",
				Holder:      claim.Holder{APIVersion: "camunda.io/v1", Kind: "CamundaCluster", Namespace: ns63, Name: long, UID: "0a1b2c3d-0000-4000-8000-000000000001"},
				AcquireTime: acquired,
				Transitions: 3,
				Token:       "48213",
				Successor:   &claim.Holder{APIVersion: "camunda.io/v1", Kind: "CamundaCluster", Namespace: "team-b", Name: "orders-v2", UID: "0a1b2c3d-0000-4000-8000-000000000002"},
			},
		},
		{
			// The claim set of the middleware that wrote it (Config.Set).
			name: "claim-set",
			cfg:  claim.Config{Namespace: "camunda-system", Set: "camundacluster"},
			rec: claim.Record{
				Key:         "elasticsearch|https://es.data.svc:9200",
				Holder:      claim.Holder{APIVersion: "camunda.io/v1", Kind: "CamundaCluster", Namespace: "team-a", Name: "orders", UID: "6f1c1d2e-8b51-4c1e-9a57-2a3b4c5d6e7f"},
				AcquireTime: acquired,
				Set:         "camundacluster",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustConfig(t, tt.cfg)
			l := lease.Encode(cfg, tt.rec)
			// Given any holder, the Lease is a valid object
			if errs := validation.IsDNS1123Subdomain(l.Name); len(errs) > 0 {
				t.Fatalf("Lease name %q: %v", l.Name, errs)
			}
			for k, v := range l.Labels {
				if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
					t.Fatalf("label %s=%q: %v", k, v, errs)
				}
			}
			if n := len(*l.Spec.HolderIdentity); n > lease.HolderIdentityLimit {
				t.Fatalf("holderIdentity is %d bytes", n)
			}
			got, err := yaml.Marshal(l)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tt.name+".golden.yaml")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("reading golden file (run go test -update once to create it): %v", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Fatalf("Lease wire shape changed (-golden +got):\n%s", diff)
			}
			// And it decodes back to the record it was made from
			back := lease.Decode(cfg, tt.rec.Key, l)
			if back.Foreign != "" || !back.Holder.Is(tt.rec.Holder) || back.Holder.Name != tt.rec.Holder.Name || back.Token != tt.rec.Token && !tt.rec.Token.IsZero() {
				t.Fatalf("decoded %+v", back)
			}
		})
	}
}

// mustConfig returns cfg with the defaults a Claimer fills in.
func mustConfig(t *testing.T, cfg claim.Config) backends.Config {
	t.Helper()
	if _, err := claim.New(env.APIReader, env.Client, cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.Storage()
}
