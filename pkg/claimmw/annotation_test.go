package claimmw_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/annotation"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// TestAnAnnotationRecordErasedByAnotherWriterIsNoticedAtOnce: the
// annotation backend stores a record on an object others write too. A write
// that replaces the annotations whole (a CreateOrUpdate whose mutate
// function sets metadata.annotations) erases the record; the holder and the
// waiter are reconciled at once, so never two objects are Claimed for the
// key, and a holder that lost it says so.
func TestAnAnnotationRecordErasedByAnotherWriterIsNoticedAtOnce(t *testing.T) {
	// Given the storage object of key k, held by alpha, with bravo waiting
	f, c, cm := startAnnotationHeld(t, "bravo")
	ctx := context.Background()
	// When another writer replaces the object's annotations whole
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
		t.Fatal(err)
	}
	if _, ok := cm.Annotations[backends.DefaultHolderUIDAnnotation]; !ok {
		t.Fatalf("the storage object carries no record: %v", cm.Annotations)
	}
	cm.Annotations = map[string]string{"team": "storage"}
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	// Then within two seconds the record exists again, and exactly the
	// object it names is Claimed
	eventually(t, lossWithin, func() (bool, string) {
		rec, err := f.mw.Claimer().Current(ctx, "k")
		if err != nil || !rec.Ours() {
			return false, fmt.Sprintf("record of k: %+v, %v", rec, err)
		}
		holder, other := rec.Holder.Name, "bravo"
		if holder == "bravo" {
			other = "alpha"
		}
		hc, oc := f.claimed(t, holder), f.claimed(t, other)
		return hc.Status == "True" && oc.Status == "False",
			fmt.Sprintf("record names %s; %s %s/%s; %s %s/%s", holder, holder, hc.Status, hc.Reason, other, oc.Status, oc.Reason)
	})
	// And if alpha lost it, a Lost event says so
	if f.claimed(t, "alpha").Status == "False" {
		eventually(t, wakeWithin, func() (bool, string) {
			return f.hasEvent(t, "alpha", string(claimmw.EventLost)), "no Lost event on alpha"
		})
	}
}

// startAnnotationHeld starts a fixture whose claims are stored as
// annotations on ConfigMap storage-<key> (RunInnerWhileParked), creates the
// storage object of key k, and has alpha hold k with each of waiters parked
// on it.
func startAnnotationHeld(t *testing.T, waiters ...string) (*fixture, client.Client, *corev1.ConfigMap) {
	t.Helper()
	var ns string
	target := func(key string) (types.NamespacedName, error) {
		return types.NamespacedName{Namespace: ns, Name: "storage-" + key}, nil
	}
	backend := annotation.Backend(annotation.Options{Object: &corev1.ConfigMap{}, Target: target})
	f := start(t, setup{
		claimOpts: []claim.Option{claim.WithBackend(backend)},
		opts:      []claimmw.Option{claimmw.WhileParked(claimmw.RunInnerWhileParked)},
	})
	ns = f.ns
	c := direct(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storage-k"}}
	if err := c.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	f.createWidget(t, "alpha", "k")
	f.waitForReason(t, "alpha", conditions.ReasonClaimed, 10*time.Second)
	for _, w := range waiters {
		f.createWidget(t, w, "k")
		f.waitForReason(t, w, conditions.ReasonParked, 10*time.Second)
	}
	return f, c, cm
}
