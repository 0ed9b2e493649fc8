package lease_test

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/pkg/claim"
)

const gizmoGroup = "stale.attack14b.ocf.io"

var (
	gizmoV1alpha1 = schema.GroupVersionKind{Group: gizmoGroup, Version: "v1alpha1", Kind: "Gizmo"}
	gizmoV1beta1  = schema.GroupVersionKind{Group: gizmoGroup, Version: "v1beta1", Kind: "Gizmo"}
)

// TestAttack14bHolderAliveAtANewVersionTheReaderLearnedTooLate: Given a
// contender whose reader (a client.Client with controller-runtime's dynamic
// RESTMapper, as every manager has) learned the holder's group while its CRD
// served only v1alpha1, When the CRD is upgraded to serve only v1beta1 (the
// holder object, same UID, still exists), Then HolderExists must find the
// holder alive at v1beta1 with no error (promise: "finds the holder by GROUP
// and KIND at whatever version the API server serves now"; ErrKindNotServed
// is only for a kind served at no version). And once the holder is deleted,
// it must be judged dead. The RESTMapper never re-discovers a group it
// already has a mapping for, so HolderExists only ever tries v1alpha1 and
// answers ErrKindNotServed forever: a live holder is reported as an error
// and a dead one's key is never freed.
func TestAttack14bHolderAliveAtANewVersionTheReaderLearnedTooLate(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	crd := envtest.CRD(gizmoV1alpha1, "gizmos", nil)
	if err := env.InstallCRDs(crd); err != nil {
		t.Fatal(err)
	}
	writer, err := env.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	g := &unstructured.Unstructured{}
	g.SetGroupVersionKind(gizmoV1alpha1)
	g.SetNamespace(ns)
	g.SetName("a")
	if err := writer.Create(ctx, g); err != nil {
		t.Fatalf("creating gizmo: %v", err)
	}
	a := claim.HolderOf(g)

	// The contender's reader has looked at the group while only v1alpha1 was
	// served (a manager does this at start-up, or any earlier liveness check).
	warm, err := env.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	live := claim.HolderExists(warm)
	rec := claim.Record{Key: key, Holder: a, Exists: true}
	if alive, err := live.Alive(ctx, rec); !alive || err != nil {
		t.Fatalf("before the upgrade: Alive() = %v, %v; want true, nil", alive, err)
	}

	// When the CRD is upgraded: v1beta1 served and stored, v1alpha1 no longer served.
	var cur apiextensionsv1.CustomResourceDefinition
	if err := env.APIReader.Get(ctx, client.ObjectKey{Name: crd.Name}, &cur); err != nil {
		t.Fatal(err)
	}
	beta := *cur.Spec.Versions[0].DeepCopy()
	beta.Name, beta.Served, beta.Storage = gizmoV1beta1.Version, true, true
	cur.Spec.Versions[0].Served, cur.Spec.Versions[0].Storage = false, false
	cur.Spec.Versions = append(cur.Spec.Versions, beta)
	if err := env.Client.Update(ctx, &cur); err != nil {
		t.Fatalf("upgrading CRD: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		fresh, err := env.NewClient()
		if err != nil {
			return false, err
		}
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gizmoV1beta1)
		if err := fresh.Get(ctx, client.ObjectKeyFromObject(g), obj); err != nil {
			return false, nil //nolint:nilerr // not served yet: poll again
		}
		old := &unstructured.Unstructured{}
		old.SetGroupVersionKind(gizmoV1alpha1)
		return fresh.Get(ctx, client.ObjectKeyFromObject(g), old) != nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for the upgrade to be served: %v", err)
	}

	// Then the holder, which exists at v1beta1 with its UID, is alive.
	alive, err := live.Alive(ctx, rec)
	if !alive || err != nil {
		t.Errorf("after the upgrade, holder exists at v1beta1: Alive() = %v, %v; want true, nil", alive, err)
	}

	// And once it is deleted, it is dead.
	gone := &unstructured.Unstructured{}
	gone.SetGroupVersionKind(gizmoV1beta1)
	gone.SetNamespace(ns)
	gone.SetName("a")
	if err := writer.Delete(ctx, gone, client.GracePeriodSeconds(0)); err != nil {
		t.Fatalf("deleting gizmo: %v", err)
	}
	alive, err = live.Alive(ctx, rec)
	if alive || err != nil {
		t.Errorf("after deleting the holder: Alive() = %v, %v; want false, nil (its key would never be freed)", alive, err)
	}
}
