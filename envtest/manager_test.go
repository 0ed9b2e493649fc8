package envtest_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/ocf-claim/claim/envtest"
)

// TestAManagerOfATestSeesOnlyItsNamespacesAndStopsWithTheTest: Given a
// ConfigMap in each of two namespaces, When a test starts a manager with
// ManagerOptions of the first, Then the manager's cache lists only the
// first's ConfigMap; And when the test ends, the manager has stopped.
func TestAManagerOfATestSeesOnlyItsNamespacesAndStopsWithTheTest(t *testing.T) {
	ctx := context.Background()
	mine, other := env.Namespace(t), env.Namespace(t)
	for _, ns := range []string{mine, other} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}}
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	stopped := make(chan struct{})
	t.Run("with a manager", func(t *testing.T) {
		mgr := env.StartManager(t, env.ManagerOptions(mine), func(mgr manager.Manager) error {
			return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
				<-ctx.Done()
				close(stopped)
				return nil
			}))
		})
		envtest.Eventually(t, 20*time.Second, func() (bool, string) {
			var list corev1.ConfigMapList
			if err := mgr.GetClient().List(ctx, &list, client.InNamespace(mine)); err != nil {
				return false, err.Error()
			}
			return len(list.Items) > 0, "the manager's cache never listed the ConfigMap of its namespace"
		})
		var all corev1.ConfigMapList
		if err := mgr.GetClient().List(ctx, &all); err != nil {
			t.Fatal(err)
		}
		for _, cm := range all.Items {
			if cm.Namespace != mine {
				t.Errorf("the manager's cache lists ConfigMap %s/%s of a namespace it was not given", cm.Namespace, cm.Name)
			}
		}
	})
	select {
	case <-stopped:
	default:
		t.Error("the manager still runs after the test that started it ended")
	}
}
