package claimsctl

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/pkg/backends/annotation"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

var update = flag.Bool("update", false, "rewrite golden files")

var env *envtest.Env

const testGroup = "claims.test.ocf.io"

var (
	widgetGVK  = schema.GroupVersionKind{Group: testGroup, Version: "v1", Kind: "Widget"}
	storageGVK = schema.GroupVersionKind{Group: testGroup, Version: "v1", Kind: "StorageConfig"}
)

func TestMain(m *testing.M) {
	envtest.Main(m, &env, envtest.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{
		crd("widgets", "Widget"), crd("storageconfigs", "StorageConfig"),
	}})
}

// crd is a namespaced CRD of any shape: the plugin reads objects as
// unstructured, so the schema does not matter. No status subresource, so
// that tests write status.conditions with the object.
func crd(plural, kind string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + testGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: testGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Plural: plural, Singular: strings.ToLower(kind), Kind: kind, ListKind: kind + "List",
			},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true),
				}},
			}},
		},
	}
}

// t0 is when the fixture's claims were granted; the plugin's clock reads
// now, so every age is fixed.
var (
	t0  = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	now = t0.Add(90 * time.Minute)
)

// names replaces the UIDs and tokens the API server made up with stable
// ones, so that golden files do not change from run to run.
type names struct {
	mu sync.Mutex
	m  map[string]string
}

func (n *names) add(actual, stable string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.m == nil {
		n.m = map[string]string{}
	}
	n.m[actual] = stable
}

func (n *names) display(s string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if v, ok := n.m[s]; ok {
		return v
	}
	return s
}

// kubeconfig writes env's kubeconfig (the administrator, credentials
// inline) to a file, so the plugin is driven through its real flags.
func kubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, env.KubeConfig(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// result is what one plugin run printed.
type result struct {
	out, errOut string
	err         error
}

// run runs the plugin with args as kubectl would, against env, with the
// clock at now and n's stable names. wrap, if not nil, wraps the plugin's
// REST config (to step into its requests).
func run(t *testing.T, n *names, wrap func(*rest.Config) *rest.Config, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	o := newOptions(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, clocktesting.NewFakePassiveClock(now))
	o.display = n.display
	o.Flags.WrapConfigFn = wrap
	cmd := o.command()
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfig(t), "--cache-dir", t.TempDir()}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := cmd.ExecuteContext(ctx)
	return result{out: out.String(), errOut: errOut.String(), err: err}
}

// golden compares got with testdata/name, rewriting it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update once to create it): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Fatalf("output of %s changed (-golden +got):\n%s", name, diff)
	}
}

// namespace creates a namespace with a fixed name: the control plane is
// this test binary's own, so names cannot collide, and fixed names keep
// them out of the replacement table.
func namespace(t *testing.T, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.TestClient(t).Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
}

// widget creates a Widget in ns with the given claim condition (none when
// reason is empty) and returns it with its UID.
func widget(t *testing.T, ns, name string, reason conditions.Reason, message string) *unstructured.Unstructured {
	t.Helper()
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK)
	w.SetNamespace(ns)
	w.SetName(name)
	if reason != "" {
		c := map[string]any{
			"type": string(conditions.Claimed), "status": string(reason.Status()), "reason": string(reason),
			"message": message, "observedGeneration": int64(1),
			"lastTransitionTime": t0.Add(30 * time.Minute).Format(time.RFC3339),
		}
		if err := unstructured.SetNestedSlice(w.Object, []any{c}, "status", "conditions"); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.TestClient(t).Create(context.Background(), w); err != nil {
		t.Fatalf("creating Widget %s/%s: %v", ns, name, err)
	}
	return w
}

// claimer is a Lease claimer whose grants are stamped at t0.
func claimer(t *testing.T, cfg claim.Config) *claim.Claimer {
	t.Helper()
	c, err := claim.New(env.APIReader, env.TestClient(t), cfg, claim.WithClock(clocktesting.NewFakePassiveClock(t0)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// acquire makes self hold key and names its token.
func acquire(t *testing.T, n *names, c *claim.Claimer, key string, self *unstructured.Unstructured, token string) claim.Outcome {
	t.Helper()
	_, o, err := c.Acquire(context.Background(), key, claim.HolderOf(self))
	if err != nil || !o.Granted() {
		t.Fatalf("acquiring %q for %s: %+v, %v", key, self.GetName(), o, err)
	}
	n.add(o.Token.String(), token)
	return o
}

// createLease stores rec as the Lease backend would, for records the
// protocol has no call for yet (a pending successor), and names its token.
func createLease(t *testing.T, n *names, cfg claim.Config, rec claim.Record, token string) *coordinationv1.Lease {
	t.Helper()
	l := lease.Encode(cfg.Storage(), rec)
	if err := env.TestClient(t).Create(context.Background(), l); err != nil {
		t.Fatalf("creating Lease for %q: %v", rec.Key, err)
	}
	n.add(l.ResourceVersion, token)
	return l
}

// fixture is the cluster state every list and why golden file shows:
//
//	ops     the claim namespace: Leases of keys held by team-a's Widgets, a
//	        foreign Lease, a Lease of leader election (not a claim)
//	team-a  Widgets orders (holds), orders-v2 (parked, planned successor),
//	        reports (no condition); billing's claim outlived it; a
//	        StorageConfig carries an annotation-backed claim of orders
type fixture struct {
	names *names
	cfg   claim.Config
}

var (
	fixtureOnce sync.Once
	theFixture  *fixture
)

// fixtureLabel is on every record of the fixture, for -A -l.
const fixtureLabel = "app.kubernetes.io/managed-by"

const (
	keyES      = "es|https://es.data.svc:9200"
	keyOrders  = "rdbms|pg.db.svc:5432/orders"
	keyBilling = "rdbms|pg.db.svc:5432/billing"
	keyLegacy  = "rdbms|legacy.db.svc:5432/orders"
	keyStorage = "storage|team-a/es-main"
)

func setup(t *testing.T) *fixture {
	t.Helper()
	fixtureOnce.Do(func() { theFixture = buildFixture(t) })
	if theFixture == nil {
		t.Fatal("the fixture failed to build in an earlier test")
	}
	return theFixture
}

func buildFixture(t *testing.T) *fixture {
	ctx := context.Background()
	n := &names{}
	namespace(t, "ops")
	namespace(t, "team-a")
	labels := map[string]string{fixtureLabel: "widget-operator"}
	cfg := claim.Config{Namespace: "ops", Labels: labels}
	c := claimer(t, cfg)
	cfg = c.Config()

	orders := widget(t, "team-a", "orders", conditions.ReasonClaimed, `Holds keys "es|https://es.data.svc:9200", "rdbms|pg.db.svc:5432/orders".`)
	ordersV2 := widget(t, "team-a", "orders-v2", conditions.ReasonParked, `Key "es|https://es.data.svc:9200" is held by Widget team-a/orders.`)
	reports := widget(t, "team-a", "reports", "", "")
	billing := widget(t, "team-a", "billing", conditions.ReasonClaimed, `Holds key "rdbms|pg.db.svc:5432/billing".`)
	n.add(string(orders.GetUID()), "0a1b2c3d-1111-4000-8000-000000000001")
	n.add(string(ordersV2.GetUID()), "7e8f9a0b-2222-4000-8000-000000000002")
	n.add(string(reports.GetUID()), "5c6d7e8f-3333-4000-8000-000000000003")
	n.add(string(billing.GetUID()), "9f0e1d2c-4444-4000-8000-000000000004")

	acquire(t, n, c, keyES, orders, "1207")
	acquire(t, n, c, keyBilling, billing, "1212")
	// billing is deleted while its operator is away: its claim stays.
	if err := env.TestClient(t).Delete(ctx, billing); err != nil {
		t.Fatal(err)
	}
	// orders hands keyOrders over to orders-v2 (a planned handover).
	ov2 := claim.HolderOf(ordersV2)
	createLease(t, n, cfg, claim.Record{Key: keyOrders, Holder: claim.HolderOf(orders), Successor: &ov2, AcquireTime: t0.Add(-24 * time.Hour)}, "1188")

	// A Lease someone made by hand under the name of keyLegacy.
	foreign := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: cfg.Storage().RecordName(keyLegacy), Labels: labels,
			Annotations: map[string]string{cfg.Annotations.Key: keyLegacy, cfg.Annotations.HolderName: "orders"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("orders"), AcquireTime: ptr.To(metav1.NewMicroTime(t0.Add(-2 * time.Hour)))},
	}
	if err := env.TestClient(t).Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	n.add(foreign.ResourceVersion, "1043")
	// Leader election's Lease is no claim record and never listed.
	le := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "widget-operator-leader"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("widget-operator-7d9f")}}
	if err := env.TestClient(t).Create(ctx, le); err != nil {
		t.Fatal(err)
	}

	// An annotation-backed claim on a StorageConfig.
	sc := &unstructured.Unstructured{}
	sc.SetGroupVersionKind(storageGVK)
	sc.SetNamespace("team-a")
	sc.SetName("es-main")
	sc.SetLabels(labels)
	if err := env.TestClient(t).Create(ctx, sc); err != nil {
		t.Fatal(err)
	}
	proto := &unstructured.Unstructured{}
	proto.SetGroupVersionKind(storageGVK)
	ac, err := claim.New(env.APIReader, env.TestClient(t), claim.Config{}, claim.WithBackend(annotation.Backend(annotation.Options{
		Object: proto,
		Target: func(key string) (types.NamespacedName, error) {
			return types.NamespacedName{Namespace: "team-a", Name: "es-main"}, nil
		},
	})))
	if err != nil {
		t.Fatal(err)
	}
	acquire(t, n, ac, keyStorage, orders, "1215")
	return &fixture{names: n, cfg: cfg}
}
