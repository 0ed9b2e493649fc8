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

// ConfigMapEnv returns the part of an Env that every harness against an API
// server whose holders are ConfigMaps shares: Claimers read through reader
// and write through writer in namespace, and NewHolder and Kill are
// ConfigMapHolders(writer, namespace). The harness adds Backend, NewKey and
// SeedForeign (and Liveness, if not claim's default).
func ConfigMapEnv(reader client.Reader, writer client.Client, namespace string) Env {
	newHolder, kill := ConfigMapHolders(writer, namespace)
	return Env{Reader: reader, Writer: writer, Config: claim.Config{Namespace: namespace}, NewHolder: newHolder, Kill: kill}
}

// ConfigMapHolders returns Env.NewHolder and Env.Kill for harnesses that run
// against an API server and judge liveness with claim's default,
// claim.HolderExists: a holder is a ConfigMap created in namespace through c,
// and killing it deletes the ConfigMap (with a UID precondition, so only that
// holder dies).
func ConfigMapHolders(c client.Client, namespace string) (newHolder func(*testing.T) claim.Holder, kill func(*testing.T, claim.Holder)) {
	newHolder = func(t *testing.T) claim.Holder {
		t.Helper()
		return createHolder(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: "holder-"}})
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

// ConfigMapHolder creates ConfigMap namespace/name through c to stand for a
// holder object, and returns its Holder (apiVersion and kind set, as a
// typed client leaves them empty).
func ConfigMapHolder(t *testing.T, c client.Client, namespace, name string) claim.Holder {
	t.Helper()
	return createHolder(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}})
}

func createHolder(t *testing.T, c client.Client, cm *corev1.ConfigMap) claim.Holder {
	t.Helper()
	if err := c.Create(context.Background(), cm); err != nil {
		t.Fatalf("creating holder ConfigMap %s%s in %s: %v", cm.Name, cm.GenerateName, cm.Namespace, err)
	}
	h := claim.HolderOf(cm)
	h.APIVersion, h.Kind = "v1", "ConfigMap"
	return h
}
