package backendtest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/claim"
)

// ConfigMapHolders returns Env.NewHolder and Env.Kill for harnesses that run
// against an API server and judge liveness with claim's default,
// claim.HolderExists: a holder is a ConfigMap created in namespace through c,
// and killing it deletes the ConfigMap (with a UID precondition, so only that
// holder dies).
func ConfigMapHolders(c client.Client, namespace string) (newHolder func(*testing.T) claim.Holder, kill func(*testing.T, claim.Holder)) {
	newHolder = func(t *testing.T) claim.Holder {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "holder-"}}
		if err := c.Create(context.Background(), cm); err != nil {
			t.Fatalf("creating holder ConfigMap in %s: %v", namespace, err)
		}
		h := claim.HolderOf(cm)
		h.APIVersion, h.Kind = "v1", "ConfigMap"
		return h
	}
	kill = func(t *testing.T, h claim.Holder) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: h.Namespace, Name: h.Name}}
		err := c.Delete(context.Background(), cm, client.Preconditions{UID: ptr.To(h.UID)})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("deleting holder %s: %v", h, err)
		}
	}
	return newHolder, kill
}
