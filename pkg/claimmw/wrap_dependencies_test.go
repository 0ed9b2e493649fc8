package claimmw_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/expiry"
)

type nilInner struct{}

func (*nilInner) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	return reconcile.Result{}, nil
}

type nilClient struct{ client.Client }

// TestWrapRefusesNilDependenciesByName: a nil dependency, typed nil
// included, would panic in a pass (HolderExistsAs(nil, ...) in every
// waiter's pass); Wrap names it instead.
func TestWrapRefusesNilDependenciesByName(t *testing.T) {
	keys := claimmw.WithKeys(func(context.Context, client.Object) ([]string, error) { return nil, nil })
	var typedNilInner *nilInner
	var typedNilClient *nilClient
	var nilManager manager.Manager
	for _, tc := range []struct {
		name  string
		inner reconcile.Reconciler
		opts  []claimmw.Option
		want  []string
	}{
		{
			name:  "given a liveness on a nil reader then it is named",
			inner: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }),
			opts: []claimmw.Option{claimmw.For(&testcrd.Widget{}), claimmw.WithClient(env.Client), claimmw.WithAPIReader(env.APIReader), keys,
				claimmw.WithClaim(claim.Config{Namespace: "claims"}, claim.WithLiveness(claim.HolderExistsAs(nil, &corev1.ConfigMap{})))},
			want: []string{"WithLiveness", "HolderExistsAs", "reader is nil"},
		},
		{
			name:  "given a typed-nil inner reconciler then it is named",
			inner: typedNilInner,
			opts:  []claimmw.Option{claimmw.For(&testcrd.Widget{}), claimmw.WithClient(env.Client), claimmw.WithAPIReader(env.APIReader), keys, claimmw.WithClaim(claim.Config{Namespace: "claims"})},
			want:  []string{"inner reconciler: nil"},
		},
		{
			name:  "given a typed-nil client then it is named and never called",
			inner: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }),
			opts:  []claimmw.Option{claimmw.For(&testcrd.Widget{}), claimmw.WithClient(typedNilClient), claimmw.WithAPIReader(env.APIReader), keys, claimmw.WithClaim(claim.Config{Namespace: "claims"})},
			want:  []string{"WithClient: a nil *claimmw_test.nilClient"},
		},
		{
			name:  "given a nil manager then it is named",
			inner: reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }),
			opts:  []claimmw.Option{claimmw.FromManager(nilManager), claimmw.For(&testcrd.Widget{}), keys, claimmw.WithClaim(claim.Config{Namespace: "claims"})},
			want:  []string{"FromManager: the manager is nil"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("Wrap panicked: %v", r)
				}
			}()
			mw, err := claimmw.Wrap(tc.inner, tc.opts...)
			if err == nil {
				t.Fatalf("Wrap succeeded: %v", mw)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

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
