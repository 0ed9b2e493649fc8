package claimmw_test

import (
	"fmt"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// Promise 6: keys are normalized exactly once, end to end. A planned
// handover is part of "end to end".
func TestAPlannedHandoverWorksWithANonIdempotentNormalizer(t *testing.T) {
	tenant := func(k string) (string, error) { return "tenant-a/" + k, nil }
	f := start(t, setup{
		claimCfg: &claim.Config{Normalize: tenant},
		opts:     []claimmw.Option{claimmw.WithHandover(handTo)},
	})
	// Given a holds k under a deterministic, non-idempotent key normalizer,
	// and b waits for k
	f.aHoldsKAndBWaits(t)
	// When a names b as the successor of its keys
	f.edit(t, "a", func(w *testcrd.Widget) { w.Spec.HandTo = "b" })
	// Then the handover is prepared and committed: b holds k
	eventually(t, 10*time.Second, func() (bool, string) {
		c := f.claimed(t, "b")
		return c.Reason == string(conditions.ReasonClaimed),
			fmt.Sprintf("b: %+v; a: %+v; record of k: %+v", c, f.claimed(t, "a"), f.record(t, "k"))
	})
	b := f.widgetNow(t, "b")
	if rec := f.record(t, "k"); !rec.Ours() || rec.Holder.UID != b.UID {
		t.Errorf("record of k = %+v, want held by b", rec)
	}
}

// Promise 6 with WithRenewal: a non-idempotent key normalizer is applied once
// by the renewals too, so a holder keeps its key past the lease duration.
func TestRenewalsKeepAKeyUnderANonIdempotentNormalizer(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	tenant := func(k string) (string, error) { return "tenant-a/" + k, nil }
	f := start(t, renewing(t, clk, setup{claimCfg: &claim.Config{Normalize: tenant}}))
	// Given a holds k and b waits for it
	f.aHoldsKAndBWaits(t)
	// When twice the lease duration passes, tick by tick
	for i := 0; i < 12; i++ {
		before := f.record(t, "k").RenewTime
		clk.Step(renewEvery)
		eventually(t, wakeWithin, func() (bool, string) {
			rec := f.record(t, "k")
			return rec.RenewTime.After(before), fmt.Sprintf("tick %d: no renewal of k landed; record %+v", i, rec)
		})
	}
	// Then a still holds k, and b, asked again, is still parked
	f.touch(t, "b")
	time.Sleep(time.Second)
	a, _ := f.widget(t, "a")
	if rec := f.record(t, "k"); rec.Holder.UID != a.UID {
		t.Errorf("record of k = %+v, want a's", rec)
	}
	if c := f.claimed(t, "b"); c.Reason != string(conditions.ReasonParked) {
		t.Errorf("b: %+v, want Parked", c)
	}
	if c := f.claimed(t, "a"); c.Reason != string(conditions.ReasonClaimed) {
		t.Errorf("a: %+v, want Claimed", c)
	}
}

func TestANonIdempotentNormalizerIsAppliedOnce(t *testing.T) {
	tenant := func(k string) (string, error) { return "tenant-a/" + k, nil }
	f := start(t, setup{claimCfg: &claim.Config{Normalize: tenant}})
	// Given a key normalizer that prefixes a tenant
	f.createWidget(t, "x", "orders")
	// Then x holds tenant-a/orders, recorded under that key only
	cond := f.waitForReason(t, "x", conditions.ReasonClaimed, 10*time.Second)
	mustContain(t, "x's message", cond.Message, `"tenant-a/orders"`)
	if !f.leaseExists(t, "tenant-a/orders") {
		t.Error("no Lease for tenant-a/orders")
	}
	if f.leaseExists(t, "tenant-a/tenant-a/orders") {
		t.Error("a Lease for tenant-a/tenant-a/orders: the key normalizer was applied twice")
	}
}
