package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/pkg/claim"
)

// widgetGroup serves Widget at v1alpha1 and v1beta1, as a CRD does halfway
// through an API upgrade.
const widgetGroup = "liveness.test.ocf.io"

var (
	widgetV1alpha1 = schema.GroupVersionKind{Group: widgetGroup, Version: "v1alpha1", Kind: "Widget"}
	widgetV1beta1  = schema.GroupVersionKind{Group: widgetGroup, Version: "v1beta1", Kind: "Widget"}
)

// installWidgets installs the Widget CRD with both versions served and
// v1beta1 stored.
func installWidgets(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := envtest.CRD(widgetV1beta1, "widgets", nil)
	alpha := *crd.Spec.Versions[0].DeepCopy()
	alpha.Name, alpha.Storage = widgetV1alpha1.Version, false
	crd.Spec.Versions = append(crd.Spec.Versions, alpha)
	if err := env.InstallCRDs(crd); err != nil {
		t.Fatal(err)
	}
	return crd
}

// stopServing makes the Widget CRD stop serving version, and waits until the
// API server answers a read at that version as not served, both to a client
// that remembers the version (a 404 for the path) and to one that does not
// (NoMatch).
func stopServing(t *testing.T, crdName, version string, probe client.Object, remembers client.Reader) {
	t.Helper()
	ctx := context.Background()
	var crd apiextensionsv1.CustomResourceDefinition
	if err := env.APIReader.Get(ctx, client.ObjectKey{Name: crdName}, &crd); err != nil {
		t.Fatal(err)
	}
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == version {
			crd.Spec.Versions[i].Served = false
		}
	}
	if err := env.Client.Update(ctx, &crd); err != nil {
		t.Fatalf("stopping to serve %s: %v", version, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		fresh, err := env.NewClient()
		if err != nil {
			return false, err
		}
		read := func(r client.Reader) error {
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(probe.GetObjectKind().GroupVersionKind())
			return r.Get(ctx, client.ObjectKeyFromObject(probe), obj)
		}
		freshErr, rememberedErr := read(fresh), read(remembers)
		return meta.IsNoMatchError(freshErr) && rememberedErr != nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s to stop being served: %v", version, err)
	}
}

// createAt creates ns/name as an object of gvk through c, as a client
// that knows no Go type for the kind does.
func createAt(t *testing.T, c client.Client, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	if err := c.Create(context.Background(), u); err != nil {
		t.Fatalf("creating %s %s: %v", gvk.Kind, name, err)
	}
	return u
}

// TestAHolderRecordedAtAVersionNoLongerServedIsStillAlive: Given a holder
// recorded at v1alpha1 of its CRD, When the CRD stops serving v1alpha1 but
// serves the holder under v1beta1 with the same UID, Then the default
// liveness still finds it alive, both through a reader that remembers
// v1alpha1 and through a fresh one, and contenders park; And once the holder
// is deleted, it is gone and taken over.
func TestAHolderRecordedAtAVersionNoLongerServedIsStillAlive(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	crd := installWidgets(t)
	writer := env.TestClient(t)
	w := createAt(t, writer, widgetV1alpha1, ns, "a")
	a := claim.HolderOf(w)
	if a.APIVersion != widgetGroup+"/v1alpha1" {
		t.Fatalf("holder recorded as %s, want v1alpha1", a.APIVersion)
	}
	wantReason(t, acquire(t, newClaimer(t, ns, nil, nil), key, a), claim.ReasonAcquired)

	// Given a contender whose reader has read a at v1alpha1 (it remembers
	// that version), and a probe reader that remembers it too
	warm := env.TestClient(t)
	probe := env.TestClient(t)
	if err := probe.Get(ctx, client.ObjectKeyFromObject(w), w.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	b := holder(t, ns, "b")
	cb := newClaimer(t, ns, warm, nil)
	wantReason(t, acquire(t, cb, key, b), claim.ReasonHeldElsewhere)

	// When the CRD stops serving v1alpha1
	stopServing(t, crd.Name, widgetV1alpha1.Version, w, probe)

	// Then the contender that remembers v1alpha1 still finds a alive
	wantReason(t, acquire(t, cb, key, b), claim.ReasonHeldElsewhere)
	// And so does a contender that never saw v1alpha1
	fresh := env.TestClient(t)
	c := holder(t, ns, "c")
	cc := newClaimer(t, ns, fresh, nil)
	wantReason(t, acquire(t, cc, key, c), claim.ReasonHeldElsewhere)

	// And once a is deleted it is gone at the version served, and taken over
	gone := &unstructured.Unstructured{}
	gone.SetGroupVersionKind(widgetV1beta1)
	gone.SetNamespace(ns)
	gone.SetName("a")
	if err := writer.Delete(ctx, gone, client.PropagationPolicy("Background"), client.GracePeriodSeconds(0)); err != nil {
		t.Fatalf("deleting widget: %v", err)
	}
	got := acquire(t, cb, key, b)
	wantReason(t, got, claim.ReasonTakenOver)
	if !got.Previous.Is(a) {
		t.Fatalf("previous = %s, want %s", got.Previous, a)
	}
}

// TestAHolderOfAKindServedAtNoVersionKeepsItsClaim: Given a holder recorded
// with a kind the API server serves at no version (its CRD was removed),
// When a contender claims the key, Then the holder keeps it and the
// contender gets an error wrapping ErrKindNotServed, not a takeover.
func TestAHolderOfAKindServedAtNoVersionKeepsItsClaim(t *testing.T) {
	ns := env.Namespace(t)
	a := claim.Holder{APIVersion: "removed.test.ocf.io/v1", Kind: "Gadget", Namespace: ns, Name: "a", UID: "uid-gadget-a"}
	wantReason(t, acquire(t, newClaimer(t, ns, nil, nil), key, a), claim.ReasonAcquired)
	reader := env.TestClient(t)
	b := holder(t, ns, "b")
	cb := newClaimer(t, ns, reader, nil)

	_, o, err := cb.Acquire(context.Background(), key, b)

	if !errors.Is(err, claim.ErrKindNotServed) {
		t.Fatalf("Acquire() = %s, %v; want an error wrapping ErrKindNotServed", o.Reason, err)
	}
	rec, err := cb.Current(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Holder.Is(a) {
		t.Fatalf("record names %s after the check, want %s", rec.Holder, a)
	}
}

const gizmoGroup = "stale.liveness.test.ocf.io"

var (
	gizmoV1alpha1 = schema.GroupVersionKind{Group: gizmoGroup, Version: "v1alpha1", Kind: "Gizmo"}
	gizmoV1beta1  = schema.GroupVersionKind{Group: gizmoGroup, Version: "v1beta1", Kind: "Gizmo"}
)

// TestAHolderIsFoundAtAVersionServedAfterTheReaderLearnedItsGroup:
// HolderExists "finds the holder by group and kind at whatever version the
// API server serves now"; ErrKindNotServed is only for a kind served at no
// version. Given a contender whose reader (a client.Client with controller-
// runtime's dynamic RESTMapper, as every manager has) learned the holder's
// group while its CRD served only v1alpha1, When the CRD is upgraded to serve
// only v1beta1 (the holder object, same UID, still exists), Then HolderExists
// finds the holder alive at v1beta1 with no error, although the RESTMapper
// never re-discovers a group it already has a mapping for; and once the
// holder is deleted, it is judged dead, so its key is freed.
func TestAHolderIsFoundAtAVersionServedAfterTheReaderLearnedItsGroup(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	crd := envtest.CRD(gizmoV1alpha1, "gizmos", nil)
	if err := env.InstallCRDs(crd); err != nil {
		t.Fatal(err)
	}
	writer := env.TestClient(t)
	g := createAt(t, writer, gizmoV1alpha1, ns, "a")
	a := claim.HolderOf(g)

	// The contender's reader has looked at the group while only v1alpha1 was
	// served (a manager does this at start-up, or any earlier liveness check).
	warm := env.TestClient(t)
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
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
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
