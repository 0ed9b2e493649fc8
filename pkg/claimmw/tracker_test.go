package claimmw

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/claim"
)

func TestTrackerWakesWaitersAndCatchesEventsThatCameTooEarly(t *testing.T) {
	obj := types.NamespacedName{Namespace: "ns", Name: "b"}
	rec := &claim.Record{Ref: types.NamespacedName{Namespace: "claims", Name: "claim-1"}}
	other := types.NamespacedName{Namespace: "claims", Name: "claim-2"}
	for _, tc := range []struct {
		name       string
		run        func(tr *tracker) (missed bool, woken []reconcile.Request)
		wantMissed bool
		wantWoken  []reconcile.Request
	}{
		{
			name: "given a waiter when its record changes then it is woken",
			run: func(tr *tracker) (bool, []reconcile.Request) {
				missed := tr.wait(obj, rec, false, tr.snapshot())
				return missed, tr.recordChanged(rec.Ref)
			},
			wantWoken: []reconcile.Request{{NamespacedName: obj}},
		},
		{
			name: "given a waiter when another record changes then nobody is woken",
			run: func(tr *tracker) (bool, []reconcile.Request) {
				missed := tr.wait(obj, rec, false, tr.snapshot())
				return missed, tr.recordChanged(other)
			},
			wantWoken: []reconcile.Request{},
		},
		{
			name: "given the record changed during the pass, before registration, then the pass is told it missed it",
			run: func(tr *tracker) (bool, []reconcile.Request) {
				snap := tr.snapshot()
				woken := tr.recordChanged(rec.Ref)
				return tr.wait(obj, rec, false, snap), woken
			},
			wantMissed: true,
			wantWoken:  []reconcile.Request{},
		},
		{
			name: "given the memory of events overflowed during the pass then the pass counts as missed",
			run: func(tr *tracker) (bool, []reconcile.Request) {
				snap := tr.snapshot()
				for i := range maxTouched + 1 {
					tr.recordChanged(types.NamespacedName{Name: fmt.Sprint(i)})
				}
				return tr.wait(obj, rec, false, snap), nil
			},
			wantMissed: true,
		},
		{
			name: "given a waiter that was granted since then it is not woken",
			run: func(tr *tracker) (bool, []reconcile.Request) {
				missed := tr.wait(obj, rec, false, tr.snapshot())
				tr.stopWaiting(obj)
				return missed, tr.recordChanged(rec.Ref)
			},
			wantWoken: []reconcile.Request{},
		},
		{
			name: "given a handover waiter when a gated object changes then it is woken",
			run: func(tr *tracker) (bool, []reconcile.Request) {
				missed := tr.wait(obj, rec, true, tr.snapshot())
				return missed, tr.handoverChanged()
			},
			wantWoken: []reconcile.Request{{NamespacedName: obj}},
		},
		{
			name: "given a gated object changed during the pass then the handover waiter missed it",
			run: func(tr *tracker) (bool, []reconcile.Request) {
				snap := tr.snapshot()
				tr.handoverChanged()
				return tr.wait(obj, nil, true, snap), nil
			},
			wantMissed: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTracker()
			missed, woken := tc.run(tr)
			if missed != tc.wantMissed {
				t.Errorf("missed = %v, want %v", missed, tc.wantMissed)
			}
			if tc.wantWoken != nil {
				if diff := cmp.Diff(tc.wantWoken, woken); diff != "" {
					t.Errorf("woken (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestTrackerForgetsEverythingAboutAnObject(t *testing.T) {
	tr := newTracker()
	obj := types.NamespacedName{Namespace: "ns", Name: "b"}
	rec := &claim.Record{Ref: types.NamespacedName{Namespace: "claims", Name: "claim-1"}}
	// Given an object that waits, waits for a handover, and swept once
	tr.wait(obj, rec, true, tr.snapshot())
	tr.setSwept(obj, "uid-1", []string{"k"})
	tr.setHeld(obj, 2, nil)
	// When it is forgotten
	tr.forget(obj)
	tr.setHeld(obj, 0, nil)
	// Then nothing about it is left
	if len(tr.waiters) != 0 || len(tr.waitingOn) != 0 || len(tr.handover) != 0 || len(tr.sweptKeys) != 0 || len(tr.held) != 0 || tr.heldTotal != 0 {
		t.Errorf("tracker after forget: waiters %v, waitingOn %v, handover %v, swept %v, held %v (total %d)",
			tr.waiters, tr.waitingOn, tr.handover, tr.sweptKeys, tr.held, tr.heldTotal)
	}
	// And a recreated object of the same name does not inherit the sweep memory
	tr.setSwept(obj, "uid-1", []string{"k"})
	if _, ok := tr.swept(obj, "uid-2"); ok {
		t.Error("a recreated object inherited the sweep memory of the old one")
	}
}
