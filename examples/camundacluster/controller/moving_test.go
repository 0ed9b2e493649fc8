package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/examples/camundacluster/api/v1alpha1"
	"github.com/ocf-claim/claim/examples/camundacluster/controller"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// A StatefulSet replaces its pods one at a time: when a cluster moves to
// another storage backend, its old broker still writes the old one until it
// stops. The old backend must not go to another cluster before that.
func TestMovingToAnotherBackendKeepsTheOldOneUntilTheOldBrokerStops(t *testing.T) {
	ns, c := startOperator(t)
	ctx := context.Background()
	const (
		oldStorage = "elasticsearch|https://es-old.data.svc:9200"
		newStorage = "elasticsearch|https://es-new.data.svc:9200"
	)
	// Given alpha holds the old backend and its broker runs on it
	createCluster(t, c, ns, "alpha", oldStorage, "", 1)
	waitForReason(t, c, ns, "alpha", conditions.ReasonClaimed)
	sts := &appsv1.StatefulSet{}
	envtest.Eventually(t, 20*time.Second, func() (bool, string) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alpha"}, sts)
		return err == nil, fmt.Sprintf("alpha's StatefulSet: %v", err)
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha-0", Labels: sts.Spec.Template.Labels},
		Spec:       sts.Spec.Template.Spec,
	}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// And bravo waits for the old backend
	createCluster(t, c, ns, "bravo", oldStorage, "", 1)
	waitForReason(t, c, ns, "bravo", conditions.ReasonParked)
	// When alpha moves to a free backend
	cc := &v1alpha1.CamundaCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alpha"}, cc); err != nil {
		t.Fatal(err)
	}
	cc.Spec.SecondaryStorage = newStorage
	if err := c.Update(ctx, cc); err != nil {
		t.Fatal(err)
	}
	// Then alpha holds the new backend, says it is releasing the old one
	// while its old broker runs, and bravo does not get the old backend
	envtest.Eventually(t, 20*time.Second, func() (bool, string) {
		got := &v1alpha1.CamundaCluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alpha"}, got); err != nil {
			return false, err.Error()
		}
		ready := meta.FindStatusCondition(got.Status.Conditions, string(conditions.Ready))
		return ready != nil && ready.Reason == string(controller.ReasonReleasing), fmt.Sprintf("alpha's Ready: %+v", ready)
	})
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		got := &v1alpha1.CamundaCluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "bravo"}, got); err != nil {
			t.Fatal(err)
		}
		if meta.IsStatusConditionTrue(got.Status.Conditions, string(conditions.Claimed)) {
			t.Fatal("bravo was granted the old backend while alpha's broker still writes it")
		}
	}
	// When alpha's old broker stops, bravo gets the old backend
	if err := c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitForReason(t, c, ns, "bravo", conditions.ReasonClaimed)
}
