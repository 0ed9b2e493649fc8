package lease_test

import (
	"context"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	clocktesting "k8s.io/utils/clock/testing"
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
				RenewTime:   acquired,
			},
		},
		{
			name: "long-holder-name",
			cfg:  claim.Config{Namespace: "camunda-system"},
			rec: claim.Record{
				Key:         "rdbms|postgres.db.svc:5432/orders",
				Holder:      claim.Holder{APIVersion: "camunda.io/v1", Kind: "CamundaCluster", Namespace: ns63, Name: long, UID: "0a1b2c3d-0000-4000-8000-000000000001"},
				AcquireTime: acquired,
				RenewTime:   acquired.Add(30 * time.Second),
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
			if tt.rec.Set == "" {
				// Every write of the protocol stamps the Claimer's set.
				tt.rec.Set = cfg.Set
			}
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
// TestAGrantWritesTheAcquiredGoldenShape: Given the seed constructor on a
// real API server, its clock at the golden file's acquire time, When a holder
// is granted a free key, Then the Lease the server stores, apart from the
// fields the server sets, is exactly testdata/acquired.golden.yaml: the
// golden file is what a grant writes, not only what Encode makes of a
// hand-built record.
func TestAGrantWritesTheAcquiredGoldenShape(t *testing.T) {
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "camunda-system"}}
	if err := env.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	acquired := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c, err := claim.New(env.APIReader, env.Client,
		claim.Config{Namespace: "camunda-system", Labels: map[string]string{"app.kubernetes.io/managed-by": "camunda-operator"}},
		claim.WithClock(clocktesting.NewFakePassiveClock(acquired)))
	if err != nil {
		t.Fatal(err)
	}
	self := claim.Holder{APIVersion: "camunda.io/v1", Kind: "CamundaCluster", Namespace: "team-a", Name: "orders", UID: "6f1c1d2e-8b51-4c1e-9a57-2a3b4c5d6e7f"}
	const k = "elasticsearch|https://es.data.svc:9200"
	_, o, err := c.Acquire(ctx, k, self)
	if err != nil || o.Reason != claim.ReasonAcquired {
		t.Fatalf("Acquire = %s, %v", o.Reason, err)
	}
	t.Cleanup(func() { _ = c.Release(context.Background(), self) })
	l := leaseOf(t, c, k)
	// The fields the API server sets, which no golden file can hold.
	l.ObjectMeta = metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name, Labels: l.Labels, Annotations: l.Annotations}
	l.TypeMeta = metav1.TypeMeta{}
	got, err := yaml.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join("testdata", "acquired.golden.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Fatalf("a grant writes another Lease than the golden file (-golden +granted):\n%s", diff)
	}
}

func mustConfig(t *testing.T, cfg claim.Config) backends.Config {
	t.Helper()
	if _, err := claim.New(env.APIReader, env.Client, cfg); err != nil {
		t.Fatal(err)
	}
	return cfg.Storage()
}

// TestTheLeaseOfAGrantIsTheOneDocsBackendsShows (docs/backends.md, "What each
// one stores", the Lease YAML): Given the seed constructor with defaults,
// When a holder acquires a key, Then the Lease carries exactly the
// annotations the document shows (the claim set annotation among them), and
// the spec times it shows (spec.renewTime among them).
func TestTheLeaseOfAGrantIsTheOneDocsBackendsShows(t *testing.T) {
	documented := documentedLease(t)
	ns := env.Namespace(t)
	c, err := claim.New(env.APIReader, env.Client, claim.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	a := holder(t, ns, "a")
	if _, o, err := c.Acquire(context.Background(), "elasticsearch|https://es.search.svc:9200", a); err != nil || o.Reason != claim.ReasonAcquired {
		t.Fatalf("Acquire = %s, %v", o.Reason, err)
	}
	l := leaseOf(t, c, "elasticsearch|https://es.search.svc:9200")
	keys := func(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }
	if diff := cmp.Diff(keys(documented.Annotations), keys(l.Annotations)); diff != "" {
		t.Errorf("the granted Lease's annotations differ from docs/backends.md (-documented +granted):\n%s", diff)
	}
	if (l.Spec.RenewTime == nil) != (documented.Spec.RenewTime == nil) || (l.Spec.AcquireTime == nil) != (documented.Spec.AcquireTime == nil) {
		t.Errorf("the granted Lease's spec times (acquire %v, renew %v) differ from docs/backends.md's (acquire %v, renew %v)",
			l.Spec.AcquireTime, l.Spec.RenewTime, documented.Spec.AcquireTime, documented.Spec.RenewTime)
	}
}

// documentedLease parses the Lease YAML block of docs/backends.md.
func documentedLease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "backends.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		body, _, _ := strings.Cut(block, "```")
		if !strings.Contains(body, "kind: Lease\n") {
			continue
		}
		var l coordinationv1.Lease
		if err := yaml.Unmarshal([]byte(body), &l); err != nil {
			t.Fatalf("parsing the Lease of docs/backends.md: %v", err)
		}
		return &l
	}
	t.Fatal("docs/backends.md shows no Lease")
	return nil
}
