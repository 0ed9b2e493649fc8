package realmclaim_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/examples/ports/internal/portapi"
	"github.com/ocf-claim/claim/examples/ports/internal/porttest"
	"github.com/ocf-claim/claim/examples/ports/realmclaim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

var env *envtest.Env

func TestMain(m *testing.M) { porttest.Main(m, &env, portapi.IdentityPlaneCRD()) }

const keycloak = "https://keycloak.example.com/auth"

func TestNormalizeKey(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"already normal", "https://keycloak.example.com/auth/realms/camunda", "https://keycloak.example.com/auth/realms/camunda"},
		{"userinfo dropped", "https://admin:s3cret@keycloak.example.com/auth/realms/camunda", "https://keycloak.example.com/auth/realms/camunda"},
		{"scheme and host lower-cased, realm kept", "HTTPS://KeyCloak.Example.COM/auth/realms/Camunda", "https://keycloak.example.com/auth/realms/Camunda"},
		{"https default port dropped", "https://keycloak.example.com:443/realms/camunda", "https://keycloak.example.com/realms/camunda"},
		{"http default port dropped", "http://keycloak:80/realms/camunda", "http://keycloak/realms/camunda"},
		{"other port kept", "http://keycloak:8080/realms/camunda", "http://keycloak:8080/realms/camunda"},
		{"trailing and repeated slashes dropped", "https://keycloak.example.com/auth//realms/camunda/", "https://keycloak.example.com/auth/realms/camunda"},
		{"query and fragment dropped", "https://keycloak.example.com/realms/camunda?x=1#top", "https://keycloak.example.com/realms/camunda"},
		{"IPv6 host", "https://[FE80::1]:443/realms/camunda", "https://[fe80::1]/realms/camunda"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := realmclaim.NormalizeKey(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("NormalizeKey(%q) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
	for _, bad := range []string{
		"keycloak.example.com/realms/camunda",
		"ftp://keycloak.example.com/realms/camunda",
		"https:///realms/camunda",
		"https://keycloak.example.com/auth",
		"https://keycloak.example.com/realms/",
		"https://admin:s3cret@keycloak.example.com/auth/camunda",
	} {
		_, err := realmclaim.NormalizeKey(bad)
		if err == nil {
			t.Errorf("NormalizeKey(%q) accepted it", bad)
		} else if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("NormalizeKey(%q): error %q shows the password", bad, err)
		}
	}
}

// fixture is the ported operator: planes and workloads in one namespace,
// Leases in another.
type fixture struct {
	opNS, ns string
	client   client.Client
	r        *realmclaim.Reconciler
	inner    atomic.Int32
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := env.TestClient(t)
	f := &fixture{opNS: env.Namespace(t), ns: env.Namespace(t), client: c}
	inner := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		f.inner.Add(1)
		return reconcile.Result{}, nil
	})
	var err error
	if f.r, err = realmclaim.Wrap(inner, f.opNS, c, env.APIReader, claimmw.WithMetrics(false)); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) plane(t *testing.T, name, url, realm string) *portapi.IdentityPlane {
	t.Helper()
	p := &portapi.IdentityPlane{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec:       portapi.IdentityPlaneSpec{KeycloakURL: url, Realm: realm},
	}
	if err := f.client.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// edit changes the newest version of p's spec and status.
func (f *fixture) edit(t *testing.T, p *portapi.IdentityPlane, spec portapi.IdentityPlaneSpec, status *portapi.IdentityPlaneStatus) {
	t.Helper()
	if err := env.APIReader.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	p.Spec = spec
	if err := f.client.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if status != nil {
		status.Conditions = p.Status.Conditions
		p.Status = *status
		if err := f.client.Status().Update(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
}

func (f *fixture) reconcile(t *testing.T, p *portapi.IdentityPlane) metav1.Condition {
	t.Helper()
	porttest.Pass(t, f.r, p)
	cond, exists := porttest.ClaimCondition(t, env.APIReader, p)
	if !exists {
		t.Fatalf("%s is gone", p.Name)
	}
	if cond == nil {
		return metav1.Condition{}
	}
	return *cond
}

func (f *fixture) lease(t *testing.T, url, realm string) (*coordinationv1.Lease, bool) {
	t.Helper()
	key, err := realmclaim.NormalizeKey(realmclaim.RealmKey(url, realm))
	if err != nil {
		t.Fatal(err)
	}
	return porttest.Lease(t, env.APIReader, f.opNS, realmclaim.LeasePrefix, key)
}

// legacyLease writes a realm's Lease as the hand-written claim did.
func (f *fixture) legacyLease(t *testing.T, key string, holder *portapi.IdentityPlane) *coordinationv1.Lease {
	t.Helper()
	return porttest.CreateLegacyLease(t, env.Client, porttest.LegacyLease{
		Namespace: f.opNS, Prefix: realmclaim.LeasePrefix, Key: key, Identity: holder.Namespace + "/" + holder.Name,
		Labels: map[string]string{realmclaim.HolderUIDLabel: string(holder.UID)},
		Annotations: map[string]string{
			realmclaim.KeyAnnotation:             key,
			realmclaim.HolderNamespaceAnnotation: holder.Namespace,
			realmclaim.HolderNameAnnotation:      holder.Name,
			realmclaim.HolderUIDAnnotation:       string(holder.UID),
		},
	})
}

func TestALegacyLeaseIsHeldByItsHolderAfterThePort(t *testing.T) {
	f := newFixture(t)
	// Given a plane holding realm "camunda" through a Lease the
	// hand-written claim wrote under the normalized URL
	a := f.plane(t, "a", keycloak, "camunda")
	legacy := f.legacyLease(t, keycloak+"/realms/camunda", a)
	// And a second plane naming the same realm with a password, upper-case
	// host, default port and a trailing slash
	b := f.plane(t, "b", "https://admin:s3cret@KEYCLOAK.example.com:443/auth/", "camunda")

	// When the ported operator reconciles both
	condA := f.reconcile(t, a)
	condB := f.reconcile(t, b)

	// Then the holder re-enters without a write and the other is parked
	// naming it: one realm, one key, no double grant across the upgrade
	porttest.WantCondition(t, "a", condA, conditions.ReasonClaimed)
	porttest.WantCondition(t, "b", condB, conditions.ReasonParked, `Realm "camunda"`, f.ns+"/a")
	if strings.Contains(condB.Message, "s3cret") {
		t.Fatalf("message %q shows the password", condB.Message)
	}
	if l, _ := f.lease(t, keycloak, "camunda"); l.ResourceVersion != legacy.ResourceVersion {
		t.Fatal("the legacy Lease was written on re-entry")
	}
}

func TestAPasswordNeverReachesARecord(t *testing.T) {
	f := newFixture(t)
	p := f.plane(t, "p", "https://admin:s3cret@keycloak.example.com/auth", "camunda")
	porttest.WantCondition(t, "p", f.reconcile(t, p), conditions.ReasonClaimed)
	l, ok := f.lease(t, keycloak, "camunda")
	if !ok {
		t.Fatal("no Lease under the normalized key")
	}
	for k, v := range l.Annotations {
		if strings.Contains(v, "s3cret") {
			t.Fatalf("annotation %s=%q carries the password", k, v)
		}
	}
}

func TestASuspendedPlaneTouchesNoClaim(t *testing.T) {
	f := newFixture(t)
	// Given a plane holding realm "old"
	p := f.plane(t, "p", keycloak, "old")
	porttest.WantCondition(t, "p", f.reconcile(t, p), conditions.ReasonClaimed)
	before, _ := f.lease(t, keycloak, "old")

	// When it is suspended and turned to realm "new", and reconciles
	f.edit(t, p, portapi.IdentityPlaneSpec{KeycloakURL: keycloak, Realm: "new", Suspended: true}, nil)
	calls := f.inner.Load()
	cond := f.reconcile(t, p)

	// Then its reconciler ran, "old" is untouched, "new" not acquired, and
	// the condition not rewritten
	if f.inner.Load() != calls+1 {
		t.Fatal("the inner reconciler did not run for the suspended plane")
	}
	if after, ok := f.lease(t, keycloak, "old"); !ok || after.ResourceVersion != before.ResourceVersion {
		t.Fatal("the suspended plane touched the Lease of its held realm")
	}
	if _, ok := f.lease(t, keycloak, "new"); ok {
		t.Fatal("the suspended plane acquired a realm")
	}
	porttest.WantCondition(t, "p", cond, conditions.ReasonClaimed, "/realms/old")

	// And once resumed it moves to "new"
	f.edit(t, p, portapi.IdentityPlaneSpec{KeycloakURL: keycloak, Realm: "new"}, nil)
	porttest.WantCondition(t, "p", f.reconcile(t, p), conditions.ReasonClaimed, "/realms/new")
	if _, ok := f.lease(t, keycloak, "old"); ok {
		t.Fatal("the resumed plane kept a realm nothing names")
	}
}

func TestASteadyPlaneReadsNoWorkload(t *testing.T) {
	// Given a plane whose API reader counts workload lists
	f := newFixture(t)
	var lists atomic.Int32
	c := env.TestClient(t)
	counting := interceptor.NewClient(c, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, lease := list.(*coordinationv1.LeaseList); !lease {
				lists.Add(1)
			}
			return c.List(ctx, list, opts...)
		},
	})
	var err error
	if f.r, err = realmclaim.Wrap(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
		return reconcile.Result{}, nil
	}), f.opNS, f.client, counting, claimmw.WithMetrics(false)); err != nil {
		t.Fatal(err)
	}
	p := f.plane(t, "p", keycloak, "camunda")

	// When it acquires its realm and reconciles again
	porttest.WantCondition(t, "p", f.reconcile(t, p), conditions.ReasonClaimed)
	porttest.WantCondition(t, "p", f.reconcile(t, p), conditions.ReasonClaimed)

	// Then it held nothing else to keep, so no workload was listed
	if n := lists.Load(); n != 0 {
		t.Fatalf("%d workload lists for a plane that holds only its spec realm, want 0", n)
	}
}

// Workloads for the sweep table.

func envOf(url, realm string) []corev1.EnvVar {
	var env []corev1.EnvVar
	if url != "" {
		env = append(env, corev1.EnvVar{Name: realmclaim.KeycloakURLEnv, Value: url})
	}
	if realm != "" {
		env = append(env, corev1.EnvVar{Name: realmclaim.KeycloakRealmEnv, Value: realm})
	}
	return env
}

func podSpec(env []corev1.EnvVar) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "camunda/identity", Env: env}}}
}

func deployment(plane string, replicas int32, env []corev1.EnvVar) client.Object {
	sel := map[string]string{"app": "identity"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "identity", Labels: map[string]string{realmclaim.PlaneLabel: plane}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: podSpec(env)},
		},
	}
}

func replicaSetAnnotated(plane, realmURL string) client.Object {
	sel := map[string]string{"app": "identity"}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "identity-1", Labels: map[string]string{realmclaim.PlaneLabel: plane}},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{realmclaim.RealmAnnotation: realmURL}},
				Spec:       podSpec(nil),
			},
		},
	}
}

func pod(plane string, phase corev1.PodPhase, env []corev1.EnvVar) client.Object {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "identity-1-abcde", Labels: map[string]string{realmclaim.PlaneLabel: plane}},
		Spec:       podSpec(env),
		Status:     corev1.PodStatus{Phase: phase},
	}
}

func TestTheSweepKeepsEveryRealmStillInUse(t *testing.T) {
	const (
		old   = "old"   // the realm the plane moves away from
		other = "other" // a realm the plane holds from before, named by nothing
	)
	for _, tc := range []struct {
		name     string
		status   portapi.IdentityPlaneStatus
		workload client.Object
		// kept are the realms whose claims survive the sweep, beside "new".
		kept []string
	}{
		{name: "nothing uses them: both released"},
		{name: "the status records the old realm", status: portapi.IdentityPlaneStatus{KeycloakURL: keycloak, Realm: old}, kept: []string{old}},
		{name: "a Deployment's env writes the old realm", workload: deployment("p", 1, envOf(keycloak, old)), kept: []string{old}},
		{name: "a ReplicaSet's pod template annotation writes the old realm", workload: replicaSetAnnotated("p", keycloak+"/realms/"+old), kept: []string{old}},
		{name: "a running pod writes the old realm through another spelling", workload: pod("p", corev1.PodRunning, envOf("https://admin:pw@KEYCLOAK.example.com:443/auth/", old)), kept: []string{old}},
		{name: "a Deployment scaled to zero is not live", workload: deployment("p", 0, envOf(keycloak, old))},
		{name: "a succeeded pod is not live", workload: pod("p", corev1.PodSucceeded, envOf(keycloak, old))},
		{name: "another plane's workload does not count", workload: deployment("q", 1, envOf(keycloak, old))},
		{name: "a workload that writes a realm it does not name keeps every claim", workload: deployment("p", 1, envOf(keycloak, "")), kept: []string{old, other}},
		{name: "a workload whose realm URL cannot be read keeps every claim", workload: pod("p", corev1.PodRunning, envOf("keycloak:8080", old)), kept: []string{old, other}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			// Given a plane holding "old", and "other" from a legacy Lease
			p := f.plane(t, "p", keycloak, old)
			porttest.WantCondition(t, "p", f.reconcile(t, p), conditions.ReasonClaimed)
			f.legacyLease(t, keycloak+"/realms/"+other, p)
			// And a workload of the case
			if w := tc.workload; w != nil {
				w.SetNamespace(f.ns)
				status := w.DeepCopyObject().(client.Object)
				if err := f.client.Create(context.Background(), w); err != nil {
					t.Fatal(err)
				}
				if po, ok := status.(*corev1.Pod); ok {
					w.(*corev1.Pod).Status = po.Status
					if err := f.client.Status().Update(context.Background(), w); err != nil {
						t.Fatal(err)
					}
				}
			}

			// When the plane turns to realm "new", with the case's status,
			// and reconciles
			f.edit(t, p, portapi.IdentityPlaneSpec{KeycloakURL: keycloak, Realm: "new"}, &tc.status)
			porttest.WantCondition(t, "p", f.reconcile(t, p), conditions.ReasonClaimed, "/realms/new")

			// Then it holds "new" and exactly the kept realms besides
			var got []string
			for _, realm := range []string{old, other} {
				if _, ok := f.lease(t, keycloak, realm); ok {
					got = append(got, realm)
				}
			}
			if diff := cmp.Diff(tc.kept, got); diff != "" {
				t.Fatalf("realms kept besides the new one (-want +got):\n%s", diff)
			}
		})
	}
}
