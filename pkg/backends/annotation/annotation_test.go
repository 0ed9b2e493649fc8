package annotation_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/annotation"
	"github.com/ocf-claim/claim/pkg/backends/backendtest"
	"github.com/ocf-claim/claim/pkg/claim"
)

// targetName is the claimed object's name for a key in these tests.
func targetName(key string) string { return backends.HashName("target-", key) }

// configMapTargets claims keys on ConfigMaps of namespace ns.
func configMapTargets(ns string) annotation.Options {
	return annotation.Options{
		Object: &corev1.ConfigMap{},
		Target: func(key string) (types.NamespacedName, error) {
			return types.NamespacedName{Namespace: ns, Name: targetName(key)}, nil
		},
	}
}

func annotationHarness(t *testing.T) backendtest.Env {
	ns := env.Namespace(t)
	writer := env.TestClient(t)
	e := backendtest.ConfigMapEnv(env.APIReader, writer, ns)
	e.Backend = annotation.Backend(configMapTargets(ns))
	var keys atomic.Int64
	e.NewKey = func(t *testing.T) string {
		key := fmt.Sprintf("elasticsearch|https://es-%d.%s:9200", keys.Add(1), ns)
		createTarget(t, writer, ns, key, nil)
		return key
	}
	e.SeedForeign = func(t *testing.T, key string) {
		// A hand-written claim that set only the holder's name.
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"someone"}}}`, backends.DefaultHolderNameAnnotation)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: targetName(key)}}
		if err := writer.Patch(context.Background(), cm, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatalf("seeding a foreign record on %s: %v", cm.Name, err)
		}
	}
	return e
}

func createTarget(t *testing.T, c client.Client, ns, key string, annotations map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: targetName(key), Annotations: annotations, Labels: map[string]string{"app": "storage"}},
		Data:       map[string]string{"url": key},
	}
	if err := c.Create(context.Background(), cm); err != nil {
		t.Fatalf("creating claimed ConfigMap for %q: %v", key, err)
	}
	return cm
}

func TestAnnotationBackendHonoursTheContract(t *testing.T) {
	backendtest.Run(t, annotationHarness)
}

func newClaimer(t *testing.T, ns string, opts annotation.Options) *claim.Claimer {
	t.Helper()
	c, err := claim.New(env.APIReader, env.Client, claim.Config{Namespace: ns}, claim.WithBackend(annotation.Backend(opts)))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGetReadsTheRecordFromTheClaimedObject(t *testing.T) {
	ctx, ns := context.Background(), env.Namespace(t)
	c := newClaimer(t, ns, configMapTargets(ns))
	tests := []struct {
		name        string
		key         string
		annotations map[string]string // nil: no object at all
		want        func(*corev1.ConfigMap) claim.Record
		wantErr     error
	}{{
		name:        "Given an object without claim annotations, Then no record, fenced on the object's version",
		key:         "plain",
		annotations: map[string]string{"team": "storage"},
		want: func(cm *corev1.ConfigMap) claim.Record {
			return claim.Record{Key: "plain", Ref: client.ObjectKeyFromObject(cm), UID: cm.UID, Version: cm.ResourceVersion}
		},
	}, {
		name:        "Given an object with only some claim annotations, Then a foreign record",
		key:         "partial",
		annotations: map[string]string{backends.DefaultHolderUIDAnnotation: "u-1", backends.DefaultKeyAnnotation: "partial"},
		want: func(cm *corev1.ConfigMap) claim.Record {
			return claim.Record{Key: "partial", Holder: claim.Holder{UID: "u-1"}, Exists: true, Token: claim.Token(cm.ResourceVersion),
				Foreign: "missing annotations " + backends.DefaultHolderNameAnnotation + ", " + backends.DefaultHolderNamespaceAnnotation,
				Ref:     client.ObjectKeyFromObject(cm), UID: cm.UID, Version: cm.ResourceVersion}
		},
	}, {
		name:    "Given no object, Then an error wrapping ErrNoTarget that names the object",
		key:     "missing",
		wantErr: backends.ErrNoTarget,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := tt.key
			var cm *corev1.ConfigMap
			if tt.annotations != nil {
				cm = createTarget(t, env.Client, ns, key, tt.annotations)
			}
			// When the claim of the key is read
			got, err := c.Current(ctx, key)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), ns+"/"+targetName(key)) {
					t.Fatalf("Current(%q) error = %v, want %v naming %s/%s", key, err, tt.wantErr, ns, targetName(key))
				}
				// And Acquire refuses to grant it
				_, o, err := c.Acquire(ctx, key, claim.Holder{Name: "h", UID: "u-h"})
				if !errors.Is(err, tt.wantErr) || o.Granted() {
					t.Fatalf("Acquire(%q) = %s, %v; want no grant and %v", key, o.Reason, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want(cm), got); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReleaseRemovesExactlyTheClaimsKeys(t *testing.T) {
	ctx, ns := context.Background(), env.Namespace(t)
	// Given a claimed object with its operator's own annotations and labels,
	// one of them in the claim's domain
	own := map[string]string{"team": "storage", backends.Domain + "/note": "kept"}
	cm := createTarget(t, env.Client, ns, "k", own)
	c := newClaimer(t, ns, configMapTargets(ns))
	h := claim.Holder{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "holder", UID: "u-holder"}
	// When a holder acquires and then releases the key
	if _, o, err := c.Acquire(ctx, "k", h); err != nil || o.Reason != claim.ReasonAcquired {
		t.Fatalf("Acquire: %v %s", err, o.Reason)
	}
	var held corev1.ConfigMap
	if err := env.APIReader.Get(ctx, client.ObjectKeyFromObject(cm), &held); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, h); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// Then while held the object carried the claim's annotations and the
	// holder label, and after release its metadata is what it was
	if held.Annotations[backends.DefaultHolderUIDAnnotation] != "u-holder" || held.Labels[backends.DefaultHolderUIDLabel] != "u-holder" {
		t.Errorf("held object: annotations %v labels %v, want the claim's", held.Annotations, held.Labels)
	}
	var after corev1.ConfigMap
	if err := env.APIReader.Get(ctx, client.ObjectKeyFromObject(cm), &after); err != nil {
		t.Fatalf("claimed object after release: %v", err)
	}
	type meta struct {
		Annotations, Labels, Data map[string]string
		UID                       types.UID
	}
	want := meta{own, cm.Labels, cm.Data, cm.UID}
	if diff := cmp.Diff(want, meta{after.Annotations, after.Labels, after.Data, after.UID}); diff != "" {
		t.Errorf("claimed object after release (-want +got):\n%s", diff)
	}
}

// TestOtherFieldsSurviveConcurrentWrites: the operator keeps writing its
// object while claims are granted, taken over and released on it.
func TestOtherFieldsSurviveConcurrentWrites(t *testing.T) {
	ctx, ns := context.Background(), env.Namespace(t)
	// Given a Deployment claimed by key, and a writer that keeps changing
	// its annotations, labels, spec and status with unconditional patches
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "es", Annotations: map[string]string{"rev": "0"}, Labels: map[string]string{"app": "es"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "es"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "es"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "es", Image: "es"}}},
			},
		},
	}
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	opts := annotation.Options{Object: &appsv1.Deployment{}, Target: func(string) (types.NamespacedName, error) {
		return client.ObjectKeyFromObject(d), nil
	}}
	writer := env.TestClient(t)
	var last atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := int64(1); ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			obj := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "es"}}
			body := fmt.Sprintf(`{"metadata":{"annotations":{"rev":"%d"},"labels":{"rev":"%d"}},"spec":{"replicas":%d}}`, i, i, i%7)
			if err := writer.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(body))); err != nil {
				t.Errorf("operator patch %d: %v", i, err)
				return
			}
			status := fmt.Sprintf(`{"status":{"observedGeneration":%d}}`, i)
			if err := writer.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(status))); err != nil {
				t.Errorf("operator status patch %d: %v", i, err)
				return
			}
			last.Store(i)
		}
	})
	newHolder, kill := backendtest.ConfigMapHolders(env.Client, ns)
	a, b := newHolder(t), newHolder(t)
	c := newClaimer(t, ns, opts)
	// When A acquires, B finds it held, A dies, B takes over and releases,
	// each retried while the operator's writes win the race
	eventually(t, "A acquires", func() (bool, error) { return granted(c.Acquire(ctx, "es", a)) })
	if _, o, err := c.Acquire(ctx, "es", b); err != nil && !errors.Is(err, claim.ErrRaced) || err == nil && (o.Reason != claim.ReasonHeldElsewhere || !o.Holder.Is(a)) {
		t.Fatalf("B while A is alive: %s naming %s, %v; want HeldElsewhere naming A", o.Reason, o.Holder, err)
	}
	kill(t, a)
	eventually(t, "B takes over", func() (bool, error) { return granted(c.Acquire(ctx, "es", b)) })
	if ok, err := c.Holds(ctx, "es", b); err != nil || !ok {
		t.Fatalf("Holds(es, B) = %t, %v", ok, err)
	}
	eventually(t, "B releases", func() (bool, error) {
		err := c.Release(ctx, b)
		return err == nil, ignoreConflict(err)
	})
	close(stop)
	wg.Wait()
	// Then the object exists, carries every write of the operator, and none
	// of the claim's keys
	var got appsv1.Deployment
	if err := env.APIReader.Get(ctx, client.ObjectKeyFromObject(d), &got); err != nil {
		t.Fatalf("claimed Deployment: %v", err)
	}
	n := last.Load()
	if n == 0 {
		t.Fatal("the operator made no write while the claim ran")
	}
	type fields struct {
		Annotations, Labels map[string]string
		Replicas            int32
		ObservedGeneration  int64
		UID                 types.UID
	}
	want := fields{
		Annotations: map[string]string{"rev": strconv.FormatInt(n, 10)},
		Labels:      map[string]string{"app": "es", "rev": strconv.FormatInt(n, 10)},
		Replicas:    int32(n % 7), ObservedGeneration: n, UID: d.UID,
	}
	if diff := cmp.Diff(want, fields{got.Annotations, got.Labels, ptr.Deref(got.Spec.Replicas, -1), got.Status.ObservedGeneration, got.UID}); diff != "" {
		t.Errorf("claimed Deployment after %d operator writes (-want +got):\n%s", n, diff)
	}
	t.Logf("the operator wrote the Deployment %d times during the claim", n)
}

func granted(_ claim.Holder, o claim.Outcome, err error) (bool, error) {
	return o.Granted(), ignoreConflict(err)
}

// ignoreConflict keeps the errors that concurrent writes to the claimed
// object explain (the protocol's write lost to the operator's) from failing
// a retry loop.
func ignoreConflict(err error) error {
	if errors.Is(err, claim.ErrRaced) || errors.Is(err, backends.ErrConflict) {
		return nil
	}
	return err
}

// eventually polls try until it is done, for 30 s at the most; an error
// fails t at once.
func eventually(t *testing.T, what string, try func() (bool, error)) {
	t.Helper()
	envtest.EventuallyEvery(t, 30*time.Second, 10*time.Millisecond, func() (bool, string) {
		ok, err := try()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return ok, what + ": not done"
	})
}

func TestTokenOfOneGrantRisesButStaysBelowTheNextGrant(t *testing.T) {
	ctx, ns := context.Background(), env.Namespace(t)
	// Given a key granted to A on its ConfigMap
	cm := createTarget(t, env.Client, ns, "k", nil)
	c := newClaimer(t, ns, configMapTargets(ns))
	newHolder, kill := backendtest.ConfigMapHolders(env.Client, ns)
	a, b := newHolder(t), newHolder(t)
	_, first, err := c.Acquire(ctx, "k", a)
	if err != nil || first.Reason != claim.ReasonAcquired {
		t.Fatalf("A: %s %v", first.Reason, err)
	}
	// When the operator writes the object, and later B takes over from A
	patch := client.RawPatch(types.MergePatchType, []byte(`{"data":{"extra":"1"}}`))
	if err := env.Client.Patch(ctx, cm, patch); err != nil {
		t.Fatal(err)
	}
	_, during, err := c.Acquire(ctx, "k", a)
	if err != nil || during.Reason != claim.ReasonHeld {
		t.Fatalf("A again: %s %v", during.Reason, err)
	}
	kill(t, a)
	_, next, err := c.Acquire(ctx, "k", b)
	if err != nil || next.Reason != claim.ReasonTakenOver {
		t.Fatalf("B: %s %v", next.Reason, err)
	}
	// Then A's token rose with the operator's write, and B's is newer still
	for _, pair := range [][2]claim.Token{{during.Token, first.Token}, {next.Token, during.Token}} {
		if c, err := pair[0].Compare(pair[1]); err != nil || c <= 0 {
			t.Errorf("token %s is not newer than %s (%v)", pair[0], pair[1], err)
		}
	}
}

func TestAReadOnlyControllerReadsTheHolderFromMetadataOnly(t *testing.T) {
	ctx, ns := context.Background(), env.Namespace(t)
	// Given a key held on its ConfigMap
	createTarget(t, env.Client, ns, "k", nil)
	h := claim.Holder{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "holder", UID: "u-holder"}
	if _, o, err := newClaimer(t, ns, configMapTargets(ns)).Acquire(ctx, "k", h); err != nil || !o.Granted() {
		t.Fatalf("Acquire: %s %v", o.Reason, err)
	}
	// When a controller that only reads metadata asks who holds the key
	proto := &metav1.PartialObjectMetadata{}
	proto.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	reader := newClaimer(t, ns, annotation.Options{Object: proto, Target: configMapTargets(ns).Target})
	rec, err := reader.Current(ctx, "k")
	// Then it gets the holder
	if err != nil || !rec.Ours() || !rec.Holder.Is(h) {
		t.Fatalf("Current(k) = %+v, %v; want held by %s", rec, err, h)
	}
}
