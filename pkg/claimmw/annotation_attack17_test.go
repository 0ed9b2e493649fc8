package claimmw_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ocf-claim/claim/pkg/backends/annotation"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// Issue 17 item 2: the annotation backend notices erasure at once, including
// delete-and-recreate of the object that stores the record: never two
// objects Claimed=True for one key at rest, and a holder that lost it is told.
func TestAttack17_AnnotationRecordErasedByDeleteAndRecreate(t *testing.T) {
	// Given the storage object of key k, held by alpha, with bravo waiting
	f, c, cm := startAnnotationHeld(t, "bravo")
	ns, ctx := f.ns, context.Background()
	// When a tenant deletes the storage object and creates it again, bare
	if err := c.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	fresh := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storage-k", Annotations: map[string]string{"team": "storage"}}}
	if err := c.Create(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	// Then soon exactly the object the new record names is Claimed
	onlyTheRecordedHolderIsClaimed(ctx, t, f)
	// And if alpha lost it, a Lost event says so
	if f.claimed(t, "alpha").Status == "False" {
		eventually(t, wakeWithin, func() (bool, string) {
			return f.hasEvent(t, "alpha", string(claimmw.EventLost)), "no Lost event on alpha"
		})
	}
}

// TestAttack17_AnnotationRecordErasedWithNobodyWaitingIsToldLost: a holder
// whose record is erased while nobody else wants the key acquires it again
// under a new token, and a Lost event says so (docs/middleware.md "Loss is
// told": "A pass that could not judge its claim (ClaimError) counts as
// possibly holding: the next pass that finds the key lost tells the
// reconciler and records Lost the same way"). Deleting the storage object
// makes the holder's pass a ClaimError (ErrNoTarget); after the object is
// created again the holder re-acquires silently: the ClaimError condition no
// longer "says it held" the key, so regrantEvents records nothing.
func TestAttack17_AnnotationRecordErasedWithNobodyWaitingIsToldLost(t *testing.T) {
	var ns string
	target := func(key string) (types.NamespacedName, error) {
		return types.NamespacedName{Namespace: ns, Name: "storage-" + key}, nil
	}
	backend := annotation.Backend(annotation.Options{Object: &corev1.ConfigMap{}, Target: target})
	f := start(t, setup{claimOpts: []claim.Option{claim.WithBackend(backend)}})
	ns = f.ns
	ctx := context.Background()
	c := direct(t)
	// Given alpha alone holds k on its storage object
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storage-k"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	f.createWidget(t, "alpha", "k")
	f.waitForReason(t, "alpha", conditions.ReasonClaimed, 10*time.Second)
	// When a tenant deletes and recreates the object (the record is gone)
	if err := c.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	// (the holder's pass in between cannot judge its claim: the object is gone)
	f.waitForReason(t, "alpha", conditions.ReasonClaimError, 10*time.Second)
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storage-k"}}); err != nil {
		t.Fatal(err)
	}
	// Then alpha's record is back and a Lost event tells it
	eventually(t, lossWithin, func() (bool, string) {
		rec, err := f.mw.Claimer().Current(ctx, "k")
		return err == nil && rec.Ours() && rec.Holder.Name == "alpha", fmt.Sprintf("record of k: %+v, %v", rec, err)
	})
	eventually(t, wakeWithin, func() (bool, string) {
		return f.hasEvent(t, "alpha", string(claimmw.EventLost)), "no Lost event on alpha"
	})
}

// Issue 17 item 2 (variant: both passes in between were ClaimError): the annotation backend notices erasure at once, including
// delete-and-recreate of the object that stores the record: never two
// objects Claimed=True for one key at rest, and a holder that lost it is told.
func TestAttack17_AnnotationRecordErasedByDeleteAndRecreateAfterClaimError(t *testing.T) {
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
	fresh := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storage-k", Annotations: map[string]string{"team": "storage"}}}
	if err := c.Create(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	// Then soon exactly the object the new record names is Claimed
	onlyTheRecordedHolderIsClaimed(ctx, t, f)
	// And alpha, whose record was erased, is told by a Lost event whether
	// bravo got the key or alpha acquired it again under a new token
	eventually(t, wakeWithin, func() (bool, string) {
		return f.hasEvent(t, "alpha", string(claimmw.EventLost)), fmt.Sprintf("no Lost event on alpha (alpha %s, bravo %s)", f.claimed(t, "alpha").Reason, f.claimed(t, "bravo").Reason)
	})
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
