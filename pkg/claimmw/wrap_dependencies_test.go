package claimmw_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/expiry"
)

// TestWrapRefusesANilOptionByName: an option left nil (a variable only
// set on some paths, as with a conditional WithHandover or WithRenewal
// option) is a nil dependency like the rest: Wrap names it by its
// position, as claim.New does for its options, instead of panicking.
func TestWrapRefusesANilOptionByName(t *testing.T) {
	keys := claimmw.WithKeys(func(context.Context, client.Object) ([]string, error) { return nil, nil })
	var unset claimmw.Option
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Wrap panicked on a nil option: %v", r)
		}
	}()
	mw, err := claimmw.Wrap(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }),
		claimmw.For(&testcrd.Widget{}), claimmw.WithClient(env.Client), claimmw.WithAPIReader(env.APIReader), keys,
		claimmw.WithClaim(claim.Config{Namespace: "claims"}), unset)
	if err == nil {
		t.Fatalf("Wrap accepted a nil option (middleware %p)", mw)
	}
	if !strings.Contains(err.Error(), "options[5]") {
		t.Errorf("error %q does not name the nil option (options[5])", err)
	}
}

// TestWrapRefusesATypedNilRenewalClockByName: WithRenewal's Clock drives
// every renewal; a typed-nil clock (a *FakeClock never assigned) is not nil
// as an interface, so the keeper would use it and panic in the first pass
// that holds a key. Wrap names it, as it names every typed-nil dependency.
func TestWrapRefusesATypedNilRenewalClockByName(t *testing.T) {
	keys := claimmw.WithKeys(func(context.Context, client.Object) ([]string, error) { return nil, nil })
	inner := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
	renewal := func(clk *clocktesting.FakeClock) claimmw.Option {
		return claimmw.WithRenewal(expiry.KeeperConfig{Duration: 30 * time.Second, RenewEvery: 5 * time.Second, RenewDeadline: 20 * time.Second, Clock: clk})
	}
	wrap := func(clk *clocktesting.FakeClock) (*claimmw.Middleware, error) {
		return claimmw.Wrap(inner, claimmw.For(&testcrd.Widget{}), claimmw.WithClient(env.Client), claimmw.WithAPIReader(env.APIReader), keys,
			claimmw.WithClaim(claim.Config{Namespace: "claims"}), renewal(clk))
	}
	// Given the same options with a clock, Wrap succeeds
	if _, err := wrap(clocktesting.NewFakeClock(time.Now())); err != nil {
		t.Fatalf("Wrap with a renewal clock: %v", err)
	}
	// When the clock is a typed nil, Wrap names it
	var unset *clocktesting.FakeClock
	mw, err := wrap(unset)
	if err == nil {
		t.Fatalf("Wrap accepted a typed-nil renewal clock (middleware %p)", mw)
	}
	if !strings.Contains(err.Error(), "Clock") {
		t.Errorf("error %q does not name the renewal's Clock", err)
	}
}
