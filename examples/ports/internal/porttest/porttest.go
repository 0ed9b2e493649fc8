// Package porttest is the harness the ports' tests share: a control plane
// serving the ports' test kinds, the Lease a port stored for a key, and the
// check of the claim condition a pass wrote.
package porttest

import (
	"context"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
