package fence_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/fence"
)

// cmWrite is one way an inner reconciler writes a ConfigMap: cm is a fresh
// copy as read, v the value it writes.
type cmWrite struct {
	name    string
	deletes bool
	do      func(ctx context.Context, c client.Client, cm *corev1.ConfigMap, v string) error
}

var cmWrites = []cmWrite{
	{name: "update", do: func(ctx context.Context, c client.Client, cm *corev1.ConfigMap, v string) error {
		cm.Data[dataKey] = v
		return c.Update(ctx, cm)
	}},
	{name: "update without resourceVersion", do: func(ctx context.Context, c client.Client, cm *corev1.ConfigMap, v string) error {
		return c.Update(ctx, configMap(cm.Namespace, cm.Name, v))
	}},
	{name: "merge patch", do: func(ctx context.Context, c client.Client, cm *corev1.ConfigMap, v string) error {
		base := cm.DeepCopy()
		cm.Data[dataKey] = v
		return c.Patch(ctx, cm, client.MergeFrom(base))
	}},
	{name: "merge patch with optimistic lock", do: func(ctx context.Context, c client.Client, cm *corev1.ConfigMap, v string) error {
		base := cm.DeepCopy()
		cm.Data[dataKey] = v
		return c.Patch(ctx, cm, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	}},
	{name: "strategic merge patch", do: func(ctx context.Context, c client.Client, cm *corev1.ConfigMap, v string) error {
		base := cm.DeepCopy()
		cm.Data[dataKey] = v
		return c.Patch(ctx, cm, client.StrategicMergeFrom(base))
	}},
	{name: "delete", deletes: true, do: func(ctx context.Context, c client.Client, cm *corev1.ConfigMap, _ string) error {
		return c.Delete(ctx, cm)
	}},
}

// statusWrite is one way an inner reconciler writes a Deployment's status.
type statusWrite struct {
	name string
	do   func(ctx context.Context, c client.Client, d *appsv1.Deployment, gen int64) error
}

var statusWrites = []statusWrite{
	{name: "status update", do: func(ctx context.Context, c client.Client, d *appsv1.Deployment, gen int64) error {
		d.Status.ObservedGeneration = gen
		return c.Status().Update(ctx, d)
	}},
	{name: "status merge patch", do: func(ctx context.Context, c client.Client, d *appsv1.Deployment, gen int64) error {
		base := d.DeepCopy()
		d.Status.ObservedGeneration = gen
		return c.Status().Patch(ctx, d, client.MergeFrom(base))
	}},
	{name: "status update via SubResource", do: func(ctx context.Context, c client.Client, d *appsv1.Deployment, gen int64) error {
		d.Status.ObservedGeneration = gen
		return c.SubResource("status").Update(ctx, d)
	}},
}

func TestStaleHolderIsRefused(t *testing.T) {
	ctx := context.Background()
	ns, stale, current, old, holder := takenOver(t)
	for i, w := range cmWrites {
		t.Run(w.name, func(t *testing.T) {
			// Given an object the old holder wrote while it held the key,
			cm := configMap(ns, fmt.Sprintf("p-%d", i), "old")
			create(t, old, cm, "old holder")
			if got := get(t, cm).Annotations[fence.AnnotationFor(key)]; got != stale.Token.String() {
				t.Fatalf("stamp after create = %q, want %s", got, stale.Token)
			}
			// and that the new holder has written since (over the older stamp),
			if err := holder.Update(ctx, configMap(ns, cm.Name, "new")); err != nil {
				t.Fatalf("new holder overwriting an older stamp: %v", err)
			}
			before := get(t, cm)
			if got := before.Annotations[fence.AnnotationFor(key)]; got != current.Token.String() {
				t.Fatalf("stamp after the new holder's write = %q, want %s", got, current.Token)
			}

			// when the old holder writes, then it is refused and the object is unchanged.
			wantStale(t, w.do(ctx, old, get(t, cm), "stale"), stale, current.Token)
			if after := get(t, cm); after.ResourceVersion != before.ResourceVersion || after.Data[dataKey] != "new" {
				t.Fatalf("object written by a refused holder: resourceVersion %s -> %s, data %v", before.ResourceVersion, after.ResourceVersion, after.Data)
			}

			// When the holder that still holds writes the same way, then it lands, stamped.
			if err := w.do(ctx, holder, get(t, cm), "newer"); err != nil {
				t.Fatalf("current holder: %v", err)
			}
			if w.deletes {
				if err := env.APIReader.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
					t.Fatalf("after the current holder's delete: %v, want NotFound", err)
				}
				return
			}
			after := get(t, cm)
			if after.Data[dataKey] != "newer" || after.Annotations[fence.AnnotationFor(key)] != current.Token.String() {
				t.Fatalf("after the current holder's write: data %v, annotations %v", after.Data, after.Annotations)
			}
		})
	}
}

func TestStaleHolderIsRefusedStatus(t *testing.T) {
	ctx := context.Background()
	ns, stale, current, old, holder := takenOver(t)
	for i, w := range statusWrites {
		t.Run(w.name, func(t *testing.T) {
			// Given a Deployment the new holder wrote,
			d := deployment(ns, fmt.Sprintf("d-%d", i))
			create(t, holder, d, "new holder")
			before := get(t, d)

			// when the old holder writes its status, then it is refused and nothing changes.
			wantStale(t, w.do(ctx, old, get(t, d), 7), stale, current.Token)
			if after := get(t, d); after.ResourceVersion != before.ResourceVersion {
				t.Fatalf("status written by a refused holder: resourceVersion %s -> %s", before.ResourceVersion, after.ResourceVersion)
			}

			// When the current holder writes it, then it lands and the stamp stays.
			if err := w.do(ctx, holder, get(t, d), 8); err != nil {
				t.Fatalf("current holder: %v", err)
			}
			after := get(t, d)
			if after.Status.ObservedGeneration != 8 || after.Annotations[fence.AnnotationFor(key)] != current.Token.String() {
				t.Fatalf("after the current holder's status write: observedGeneration %d, annotations %v", after.Status.ObservedGeneration, after.Annotations)
			}
		})
	}
}

// The check and the write are one step: the new holder writes between the
// old holder's check read and its write, every time, and the old write never
// lands.
func TestCheckAndWriteDoNotInterleave(t *testing.T) {
	ctx := context.Background()
	ns, stale, current, _, holder := takenOver(t)
	reader := newHookedReader(t)
	old := fenced(t, reader, stale)

	// between arms the hook: the new holder's write lands right after the
	// old holder's check read.
	between := func(t *testing.T, write func() error) (ran *bool) {
		ran = new(bool)
		reader.arm(func() {
			*ran = true
			if err := write(); err != nil {
				t.Errorf("new holder writing in between: %v", err)
			}
		})
		return ran
	}

	for i, w := range cmWrites {
		t.Run(w.name, func(t *testing.T) {
			// Given an object the old holder wrote while it held,
			cm := configMap(ns, fmt.Sprintf("race-%d", i), "old")
			create(t, old, cm, "old holder")
			// when the new holder writes between the old holder's check and write,
			copyAsRead := get(t, cm)
			ran := between(t, func() error { return holder.Update(ctx, configMap(ns, cm.Name, "new")) })
			err := w.do(ctx, old, copyAsRead, "stale")

			// then the old write is a Conflict and the new holder's write stands.
			if !*ran {
				t.Fatal("the hook did not run: the fenced client did not read before writing")
			}
			if !apierrors.IsConflict(err) {
				t.Fatalf("old holder's %s: %v, want a Conflict", w.name, err)
			}
			after := get(t, cm)
			if after.Data[dataKey] != "new" || after.Annotations[fence.AnnotationFor(key)] != current.Token.String() {
				t.Fatalf("object after the race: data %v, annotations %v", after.Data, after.Annotations)
			}
			// When the old holder retries on the Conflict, then it is refused as stale.
			wantStale(t, w.do(ctx, old, get(t, cm), "stale"), stale, current.Token)
		})
	}
	for i, w := range statusWrites {
		t.Run(w.name, func(t *testing.T) {
			d := deployment(ns, fmt.Sprintf("race-d-%d", i))
			create(t, old, d, "old holder")
			copyAsRead := get(t, d)
			ran := between(t, func() error {
				d := get(t, d)
				d.Spec.Paused = true
				return holder.Update(ctx, d)
			})
			err := w.do(ctx, old, copyAsRead, 7)
			if !*ran {
				t.Fatal("the hook did not run")
			}
			if !apierrors.IsConflict(err) {
				t.Fatalf("old holder's %s: %v, want a Conflict", w.name, err)
			}
			if after := get(t, d); after.Status.ObservedGeneration == 7 {
				t.Fatal("the old holder's status write landed after the new holder's write")
			}
			wantStale(t, w.do(ctx, old, get(t, d), 7), stale, current.Token)
		})
	}
}

// Free-running: the old and the new holder update the same object as fast as
// they can, many times. No write of the old holder lands after the first
// write of the new one, and the object ends with the new token.
func TestConcurrentHoldersRace(t *testing.T) {
	const rounds = 5
	const writes = 20
	ctx := context.Background()
	ns, _, current, old, holder := takenOver(t)
	for r := range rounds {
		cm := configMap(ns, fmt.Sprintf("free-%d", r), "old")
		create(t, old, cm, "old holder")
		landed := func(c *fence.Client, v string) (rvs []string, errs []error) {
			for i := range writes {
				obj := configMap(ns, cm.Name, fmt.Sprintf("%s-%d", v, i))
				err := c.Update(ctx, obj)
				switch {
				case err == nil:
					rvs = append(rvs, obj.ResourceVersion)
				case apierrors.IsConflict(err), errors.Is(err, fence.ErrFenced):
				default:
					errs = append(errs, err)
				}
			}
			return rvs, errs
		}
		var oldRVs, newRVs []string
		var oldErrs, newErrs []error
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() { <-start; oldRVs, oldErrs = landed(old, "old") })
		wg.Go(func() { <-start; newRVs, newErrs = landed(holder, "new") })
		close(start)
		wg.Wait()
		if err := errors.Join(append(oldErrs, newErrs...)...); err != nil {
			t.Fatalf("round %d: unexpected errors: %v", r, err)
		}
		if len(newRVs) == 0 {
			t.Fatalf("round %d: the current holder never wrote", r)
		}
		for _, o := range oldRVs {
			if c, err := claim.Token(o).Compare(claim.Token(newRVs[0])); err != nil || c > 0 {
				t.Fatalf("round %d: the old holder's write %s landed after the new holder's first write %s (%v)", r, o, newRVs[0], err)
			}
		}
		after := get(t, cm)
		if after.Annotations[fence.AnnotationFor(key)] != current.Token.String() {
			t.Fatalf("round %d: object ends stamped %q, want %s", r, after.Annotations[fence.AnnotationFor(key)], current.Token)
		}
		t.Logf("round %d: old holder landed %d writes, new holder %d", r, len(oldRVs), len(newRVs))
	}
}

func TestUnsupportedWrites(t *testing.T) {
	ctx := context.Background()
	ns, _, _, _, f := takenOver(t)
	cm := configMap(ns, "p", "v")
	create(t, f, cm, "holder")
	tests := []struct {
		name  string
		write func() error
	}{
		{"JSON patch", func() error {
			return f.Patch(ctx, get(t, cm), client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/data/x","value":"y"}]`)))
		}},
		{"server-side apply patch in CBOR", func() error {
			return f.Patch(ctx, get(t, cm), client.RawPatch(types.ApplyCBORPatchType, []byte{0xa0}), client.FieldOwner("t"))
		}},
		{"strategic merge patch replacing annotations", func() error {
			return f.Patch(ctx, get(t, cm), client.RawPatch(types.StrategicMergePatchType, []byte(`{"metadata":{"annotations":{"$patch":"replace"}}}`)))
		}},
		{"DeleteAllOf", func() error {
			return f.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns))
		}},
		{"status JSON patch", func() error {
			return f.Status().Patch(ctx, get(t, cm), client.RawPatch(types.JSONPatchType, []byte(`[]`)))
		}},
		{"status create", func() error {
			return f.Status().Create(ctx, get(t, cm), &corev1.ConfigMap{})
		}},
		{"status apply", func() error {
			return f.Status().Apply(ctx, corev1ac.ConfigMap(cm.Name, ns), client.FieldOwner("t"))
		}},
		{"other subresource update", func() error {
			return f.SubResource("scale").Update(ctx, get(t, cm))
		}},
	}
	for _, tc := range tests {
		t.Run("given a "+tc.name+", then it is refused as unsupported and nothing is written", func(t *testing.T) {
			before := get(t, cm)
			err := tc.write()
			var unsupported *fence.UnsupportedError
			if !errors.As(err, &unsupported) || !errors.Is(err, fence.ErrUnsupported) {
				t.Fatalf("error %v, want a *fence.UnsupportedError", err)
			}
			if after := get(t, cm); after.ResourceVersion != before.ResourceVersion {
				t.Fatalf("object written: resourceVersion %s -> %s", before.ResourceVersion, after.ResourceVersion)
			}
		})
	}
}

// A malformed stamp is never overwritten: the client cannot tell whether it
// hid a newer token.
func TestMalformedStampIsRefused(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	_, current := takeover(t, ns, key)
	f := fenced(t, nil, current)
	annotation := fence.AnnotationFor(key)
	cm := configMap(ns, "p", "v")
	cm.Annotations = map[string]string{annotation: "12abc"}
	if err := env.Client.Create(ctx, cm); err != nil { // an unfenced writer
		t.Fatal(err)
	}
	for _, w := range cmWrites {
		t.Run(w.name, func(t *testing.T) {
			before := get(t, cm)
			err := w.do(ctx, f, get(t, cm), "x")
			var malformed *fence.MalformedStampError
			if !errors.As(err, &malformed) || !errors.Is(err, fence.ErrMalformedStamp) || malformed.Annotation != annotation || malformed.Value != "12abc" {
				t.Fatalf("error %v, want a *fence.MalformedStampError naming %s", err, annotation)
			}
			if after := get(t, cm); after.ResourceVersion != before.ResourceVersion {
				t.Fatal("object with a malformed stamp was written")
			}
		})
	}
	// Given the stamp removed by hand, when the holder writes, then it lands.
	fixed := get(t, cm)
	delete(fixed.Annotations, annotation)
	if err := env.Client.Update(ctx, fixed); err != nil {
		t.Fatal(err)
	}
	if err := f.Update(ctx, configMap(ns, cm.Name, "after")); err != nil {
		t.Fatalf("after the stamp was removed: %v", err)
	}
}

// A holder of one key never erases the stamp of another, even when it writes
// from a copy that predates that stamp.
func TestOtherKeysStampsSurvive(t *testing.T) {
	ctx := context.Background()
	ns, _, current, _, f := takenOver(t)
	otherStale, otherCurrent := takeover(t, ns, otherKey)
	other, otherOld := fenced(t, nil, otherCurrent), fenced(t, nil, otherStale)

	cm := configMap(ns, "shared", "v")
	cm.Annotations = map[string]string{"app": "x"}
	if err := f.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	cached := get(t, cm) // a copy from before the other key's stamp
	if err := other.Update(ctx, configMap(ns, cm.Name, "other")); err != nil {
		t.Fatalf("holder of the other key: %v", err)
	}
	otherAnnotation := fence.AnnotationFor(otherKey)

	// When the holder of key updates from its old copy (no resourceVersion),
	cached.ResourceVersion = ""
	cached.Data[dataKey] = "mine"
	if err := f.Update(ctx, cached); err != nil {
		t.Fatalf("update from an old copy: %v", err)
	}
	// then the other key's stamp is still there.
	if got := get(t, cm).Annotations[otherAnnotation]; got != otherCurrent.Token.String() {
		t.Fatalf("other key's stamp after an update = %q, want %s", got, otherCurrent.Token)
	}
	// When it patches all annotations away, then only the stamps remain.
	if err := f.Patch(ctx, get(t, cm), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":null}}`))); err != nil {
		t.Fatalf("patching annotations away: %v", err)
	}
	want := map[string]string{fence.AnnotationFor(key): current.Token.String(), otherAnnotation: otherCurrent.Token.String()}
	if got := get(t, cm).Annotations; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("annotations = %v, want %v", got, want)
	}
	// And the other key's stale holder is still fenced by the kept stamp.
	wantStale(t, otherOld.Update(ctx, configMap(ns, cm.Name, "stale")), otherStale, otherCurrent.Token)
}

func TestCreate(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	_, current := takeover(t, ns, key)
	_, otherCurrent := takeover(t, ns, otherKey)
	f := fenced(t, nil, current, otherCurrent)

	// Given an object that carries a forged stamp, when created, then it
	// carries exactly the grants' stamps.
	cm := configMap(ns, "p", "v")
	cm.Annotations = map[string]string{fence.AnnotationFor(key): "1", fence.AnnotationFor("elsewhere"): "5", "app": "x"}
	if err := f.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{fence.AnnotationFor(key): current.Token.String(), fence.AnnotationFor(otherKey): otherCurrent.Token.String(), "app": "x"}
	if got := get(t, cm).Annotations; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("annotations = %v, want %v", got, want)
	}
	// When created again, then AlreadyExists passes through and the caller's object is as it was.
	again := configMap(ns, "p", "w")
	if err := f.Create(ctx, again); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
	if again.Annotations != nil {
		t.Fatalf("refused create left annotations %v on the caller's object", again.Annotations)
	}
}

// A write that carries its own precondition gets the Conflict the API server
// would give, and a missing object the NotFound.
func TestCallerPreconditions(t *testing.T) {
	ctx := context.Background()
	ns, _, _, _, f := takenOver(t)
	cm := configMap(ns, "p", "v")
	create(t, f, cm, "holder")
	oldCopy := get(t, cm)
	if err := f.Update(ctx, configMap(ns, cm.Name, "w")); err != nil {
		t.Fatal(err)
	}
	staleRV, wrongUID := oldCopy.ResourceVersion, types.UID("00000000-0000-0000-0000-000000000000")
	tests := []struct {
		name  string
		write func() error
	}{
		{"update from an old copy", func() error { c := oldCopy.DeepCopy(); c.Data[dataKey] = "x"; return f.Update(ctx, c) }},
		{"update naming another UID", func() error { c := configMap(ns, cm.Name, "x"); c.UID = wrongUID; return f.Update(ctx, c) }},
		{"status update from an old copy", func() error { return f.Status().Update(ctx, oldCopy.DeepCopy()) }},
		{"patch locked on an old copy", func() error {
			c := oldCopy.DeepCopy()
			c.Data[dataKey] = "x"
			return f.Patch(ctx, c, client.MergeFromWithOptions(oldCopy, client.MergeFromWithOptimisticLock{}))
		}},
		{"delete with an old resourceVersion", func() error {
			return f.Delete(ctx, configMap(ns, cm.Name, ""), client.Preconditions{ResourceVersion: &staleRV})
		}},
		{"delete with another UID", func() error {
			return f.Delete(ctx, configMap(ns, cm.Name, ""), client.Preconditions{UID: &wrongUID})
		}},
	}
	for _, tc := range tests {
		t.Run("given a "+tc.name+", then it is a Conflict and nothing is written", func(t *testing.T) {
			before := get(t, cm)
			if err := tc.write(); !apierrors.IsConflict(err) {
				t.Fatalf("error %v, want a Conflict", err)
			}
			if after := get(t, cm); after.ResourceVersion != before.ResourceVersion {
				t.Fatal("object written")
			}
		})
	}
	t.Run("given a missing object, then every guarded write is NotFound", func(t *testing.T) {
		missing := configMap(ns, "missing", "v")
		for _, err := range []error{
			f.Update(ctx, missing.DeepCopy()),
			f.Patch(ctx, missing.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{}`))),
			f.Delete(ctx, missing.DeepCopy()),
		} {
			if !apierrors.IsNotFound(err) {
				t.Errorf("error %v, want NotFound", err)
			}
		}
	})
}
