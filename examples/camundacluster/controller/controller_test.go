package controller_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/examples/camundacluster/api/v1alpha1"
	"github.com/ocf-claim/claim/examples/camundacluster/config/crd"
	"github.com/ocf-claim/claim/examples/camundacluster/controller"
	"github.com/ocf-claim/claim/examples/camundacluster/scenario"
	"github.com/ocf-claim/claim/pkg/conditions"
)

var env *envtest.Env

func TestMain(m *testing.M) {
	def, err := crd.CamundaCluster()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	envtest.Main(m, &env, envtest.Options{
		AddToScheme: []func(*runtime.Scheme) error{v1alpha1.AddToScheme},
		CRDs:        []*apiextensionsv1.CustomResourceDefinition{def},
	})
}

// startOperator runs the example operator in a manager restricted to a
// fresh namespace, which holds both the clusters and the Leases. The
// safety-net requeues are an hour, so every state a test reaches within
// seconds was reached by a wake-up.
func startOperator(t *testing.T) (ns string, c client.Client) {
	t.Helper()
	ns = env.Namespace(t)
	opts := env.ManagerOptions(ns)
	opts.Logger = envtest.TestLogger(t)
	opts.Cache.ByObject = controller.CacheOptions(ns).ByObject
	r := &controller.Reconciler{ClaimNamespace: ns, ParkedRequeue: time.Hour, WaitingRequeue: time.Hour}
	env.StartManager(t, opts, r.SetupWithManager)
	return ns, env.TestClient(t)
}

// TestDemoScenario plays the steps `make demo` shows: Claimed and Parked,
// the holder deleted, the handover gate waiting for its broker, and the
// takeover with a larger token. Each step fails with what it saw when the
// operator does not reach the state the step expects.
func TestDemoScenario(t *testing.T) {
	ns, c := startOperator(t)
	w := &scenario.World{Client: c, Namespace: ns, ClaimNamespace: ns, Timeout: 20 * time.Second}
	steps := scenario.Steps()
	for i, s := range steps {
		if !t.Run(s.Title, func(t *testing.T) {
			if err := w.RunStep(context.Background(), i+1, len(steps), s); err != nil {
				t.Fatal(err)
			}
		}) {
			return
		}
	}
}

func TestAClusterWithAnInvalidStorageReferenceIsParkedAsInvalidKeyWithZeroBrokers(t *testing.T) {
	ns, c := startOperator(t)
	// Given a cluster whose secondaryStorage names no known backend type
	createCluster(t, c, ns, "typo", "elastic|https://es.data.svc:9200", "", 3)
	// Then it is InvalidKey, saying what is wrong, and Ready says the same
	got := waitForReason(t, c, ns, "typo", conditions.ReasonInvalidKey)
	mustContain(t, got.claimed.Message, `unknown type "elastic"`)
	if got.ready == nil || got.ready.Reason != string(conditions.ReasonInvalidKey) || got.ready.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %+v, want False with reason InvalidKey", got.ready)
	}
	// And its StatefulSet exists with zero brokers
	waitForBrokers(t, c, ns, "typo", 0)
}

func TestOneRealmAnswersToOneClusterEvenWithDifferentBackends(t *testing.T) {
	ns, c := startOperator(t)
	// Given alpha holds its backend and a realm
	createCluster(t, c, ns, "alpha", "elasticsearch|https://es-a.data.svc:9200", "https://keycloak.auth.svc/realms/camunda", 1)
	waitForReason(t, c, ns, "alpha", conditions.ReasonClaimed)
	// When bravo names another backend but the same realm, spelled with
	// credentials and the default port
	createCluster(t, c, ns, "bravo", "rdbms|postgres.data.svc/camunda", "https://admin:secret@keycloak.auth.svc:443/realms/camunda/", 1)
	// Then bravo is parked on the realm, naming alpha, and runs no broker
	got := waitForReason(t, c, ns, "bravo", conditions.ReasonParked)
	mustContain(t, got.claimed.Message, `"keycloak|https://keycloak.auth.svc/realms/camunda"`, "CamundaCluster "+ns+"/alpha")
	if strings.Contains(got.claimed.Message, "secret") {
		t.Errorf("bravo's message %q carries the realm URL's password", got.claimed.Message)
	}
	waitForBrokers(t, c, ns, "bravo", 0)
}

type state struct {
	claimed metav1.Condition
	ready   *metav1.Condition
}

func waitForReason(t *testing.T, c client.Client, ns, name string, reason conditions.Reason) state {
	t.Helper()
	var s state
	envtest.Eventually(t, 20*time.Second, func() (bool, string) {
		cc := &v1alpha1.CamundaCluster{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cc); err != nil {
			return false, err.Error()
		}
		cl := meta.FindStatusCondition(cc.Status.Conditions, string(conditions.Claimed))
		if cl == nil {
			return false, name + " has no Claimed condition"
		}
		s = state{claimed: *cl, ready: meta.FindStatusCondition(cc.Status.Conditions, string(conditions.Ready))}
		return cl.Reason == string(reason) && s.ready != nil, fmt.Sprintf("%s: %+v, Ready %+v; want %s", name, *cl, s.ready, reason)
	})
	return s
}

// createCluster creates CamundaCluster ns/name through c, naming storage and
// realm ("": none) and asking for brokers brokers; t fails at once if it
// cannot.
func createCluster(t *testing.T, c client.Client, ns, name, storage, realm string, brokers int32) {
	t.Helper()
	cc := &v1alpha1.CamundaCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1alpha1.CamundaClusterSpec{SecondaryStorage: storage, KeycloakRealm: realm, Replicas: brokers},
	}
	if err := c.Create(context.Background(), cc); err != nil {
		t.Fatal(err)
	}
}

// waitForBrokers waits until StatefulSet ns/name exists and asks for
// brokers replicas.
func waitForBrokers(t *testing.T, c client.Client, ns, name string, brokers int32) {
	t.Helper()
	envtest.Eventually(t, 20*time.Second, func() (bool, string) {
		n, err := replicas(c, ns, name)
		return err == nil && n == brokers, fmt.Sprintf("StatefulSet %s: %d replicas, %v; want %d", name, n, err, brokers)
	})
}

func replicas(c client.Client, ns, name string) (int32, error) {
	sts := &appsv1.StatefulSet{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, sts); err != nil {
		return -1, err
	}
	return ptr.Deref(sts.Spec.Replicas, -1), nil
}

func mustContain(t *testing.T, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%q does not contain %q", s, p)
		}
	}
}
