// Package porttest is the harness the ports' tests share: a control plane
// serving the ports' test kinds, one pass of a port and the claim condition
// it left, the Lease a port stored for a key, and the check of the claim
// condition a pass wrote.
package porttest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/examples/ports/internal/portapi"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// Main is the TestMain of a port's suite: it starts one control plane for
// the package, with portapi's types in its scheme and crds installed, and
// stores it in *env. A kind of portapi whose CRD is left out stands for an
// optional kind the API server does not serve.
func Main(m *testing.M, env **envtest.Env, crds ...*apiextensionsv1.CustomResourceDefinition) {
	envtest.Main(m, env, envtest.Options{
		AddToScheme: []func(*runtime.Scheme) error{portapi.AddToScheme},
		CRDs:        crds,
	})
}

// Pass runs one pass of r for obj, as the port's controller would, and
// returns its result. An error of the pass fails t.
func Pass(t testing.TB, r reconcile.Reconciler, obj client.Object) reconcile.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
	if err != nil {
		t.Fatalf("reconciling %s: %v", obj.GetName(), err)
	}
	return res
}

// ClaimCondition returns the claim condition of obj as the API server has
// it now, read through r: nil when obj carries none, and exists false when
// obj is gone. It reads status.conditions of any of portapi's kinds, so
// that a fixture of several kinds needs no switch on them. Any other error
// fails t.
func ClaimCondition(t testing.TB, r client.Reader, obj client.Object) (cond *metav1.Condition, exists bool) {
	t.Helper()
	got, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		t.Fatalf("a copy of %s is no client.Object", obj.GetName())
	}
	if err := r.Get(context.Background(), client.ObjectKeyFromObject(obj), got); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false
		}
		t.Fatal(err)
	}
	// Every portapi kind serializes its conditions at status.conditions.
	raw, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	var status struct {
		Status struct {
			Conditions []metav1.Condition `json:"conditions"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &status); err != nil {
		t.Fatal(err)
	}
	return meta.FindStatusCondition(status.Status.Conditions, string(conditions.Claimed)), true
}

// Lease returns the Lease a port stores key in, named prefix and the key's
// hash in namespace ns, as r reads it now, and whether there is one. Any
// error but NotFound fails t.
func Lease(t testing.TB, r client.Reader, ns, prefix, key string) (*coordinationv1.Lease, bool) {
	t.Helper()
	var l coordinationv1.Lease
	err := r.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: backends.HashName(prefix, key)}, &l)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return &l, true
}

// WantCondition fails t unless the claim condition got, which who was
// given, has reason and a message that mentions each of mentions.
func WantCondition(t testing.TB, who string, got metav1.Condition, reason conditions.Reason, mentions ...string) {
	t.Helper()
	if got.Reason != string(reason) {
		t.Fatalf("%s: condition %s (%s), want reason %s", who, got.Reason, got.Message, reason)
	}
	for _, m := range mentions {
		if !strings.Contains(got.Message, m) {
			t.Fatalf("%s: message %q does not mention %q", who, got.Message, m)
		}
	}
}

// LegacyLease is a Lease as a hand-written claim wrote it before the port:
// in Namespace, named Prefix and the hash of Key, with the claim's own
// Labels and Annotations, and Identity as its holderIdentity.
type LegacyLease struct {
	Namespace, Prefix, Key, Identity string
	Labels, Annotations              map[string]string
}

// CreateLegacyLease creates l through c and returns the Lease created.
func CreateLegacyLease(t testing.TB, c client.Client, l LegacyLease) *coordinationv1.Lease {
	t.Helper()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   l.Namespace,
			Name:        backends.HashName(l.Prefix, l.Key),
			Labels:      l.Labels,
			Annotations: l.Annotations,
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(l.Identity)},
	}
	if err := c.Create(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
	return lease
}
