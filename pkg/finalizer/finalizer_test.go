package finalizer_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ocf-claim/claim/pkg/finalizer"
)

const name = "claim.ocf.io/test"

// countingClient counts the patches sent through an uncached client.
func countingClient(t *testing.T) (client.Client, *atomic.Int32) {
	t.Helper()
	c := env.TestClient(t)
	var patches atomic.Int32
	return interceptor.NewClient(c, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			patches.Add(1)
			return c.Patch(ctx, obj, p, opts...)
		},
	}), &patches
}

func newConfigMap(t *testing.T, finalizers ...string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace(t), Name: "cm", Finalizers: finalizers}}
	if err := env.TestClient(t).Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Let the namespace go: strip every finalizer the test left.
		ctx := context.Background()
		fresh := &corev1.ConfigMap{}
		if err := env.APIReader.Get(ctx, client.ObjectKeyFromObject(cm), fresh); err == nil {
			fresh.Finalizers = nil
			_ = env.TestClient(t).Update(ctx, fresh)
		}
	})
	return cm
}

func current(t *testing.T, obj client.Object) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := env.APIReader.Get(context.Background(), client.ObjectKeyFromObject(obj), cm); err != nil {
		t.Fatalf("reading %s: %v", client.ObjectKeyFromObject(obj), err)
	}
	return cm
}

// deletingConfigMap creates a ConfigMap with finalizers and deletes it, and
// returns it as the API server has it now: being deleted, kept by its
// finalizers.
func deletingConfigMap(t *testing.T, finalizers ...string) *corev1.ConfigMap {
	t.Helper()
	cm := newConfigMap(t, finalizers...)
	if err := env.TestClient(t).Delete(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	return current(t, cm)
}

// wantFinalizers fails t unless obj's finalizers, read uncached, are want.
func wantFinalizers(t *testing.T, obj client.Object, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, current(t, obj).Finalizers); diff != "" {
		t.Errorf("finalizers (-want +got):\n%s", diff)
	}
}

func TestNewRejectsBadConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fin     finalizer.Name
		writer  client.Client
		wantErr []string
	}{
		{"given no writer and no name then both are reported", "", nil, []string{"writer: nil", "finalizer name \"\""}},
		{"given a name without a domain then it is refused", "release", env.Client, []string{"needs a domain prefix"}},
		{"given a name with a space then it is refused", "claim.ocf.io/re lease", env.Client, []string{"finalizer name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := finalizer.New(tc.fin, tc.writer, nil)
			if err == nil {
				t.Fatal("New succeeded")
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

// newFinalizer returns our finalizer, writing through c and reading
// through the API reader.
func newFinalizer(t *testing.T, c client.Client) *finalizer.Finalizer {
	t.Helper()
	f, err := finalizer.New(name, c, env.APIReader)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestAddWritesOnceAndKeepsOthersFinalizers(t *testing.T) {
	ctx := context.Background()
	c, patches := countingClient(t)
	f := newFinalizer(t, c)
	// Given an object read once, and another controller's finalizer added after that read
	cm := newConfigMap(t)
	stale := cm.DeepCopy()
	other := current(t, cm)
	other.Finalizers = []string{"example.com/other"}
	if err := env.TestClient(t).Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	// When the finalizer is added through the stale copy
	wrote, err := f.Add(ctx, stale)
	if err != nil || !wrote {
		t.Fatalf("Add = %v, %v; want true, nil", wrote, err)
	}
	// Then the optimistic lock refused the stale patch, the retry re-read, and both finalizers are there
	wantFinalizers(t, cm, "example.com/other", name)
	if got := patches.Load(); got != 2 {
		t.Errorf("patches = %d, want 2 (one refused, one after the re-read)", got)
	}
	// And a second Add writes nothing
	wrote, err = f.Add(ctx, stale)
	if err != nil || wrote {
		t.Fatalf("second Add = %v, %v; want false, nil", wrote, err)
	}
	if got := patches.Load(); got != 2 {
		t.Errorf("patches after second Add = %d, want 2", got)
	}
}

func TestRemoveKeepsOthersFinalizers(t *testing.T) {
	ctx := context.Background()
	f := newFinalizer(t, env.TestClient(t))
	// Given an object with our finalizer, read once, and another finalizer added since
	cm := newConfigMap(t, name)
	stale := cm.DeepCopy()
	other := current(t, cm)
	other.Finalizers = append(other.Finalizers, "example.com/other")
	if err := env.TestClient(t).Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	// When our finalizer is removed through the stale copy
	wrote, err := f.Remove(ctx, stale)
	if err != nil || !wrote {
		t.Fatalf("Remove = %v, %v; want true, nil", wrote, err)
	}
	// Then only ours is gone
	wantFinalizers(t, cm, "example.com/other")
}

func TestAddRefusesAnObjectBeingDeleted(t *testing.T) {
	ctx := context.Background()
	f := newFinalizer(t, env.TestClient(t))
	// Given an object being deleted (held by another finalizer)
	deleting := deletingConfigMap(t, "example.com/other")
	// When our finalizer is added
	_, err := f.Add(ctx, deleting)
	// Then it is refused and nothing was written
	if err == nil || !strings.Contains(err.Error(), "being deleted") {
		t.Fatalf("Add on a deleting object: %v, want an error saying it is being deleted", err)
	}
	wantFinalizers(t, deleting, "example.com/other")
}

func TestFinalizeRemovesTheFinalizerOnlyAfterCleanupSucceeded(t *testing.T) {
	ctx := context.Background()
	f := newFinalizer(t, env.TestClient(t))
	// Given an object with our finalizer that is being deleted
	obj := deletingConfigMap(t, name)

	// When cleanup fails
	boom := errors.New("boom")
	removed, err := f.Finalize(ctx, obj, func(context.Context) error { return boom })
	// Then the error is returned, the finalizer stays and the object is still there
	if !errors.Is(err, boom) || removed {
		t.Fatalf("Finalize with failing cleanup = %v, %v; want false, boom", removed, err)
	}
	if !f.Has(current(t, obj)) {
		t.Fatal("finalizer removed although cleanup failed")
	}

	// When cleanup succeeds
	ran := false
	removed, err = f.Finalize(ctx, obj, func(context.Context) error { ran = true; return nil })
	if err != nil || !removed || !ran {
		t.Fatalf("Finalize = %v, %v (cleanup ran: %v); want true, nil, ran", removed, err, ran)
	}
	// Then the object is gone
	err = env.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), &corev1.ConfigMap{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("object after Finalize: %v, want NotFound", err)
	}
	// And removing again from the stale copy is a no-op, not an error
	if _, err := f.Remove(ctx, obj); err != nil {
		t.Fatalf("Remove after the object is gone: %v", err)
	}
}

func TestFinalizeLeavesALiveObjectAlone(t *testing.T) {
	ctx := context.Background()
	f := newFinalizer(t, env.TestClient(t))
	// Given an object with our finalizer that is not being deleted
	cm := newConfigMap(t, name)
	// When Finalize is called
	ran := false
	removed, err := f.Finalize(ctx, cm, func(context.Context) error { ran = true; return nil })
	// Then nothing runs and nothing is removed
	if err != nil || removed || ran {
		t.Fatalf("Finalize on a live object = %v, %v (cleanup ran: %v); want false, nil, not run", removed, err, ran)
	}
	if !f.Has(current(t, cm)) {
		t.Fatal("finalizer removed from a live object")
	}
}

// recreated deletes obj (stripping every finalizer so that it goes) and
// creates an object of the same name with finalizers, as GitOps does when an
// object it manages is deleted, and returns the new object.
func recreated(t *testing.T, obj *corev1.ConfigMap, finalizers ...string) *corev1.ConfigMap {
	t.Helper()
	ctx := context.Background()
	c := env.TestClient(t)
	gone := current(t, obj)
	gone.Finalizers = nil
	if err := c.Update(ctx, gone); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, gone); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	again := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: obj.Name, Finalizers: finalizers}}
	if err := c.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	return again
}

func TestRemoveLeavesAnObjectCreatedAgainUnderTheNameAlone(t *testing.T) {
	ctx := context.Background()
	f := newFinalizer(t, env.TestClient(t))
	// Given an object being deleted whose deletion was judged from this copy
	judged := deletingConfigMap(t, name, "example.com/other")
	// And, since, the object gone (its finalizers removed by hand) and another one created under its name with ours
	again := recreated(t, judged, name)
	// When our finalizer is removed through the judged copy
	wrote, err := f.Remove(ctx, judged)
	// Then nothing is written: the object judged is gone, and the new one was never judged
	if err != nil || wrote {
		t.Fatalf("Remove = %v, %v; want false, nil", wrote, err)
	}
	wantFinalizers(t, again, name)
	// And the judged copy still describes the judged object
	if judged.UID == again.UID {
		t.Errorf("the judged copy took the new object's UID %s", again.UID)
	}
}

func TestAddRefusesAnObjectCreatedAgainUnderTheName(t *testing.T) {
	ctx := context.Background()
	f := newFinalizer(t, env.TestClient(t))
	// Given an object read once, then deleted and another one created under its name
	judged := newConfigMap(t)
	stale := judged.DeepCopy()
	again := recreated(t, judged)
	// When our finalizer is added through the copy read before
	wrote, err := f.Add(ctx, stale)
	// Then it is refused: the caller decided for an object that is gone
	if err == nil || wrote {
		t.Fatalf("Add = %v, %v; want false and an error", wrote, err)
	}
	if !apierrors.IsNotFound(err) {
		t.Errorf("Add error %v is not NotFound: the object read is gone", err)
	}
	// And the new object is not written, nor does the copy describe it
	wantFinalizers(t, again)
	if stale.UID == again.UID {
		t.Errorf("the copy read took the new object's UID %s", again.UID)
	}
}
