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
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/annotation"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
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
	onlyTheRecordedHolderIsClaimed(ctx, t, f)
	// And if alpha lost it, a Lost event says so
	f.toldIfItLost(t, "alpha")
}

// onStorageObjects is the annotation backend of this file's tests: the
// record of key k sits on ConfigMap storage-k in the namespace *ns names
// when the backend looks, since a fixture's namespace is known only once the
// fixture the backend goes into has started.
func onStorageObjects(ns *string) backends.Factory {
	target := func(key string) (types.NamespacedName, error) {
		return types.NamespacedName{Namespace: *ns, Name: "storage-" + key}, nil
	}
	return annotation.Backend(annotation.Options{Object: &corev1.ConfigMap{}, Target: target})
}

// createStorageOfK creates the storage object of key k in ns through c,
// with annotations of another writer's and no record, and returns it.
func createStorageOfK(t *testing.T, c client.Client, ns string, annotations map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storage-k", Annotations: annotations}}
	if err := c.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

// startAnnotationHeld starts a fixture whose claims are stored as
// annotations on ConfigMap storage-<key> (RunInnerWhileParked), creates the
// storage object of key k, and has alpha hold k with each of waiters parked
// on it.
func startAnnotationHeld(t *testing.T, waiters ...string) (*fixture, client.Client, *corev1.ConfigMap) {
	t.Helper()
	var ns string
	f := start(t, setup{
		claimOpts: []claim.Option{claim.WithBackend(onStorageObjects(&ns))},
		opts:      []claimmw.Option{claimmw.WhileParked(claimmw.RunInnerWhileParked)},
	})
	ns = f.ns
	c := direct(t)
	cm := createStorageOfK(t, c, ns, nil)
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k")
	for _, w := range waiters {
		f.createAndWait(t, w, conditions.ReasonParked, "k")
	}
	return f, c, cm
}

// TestADeletionPassIsToldAnAnnotationRecordWhoseLabelsAnotherWriterReplaced:
// another writer's CreateOrUpdate that sets metadata.labels whole strips the
// holder's selector labels from the storage object while the record (its
// annotations) stays. A holder being deleted never acquires again, so
// nothing puts the labels back: its deletion passes must still be told the
// record it holds, and the key must not move on before one of them that was
// given it succeeded.
func TestADeletionPassIsToldAnAnnotationRecordWhoseLabelsAnotherWriterReplaced(t *testing.T) {
	// Given alpha holds k on the storage object, bravo waits for it, and
	// alpha's cleanup of k (a deletion pass given k) keeps failing
	f, c, cm := startAnnotationHeld(t, "bravo")
	ctx := context.Background()
	f.failPassesOf("alpha", func(s claimmw.State) bool { return s.Deleting && len(s.Grants) > 0 })
	alpha := f.deleteWidgetAsync(t, "alpha")
	f.waitForDeletionPassGiven(t, "alpha", "k")
	// When another writer replaces the storage object's labels whole
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
		t.Fatal(err)
	}
	cm.Labels = map[string]string{"team": "storage"}
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if rec := f.record(t, "k"); !rec.Exists || rec.Holder.UID != alpha.UID {
		t.Fatalf("record of k after the labels were replaced: exists %t, holder %s; want alpha's", rec.Exists, rec.Holder)
	}
	// Then alpha's deletion passes are still told k, alpha stays until one
	// of them succeeds, and bravo does not get k meanwhile
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if cl := f.lastCall(t, "alpha", func(cl call) bool { return cl.state.Deleting }); len(cl.state.Grants) == 0 {
			t.Fatalf("a deletion pass of alpha was told no grants while the record of k names alpha (bravo: %+v)", f.claimed(t, "bravo"))
		}
		if cond := f.claimed(t, "bravo"); cond.Status == metav1.ConditionTrue {
			t.Fatalf("bravo was granted k before a deletion pass of alpha given k succeeded: %+v", cond)
		}
	}
}

// The annotation backend notices erasure at once, including
// delete-and-recreate of the object that stores the record: never two
// objects Claimed=True for one key at rest, and a holder that lost it is told.
func TestAnAnnotationRecordErasedByDeleteAndRecreateLeavesOnlyItsRecordedHolderClaimed(t *testing.T) {
	// Given the storage object of key k, held by alpha, with bravo waiting
	f, c, cm := startAnnotationHeld(t, "bravo")
	ns, ctx := f.ns, context.Background()
	// When a tenant deletes the storage object and creates it again, bare
	if err := c.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	createStorageOfK(t, c, ns, map[string]string{"team": "storage"})
	// Then soon exactly the object the new record names is Claimed
	onlyTheRecordedHolderIsClaimed(ctx, t, f)
	// And if alpha lost it, a Lost event says so
	f.toldIfItLost(t, "alpha")
}

// TestAHolderWhoseAnnotationRecordIsErasedWithNobodyWaitingIsToldLost: a holder
// whose record is erased while nobody else wants the key acquires it again
// under a new token, and a Lost event says so (docs/middleware.md "Loss is
// told": "A pass that could not judge its claim (ClaimError) counts as
// possibly holding: the next pass that finds the key lost tells the
// reconciler and records Lost the same way"). Deleting the storage object
// makes the holder's pass a ClaimError (ErrNoTarget); after the object is
// created again the holder re-acquires silently: the ClaimError condition no
// longer "says it held" the key, so regrantEvents records nothing.
func TestAHolderWhoseAnnotationRecordIsErasedWithNobodyWaitingIsToldLost(t *testing.T) {
	var ns string
	f := start(t, setup{claimOpts: []claim.Option{claim.WithBackend(onStorageObjects(&ns))}})
	ns = f.ns
	ctx := context.Background()
	c := direct(t)
	// Given alpha alone holds k on its storage object
	cm := createStorageOfK(t, c, ns, nil)
	f.createAndWait(t, "alpha", conditions.ReasonClaimed, "k")
	// When a tenant deletes and recreates the object (the record is gone)
	if err := c.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	// (the holder's pass in between cannot judge its claim: the object is gone)
	f.waitForReason(t, "alpha", conditions.ReasonClaimError, 10*time.Second)
	createStorageOfK(t, c, ns, nil)
	// Then alpha's record is back and a Lost event tells it
	eventually(t, lossWithin, func() (bool, string) {
		rec, err := f.mw.Claimer().Current(ctx, "k")
		return err == nil && rec.Ours() && rec.Holder.Name == "alpha", fmt.Sprintf("record of k: %+v, %v", rec, err)
	})
	eventually(t, wakeWithin, func() (bool, string) {
		return f.hasEvent(t, "alpha", string(claimmw.EventLost)), "no Lost event on alpha"
	})
}

// The annotation backend notices erasure at once, including
// delete-and-recreate of the object that stores the record, even when every
// pass in between was a ClaimError: never two objects Claimed=True for one
// key at rest, and a holder that lost it is told.
func TestAHolderWhoseAnnotationRecordIsErasedAcrossClaimErrorPassesIsToldLost(t *testing.T) {
	// Given the storage object of key k, held by alpha, with bravo waiting
	f, c, cm := startAnnotationHeld(t, "bravo")
	ns, ctx := f.ns, context.Background()
	// When a tenant deletes the storage object and creates it again, bare
	if err := c.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	// (each pass in between cannot judge its claim: the object is gone)
	f.waitForReason(t, "alpha", conditions.ReasonClaimError, 10*time.Second)
	f.waitForReason(t, "bravo", conditions.ReasonClaimError, 10*time.Second)
	createStorageOfK(t, c, ns, map[string]string{"team": "storage"})
	// Then soon exactly the object the new record names is Claimed
	onlyTheRecordedHolderIsClaimed(ctx, t, f)
	// And alpha, whose record was erased, is told by a Lost event whether
	// bravo got the key or alpha acquired it again under a new token
	eventually(t, wakeWithin, func() (bool, string) {
		return f.hasEvent(t, "alpha", string(claimmw.EventLost)), fmt.Sprintf("no Lost event on alpha (alpha %s, bravo %s)", f.claimed(t, "alpha").Reason, f.claimed(t, "bravo").Reason)
	})
}

// toldIfItLost waits for a Lost event on name when its condition no longer
// says Claimed: an object that lost its key is told so.
func (f *fixture) toldIfItLost(t *testing.T, name string) {
	t.Helper()
	if f.claimed(t, name).Status == "False" {
		eventually(t, wakeWithin, func() (bool, string) {
			return f.hasEvent(t, name, string(claimmw.EventLost)), "no Lost event on " + name
		})
	}
}

// onlyTheRecordedHolderIsClaimed waits until key k's record is ours and
// exactly the object it names (alpha or bravo) is Claimed, the other not.
func onlyTheRecordedHolderIsClaimed(ctx context.Context, t *testing.T, f *fixture) {
	t.Helper()
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
}

// storageAndBackupOnOneTarget starts one manager in ns with two middlewares
// that store their records of a key on the same object, the ConfigMap
// storage-<key> (the annotation backend, one Target): "storage" claims a
// Widget's spec keys in claim namespace ns, "backup" the key its
// spec.handTo names in claim namespace backupNS. workers is each
// middleware's (0: the default).
func storageAndBackupOnOneTarget(t *testing.T, ns, backupNS string, workers int) (storage, backup *fixture) {
	t.Helper()
	backend := onStorageObjects(&ns)
	handToKey := func(_ context.Context, obj client.Object) ([]string, error) {
		if k := obj.(*testcrd.Widget).Spec.HandTo; k != "" {
			return []string{k}, nil
		}
		return nil, nil
	}
	fs := startReplica(t, ns,
		replicaMW{keys: specKeys, workers: workers, opts: []claimmw.Option{claimmw.WithName("storage"), claimmw.WithConditionType("StorageClaimed"), claimmw.WithFinalizer("example.com/storage"),
			claimmw.WithClaim(claim.Config{Namespace: ns}, claim.WithBackend(backend))}},
		replicaMW{keys: handToKey, workers: workers, opts: []claimmw.Option{claimmw.WithName("backup"), claimmw.WithConditionType("BackupClaimed"), claimmw.WithFinalizer("example.com/backup"),
			claimmw.WithClaim(claim.Config{Namespace: backupNS}, claim.WithBackend(backend))}},
	)
	return fs[0], fs[1]
}

// bravoWaitsThroughBackup creates bravo, whose spec.handTo names k, and
// waits until the backup middleware bk has parked it behind the record of k
// that the storage middleware's holder left on the storage object.
func bravoWaitsThroughBackup(t *testing.T, bk *fixture) {
	t.Helper()
	bravo := &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: bk.ns, Name: "bravo"}, Spec: testcrd.WidgetSpec{HandTo: "k"}}
	if err := direct(t).Create(context.Background(), bravo); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		cond := bk.conditionOfType(t, "bravo", "BackupClaimed")
		return cond.Reason == string(conditions.ReasonParked), fmt.Sprintf("bravo: %+v", cond)
	})
}

// TestAnAnnotationRecordErasedWhileItsHolderActsIsNotGrantedThroughAnotherMiddlewareWhoseClaimNamespaceDiffers:
// two middlewares of one manager store their records of a key on the same
// object (the annotation backend, one Target). The record of a key is that
// object whatever claim.Config.Namespace each sets (for the annotation
// backend it only limits the release sweep's List: one middleware sets it,
// the other, whose objects are spread over namespaces, leaves it empty), so
// a waiter of one that finds the record erased must ask the other whether
// its holder may still act for the key (docs/middleware.md, the record
// deleted, erased or overwritten from outside: "in every middleware set up
// on the same manager whose record of the key is the same object").
func TestAnAnnotationRecordErasedWhileItsHolderActsIsNotGrantedThroughAnotherMiddlewareWhoseClaimNamespaceDiffers(t *testing.T) {
	ns := env.Namespace(t)
	st, bk := storageAndBackupOnOneTarget(t, ns, "", 2)
	// One recorder of k's acting windows: alpha names k through the storage
	// middleware, bravo through the backup middleware (the other's passes
	// of each name no key and tell nothing of k).
	w := recordWindows(st, "k")
	only := func(who string) func(context.Context, string, call) (reconcile.Result, error) {
		return func(ctx context.Context, name string, c call) (reconcile.Result, error) {
			if name != who {
				return reconcile.Result{}, nil
			}
			return w.pass(ctx, name, c)
		}
	}
	st.inner.setHook(only("alpha"))
	bk.inner.setHook(only("bravo"))
	ctx := context.Background()
	c := direct(t)
	cm := createStorageOfK(t, c, ns, nil)
	// Given alpha holds k through the storage middleware and acts for it
	st.createWidget(t, "alpha", "k")
	eventually(t, 10*time.Second, func() (bool, string) {
		cond := st.conditionOfType(t, "alpha", "StorageClaimed")
		return cond.Reason == string(conditions.ReasonClaimed) && w.acted("alpha"), fmt.Sprintf("alpha: %+v", cond)
	})
	// And bravo names k through the backup middleware and waits for it: the
	// record on the storage object names alpha
	bravoWaitsThroughBackup(t, bk)
	// And alpha's next passes are slow to begin (its workloads run on)
	time.Sleep(time.Second)
	release := st.holdBackPasses("alpha")
	defer release()
	// When another writer replaces the storage object's annotations whole
	if err := c.Get(ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
		t.Fatal(err)
	}
	cm.Annotations = map[string]string{"team": "storage"}
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if rec := st.record(t, "k"); rec.Exists {
		t.Fatalf("the record of k after its annotations were replaced: %+v", rec)
	}
	// And bravo is reconciled (any change of it)
	bk.edit(t, "bravo", func(w *testcrd.Widget) { w.Labels = map[string]string{"touched": "yes"} })
	// Then bravo waits for alpha rather than act for k beside it
	eventually(t, 10*time.Second, func() (bool, string) {
		cond := bk.conditionOfType(t, "bravo", "BackupClaimed")
		return w.acted("bravo") || cond.Reason == string(conditions.ReasonWaitingForHandover), fmt.Sprintf("bravo: %+v", cond)
	})
	w.noOverlap(t)
}

// TestAWaiterOfAnotherMiddlewareIsWokenWhenAnAnnotationRecordItWaitsBehindIsReleased:
// a record's change wakes the objects whose key's record it is, whatever
// claim set wrote it (docs/middleware.md, Wake-ups): on the annotation
// backend that record sits on the object the Target names, so a waiter of
// another middleware storing its records there is woken by its release,
// not by its parked requeue.
func TestAWaiterOfAnotherMiddlewareIsWokenWhenAnAnnotationRecordItWaitsBehindIsReleased(t *testing.T) {
	ns := env.Namespace(t)
	st, bk := storageAndBackupOnOneTarget(t, ns, ns, 0)
	createStorageOfK(t, direct(t), ns, nil)
	// Given alpha holds k through the storage middleware
	st.createWidget(t, "alpha", "k")
	eventually(t, 10*time.Second, func() (bool, string) {
		cond := st.conditionOfType(t, "alpha", "StorageClaimed")
		return cond.Reason == string(conditions.ReasonClaimed), fmt.Sprintf("alpha: %+v", cond)
	})
	// And bravo names k through the backup middleware and is parked behind
	// alpha's record
	bravoWaitsThroughBackup(t, bk)
	// When alpha stops naming k and releases its record
	st.edit(t, "alpha", func(w *testcrd.Widget) { w.Spec.Keys = nil })
	// Then bravo is woken and gets k (its parked requeue is an hour away)
	eventually(t, wakeWithin, func() (bool, string) {
		cond := bk.conditionOfType(t, "bravo", "BackupClaimed")
		return cond.Reason == string(conditions.ReasonClaimed), fmt.Sprintf("bravo: %+v; alpha: %+v", cond, st.conditionOfType(t, "alpha", "StorageClaimed"))
	})
}
