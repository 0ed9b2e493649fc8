package fence_test

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/fence"
)

// fieldOwner is the field manager the tests apply as, as ocf components
// apply with one per controller.
const fieldOwner = "database-controller"

// applied is the object an ocf component applies: the fields it manages and
// nothing else, TypeMeta set as server-side apply needs it.
func applied(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data:       data,
	}
}

// ocfApply is how ocf writes a managed resource.
func ocfApply(ctx context.Context, c client.Client, obj client.Object) error {
	return c.Patch(ctx, obj, client.Apply, client.ForceOwnership, client.FieldOwner(fieldOwner))
}

// applyWrites are the two ways of server-side apply a component uses.
var applyWrites = []struct {
	name string
	do   func(ctx context.Context, c client.Client, ns, name string, data map[string]string) error
}{
	{"Patch with client.Apply", func(ctx context.Context, c client.Client, ns, name string, data map[string]string) error {
		return ocfApply(ctx, c, applied(ns, name, data))
	}},
	{"Apply of an apply configuration", func(ctx context.Context, c client.Client, ns, name string, data map[string]string) error {
		return c.Apply(ctx, corev1ac.ConfigMap(name, ns).WithData(data), client.ForceOwnership, client.FieldOwner(fieldOwner))
	}},
}

func TestFencedApplyRefusesAStaleHolderAndLetsTheCurrentOneApply(t *testing.T) {
	ctx := context.Background()
	ns, stale, current, old, holder := takenOver(t)
	for _, w := range applyWrites {
		t.Run(w.name, func(t *testing.T) {
			name := "apply-" + map[bool]string{true: "patch", false: "config"}[w.name == applyWrites[0].name]
			// Given the current holder applies the object, creating it
			if err := w.do(ctx, holder, ns, name, map[string]string{dataKey: "new"}); err != nil {
				t.Fatalf("current holder applying: %v", err)
			}
			cm := get(t, applied(ns, name, nil))
			if got := cm.Annotations[fence.AnnotationFor(key)]; got != current.Token.String() {
				t.Fatalf("applied object stamped %q, want %s", got, current.Token)
			}
			// When the stale holder applies it
			err := w.do(ctx, old, ns, name, map[string]string{dataKey: "stale"})
			// Then it is refused as stale and nothing is written
			wantStale(t, err, stale, current.Token)
			if after := get(t, cm); after.ResourceVersion != cm.ResourceVersion || after.Data[dataKey] != "new" {
				t.Errorf("stale apply landed: rv %s -> %s, data %v", cm.ResourceVersion, after.ResourceVersion, after.Data)
			}
			// And the current holder applies again
			if err := w.do(ctx, holder, ns, name, map[string]string{dataKey: "newer"}); err != nil {
				t.Fatalf("current holder applying again: %v", err)
			}
			if after := get(t, cm); after.Data[dataKey] != "newer" {
				t.Errorf("current holder's apply did not land: %v", after.Data)
			}
		})
	}
}

// managers returns the field managers of obj with their operations.
func managers(obj client.Object) map[string]metav1.ManagedFieldsOperationType {
	out := map[string]metav1.ManagedFieldsOperationType{}
	for _, m := range obj.GetManagedFields() {
		out[m.Manager] = m.Operation
	}
	return out
}

func TestFencedApplyKeepsFieldOwnershipIntact(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	_, current := takeover(t, ns, key)
	_, other := takeover(t, ns, otherKey)
	holder, otherHolder := fenced(t, nil, current), fenced(t, nil, other)
	// Given the holder applies two fields, and another manager one of its own
	if err := ocfApply(ctx, holder, applied(ns, "owned", map[string]string{"a": "1", "b": "2"})); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Patch(ctx, applied(ns, "owned", map[string]string{"c": "3"}), client.Apply, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	// When the holder applies again without b
	if err := ocfApply(ctx, holder, applied(ns, "owned", map[string]string{"a": "1"})); err != nil {
		t.Fatal(err)
	}
	// Then b, which it alone owned, is gone; c, the other manager's, stays
	cm := get(t, applied(ns, "owned", nil))
	if _, ok := cm.Data["b"]; ok || cm.Data["a"] != "1" || cm.Data["c"] != "3" {
		t.Errorf("data after the second apply = %v, want a=1 and c=3 only", cm.Data)
	}
	// And both managers own their fields by apply
	if m := managers(cm); m[fieldOwner] != metav1.ManagedFieldsOperationApply || m["someone-else"] != metav1.ManagedFieldsOperationApply {
		t.Errorf("field managers %v, want %s and someone-else by Apply", m, fieldOwner)
	}
	// When the holder of another key applies with the same field manager
	if err := ocfApply(ctx, otherHolder, applied(ns, "owned", map[string]string{"a": "1"})); err != nil {
		t.Fatal(err)
	}
	// Then the first key's stamp survives beside the second's
	cm = get(t, cm)
	if got := cm.Annotations[fence.AnnotationFor(key)]; got != current.Token.String() {
		t.Errorf("stamp of %q after another key's apply with a shared manager = %q, want %s", key, got, current.Token)
	}
	if got := cm.Annotations[fence.AnnotationFor(otherKey)]; got != other.Token.String() {
		t.Errorf("stamp of %q = %q, want %s", otherKey, got, other.Token)
	}
}

func TestFencedApplyAnswersConflictsAsOCFExpects(t *testing.T) {
	ctx := context.Background()
	ns, stale, current, _, holder := takenOver(t)
	reader := newHookedReader(t)
	holderWithHook := fenced(t, reader, current)
	oldWithHook := fenced(t, reader, stale)

	t.Run("given another writer between the read and the apply then the apply lands, as an unfenced apply would", func(t *testing.T) {
		if err := ocfApply(ctx, holder, applied(ns, "busy", map[string]string{dataKey: "1"})); err != nil {
			t.Fatal(err)
		}
		ran := false
		reader.arm(func() {
			ran = true
			cm := get(t, applied(ns, "busy", nil))
			cm.Labels = map[string]string{"touched": "yes"}
			if err := env.Client.Update(ctx, cm); err != nil {
				t.Errorf("writing in between: %v", err)
			}
		})
		if err := ocfApply(ctx, holderWithHook, applied(ns, "busy", map[string]string{dataKey: "2"})); err != nil {
			t.Fatalf("apply after a write in between: %v (ocf expects server-side apply not to fail on a resourceVersion)", err)
		}
		if !ran {
			t.Fatal("the hook did not run: the fenced client did not read before applying")
		}
		if cm := get(t, applied(ns, "busy", nil)); cm.Data[dataKey] != "2" || cm.Labels["touched"] != "yes" {
			t.Errorf("object %v %v, want the apply and the other write", cm.Data, cm.Labels)
		}
	})

	t.Run("given the newer holder writing between the stale holder's read and apply then the stale apply is refused", func(t *testing.T) {
		if err := ocfApply(ctx, oldWithHook, applied(ns, "race", map[string]string{dataKey: "old"})); err != nil {
			t.Fatalf("stale holder creating before the new holder wrote: %v", err)
		}
		reader.arm(func() {
			if err := ocfApply(ctx, holder, applied(ns, "race", map[string]string{dataKey: "new"})); err != nil {
				t.Errorf("new holder applying in between: %v", err)
			}
		})
		err := ocfApply(ctx, oldWithHook, applied(ns, "race", map[string]string{dataKey: "stale"}))
		wantStale(t, err, stale, current.Token)
		if cm := get(t, applied(ns, "race", nil)); cm.Data[dataKey] != "new" {
			t.Errorf("data %v, want the new holder's", cm.Data)
		}
	})

	t.Run("given the newer holder creating the object between the stale holder's read and apply then the stale apply is refused", func(t *testing.T) {
		ran := false
		reader.arm(func() {
			ran = true
			if err := ocfApply(ctx, holder, applied(ns, "born", map[string]string{dataKey: "new"})); err != nil {
				t.Errorf("new holder creating in between: %v", err)
			}
		})
		err := ocfApply(ctx, oldWithHook, applied(ns, "born", map[string]string{dataKey: "stale"}))
		if !ran {
			t.Fatal("the hook did not run: the fenced client did not read before applying")
		}
		wantStale(t, err, stale, current.Token)
		if cm := get(t, applied(ns, "born", nil)); cm.Data[dataKey] != "new" || cm.Annotations[fence.AnnotationFor(key)] != current.Token.String() {
			t.Errorf("object %v %v, want the new holder's data and stamp", cm.Data, cm.Annotations)
		}
	})

	t.Run("given a field another manager owns and no force then the field manager conflict is reported, not retried", func(t *testing.T) {
		if err := env.Client.Patch(ctx, applied(ns, "shared", map[string]string{"x": "theirs"}), client.Apply, client.FieldOwner("someone-else")); err != nil {
			t.Fatal(err)
		}
		err := holder.Patch(ctx, applied(ns, "shared", map[string]string{"x": "mine"}), client.Apply, client.FieldOwner(fieldOwner))
		if !apierrors.IsConflict(err) {
			t.Fatalf("error %v, want the API server's field manager Conflict", err)
		}
		if errors.Is(err, fence.ErrFenced) {
			t.Fatalf("a field manager conflict reported as fenced: %v", err)
		}
	})

	t.Run("given an applied object carrying another resourceVersion then a Conflict, as the API server answers", func(t *testing.T) {
		obj := applied(ns, "busy", map[string]string{dataKey: "3"})
		obj.ResourceVersion = "1"
		if err := ocfApply(ctx, holder, obj); !apierrors.IsConflict(err) {
			t.Fatalf("error %v, want a Conflict", err)
		}
	})
}

// TestFencedApplyThatCreatesLeavesTheNewerHoldersStamp: an apply that
// finds no object cannot be conditional, so it may land on an object a
// newer holder created between its read and its apply (the documented
// window of one round trip). It must not leave the object carrying the
// older token: then the stale holder, and every holder older than the
// newer one, would pass the check on every later write, long after the
// window.
func TestFencedApplyThatCreatesLeavesTheNewerHoldersStamp(t *testing.T) {
	ctx := context.Background()
	ns, stale, current, old, holder := takenOver(t)
	reader := newHookedReader(t)
	oldWithHook := fenced(t, reader, stale)
	// Given the newer holder creates the object between the stale holder's
	// read (which found nothing) and its apply
	reader.arm(func() {
		if err := ocfApply(ctx, holder, applied(ns, "created", map[string]string{dataKey: "new"})); err != nil {
			t.Errorf("newer holder creating in between: %v", err)
		}
	})
	_ = ocfApply(ctx, oldWithHook, applied(ns, "created", map[string]string{dataKey: "stale"}))
	// Then the object still carries the newer holder's token
	cm := get(t, applied(ns, "created", nil))
	if got := cm.Annotations[fence.AnnotationFor(key)]; got != current.Token.String() {
		t.Errorf("stamp after the stale holder's creating apply = %q, want the newer holder's %s (the older %s)", got, current.Token, stale.Token)
	}
	// And, the window over, the stale holder's next apply is refused
	err := ocfApply(ctx, old, applied(ns, "created", map[string]string{dataKey: "stale again"}))
	if !errors.Is(err, fence.ErrFenced) {
		after := get(t, cm)
		t.Errorf("stale holder's apply after the creation window: error %v, data %v; want fence.ErrFenced", err, after.Data)
	}
}

// TestFencedApplyDoesNotMakeAnotherKeysHolderConflictOnItsOwnStamp: the
// fenced apply copies the stamps of other keys into the caller's applied
// configuration, so its field manager comes to own them too. A holder of
// the other key, applying its own fields under its own field manager
// without ForceOwnership, must not then get a field manager conflict on its
// own stamp when its token changes: an unfenced apply of disjoint fields
// never conflicts.
func TestFencedApplyDoesNotMakeAnotherKeysHolderConflictOnItsOwnStamp(t *testing.T) {
	ctx := context.Background()
	ns, _, _, _, a := takenOver(t)
	otherOld, otherNew := takeover(t, ns, otherKey)
	b, bNext := fenced(t, nil, otherOld), fenced(t, nil, otherNew)
	apply := func(c client.Client, manager string, data map[string]string) error {
		return c.Patch(ctx, applied(ns, "shared", data), client.Apply, client.FieldOwner(manager))
	}
	// Given the holder of the other key applies its field as controller-b
	if err := apply(b, "controller-b", map[string]string{"b": "1"}); err != nil {
		t.Fatal(err)
	}
	// And the holder of the key applies a field of its own as controller-a
	if err := apply(a, "controller-a", map[string]string{"a": "1"}); err != nil {
		t.Fatal(err)
	}
	// When the other key moves on to a newer holder, which applies its
	// field as controller-b, without forcing
	err := apply(bNext, "controller-b", map[string]string{"b": "2"})
	// Then it lands, as the same applies unfenced would
	if err != nil {
		cm := get(t, applied(ns, "shared", nil))
		t.Fatalf("newer holder of %q applying its own field: %v\nfield managers: %v", otherKey, err, managers(cm))
	}
	cm := get(t, applied(ns, "shared", nil))
	if cm.Data["b"] != "2" || cm.Data["a"] != "1" || cm.Annotations[fence.AnnotationFor(otherKey)] != otherNew.Token.String() {
		t.Errorf("object %v %v, want a=1, b=2 and the newer token of %q", cm.Data, cm.Annotations, otherKey)
	}
}

// TestFencedApplyOfAnObjectDeletedAfterTheReadAnswersAsAnApply: the guard
// sends the read's resourceVersion; when the object is deleted between the
// read and the apply, the caller must see what an apply answers (the object
// created again, or the refusal of a newer holder), not an error server-side
// apply never gives.
func TestFencedApplyOfAnObjectDeletedAfterTheReadAnswersAsAnApply(t *testing.T) {
	ctx := context.Background()
	ns, _, current, _, holder := takenOver(t)
	reader := newHookedReader(t)
	holderWithHook := fenced(t, reader, current)
	if err := ocfApply(ctx, holder, applied(ns, "gone", map[string]string{dataKey: "1"})); err != nil {
		t.Fatal(err)
	}
	reader.arm(func() {
		if err := env.Client.Delete(ctx, applied(ns, "gone", nil)); err != nil {
			t.Errorf("deleting in between: %v", err)
		}
	})
	if err := ocfApply(ctx, holderWithHook, applied(ns, "gone", map[string]string{dataKey: "2"})); err != nil {
		t.Fatalf("apply after the object was deleted since the read: %v (an unfenced apply creates it)", err)
	}
	if cm := get(t, applied(ns, "gone", nil)); cm.Data[dataKey] != "2" || cm.Annotations[fence.AnnotationFor(key)] != current.Token.String() {
		t.Errorf("object %v %v, want the apply, stamped %s", cm.Data, cm.Annotations, current.Token)
	}
}
