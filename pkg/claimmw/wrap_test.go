package claimmw_test

// Setting the middleware up (docs/middleware.md "Builder setup" and
// "Options"): Wrap reports every configuration problem at once and names a
// nil dependency, and FromManager refuses an API server it cannot work with.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/expiry"
)

func TestWrapReportsEveryConfigurationProblemAtOnce(t *testing.T) {
	noop := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
	keys := claimmw.WithKeys(func(context.Context, client.Object) ([]string, error) { return nil, nil })
	claimer, err := claim.New(env.APIReader, env.Client, claim.Config{Namespace: "claims"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		inner reconcile.Reconciler
		opts  []claimmw.Option
		want  []string
	}{
		{
			name: "given nothing then every required option is named",
			want: []string{"inner reconciler: nil", "object type: none given", "client: none given", "claimer: none given", "keys: no keys function"},
		},
		{
			name:  "given a type without status conditions then it is refused",
			inner: noop,
			opts:  []claimmw.Option{claimmw.For(&testcrd.Gadget{}), claimmw.WithClient(env.Client), claimmw.WithClaimer(claimer), keys},
			want:  []string{"*testcrd.Gadget", "Status.Conditions []metav1.Condition"},
		},
		{
			name:  "given both claimer options, a bad finalizer and a bad condition type then all are named",
			inner: noop,
			opts: []claimmw.Option{
				claimmw.For(&testcrd.Widget{}), claimmw.WithClient(env.Client), keys,
				claimmw.WithClaimer(claimer), claimmw.WithClaim(claim.Config{Namespace: "claims"}, claim.WithBackend(lease.Backend)),
				claimmw.WithFinalizer("release"), claimmw.WithConditionType("Claimed now"),
			},
			want: []string{"both WithClaimer and WithClaim", "needs a domain prefix", `condition type "Claimed now"`},
		},
		{
			name:  "given WithClaim without an API reader then the reader is asked for",
			inner: noop,
			opts:  []claimmw.Option{claimmw.For(&testcrd.Widget{}), claimmw.WithClient(env.Client), keys, claimmw.WithClaim(claim.Config{Namespace: "claims"}, claim.WithBackend(lease.Backend))},
			want:  []string{"API reader: none given"},
		},
		{
			name:  "given a negative requeue then it is refused",
			inner: noop,
			opts:  []claimmw.Option{claimmw.For(&testcrd.Widget{}), claimmw.WithClient(env.Client), keys, claimmw.WithClaimer(claimer), claimmw.WithRequeue(-1, 0)},
			want:  []string{"requeue: intervals must not be negative"},
		},
		{
			name:  "given a handover without an API reader then the reader is asked for",
			inner: noop,
			opts: []claimmw.Option{claimmw.For(&testcrd.Widget{}), claimmw.WithClient(env.Client), keys, claimmw.WithClaimer(claimer),
				claimmw.WithHandover(func(context.Context, client.Object, string) (client.ObjectKey, bool, error) {
					return client.ObjectKey{}, false, nil
				})},
			want: []string{"handover: needs an API reader"},
		},
		{
			name:  "given renewal timings out of order then they are refused",
			inner: noop,
			opts: []claimmw.Option{claimmw.For(&testcrd.Widget{}), claimmw.WithClient(env.Client), keys, claimmw.WithClaimer(claimer),
				claimmw.WithRenewal(expiry.KeeperConfig{Duration: time.Second, RenewEvery: 2 * time.Second, RenewDeadline: time.Second})},
			want: []string{"RenewEvery", "RenewDeadline"},
		},
		{
			name:  "given a liveness on a nil reader then it is named, not a panic in every waiter's pass",
			inner: noop,
			opts: []claimmw.Option{claimmw.For(&testcrd.Widget{}), claimmw.WithClient(env.Client), claimmw.WithAPIReader(env.APIReader), keys,
				claimmw.WithClaim(claim.Config{Namespace: "claims"}, claim.WithLiveness(claim.HolderExistsAs(nil, &corev1.ConfigMap{})))},
			want: []string{"WithLiveness", "HolderExistsAs", "reader is nil"},
		},
		{
			name:  "given a typed-nil inner reconciler then it is named",
			inner: (*nilInner)(nil),
			opts:  []claimmw.Option{claimmw.For(&testcrd.Widget{}), claimmw.WithClient(env.Client), claimmw.WithAPIReader(env.APIReader), keys, claimmw.WithClaim(claim.Config{Namespace: "claims"})},
			want:  []string{"inner reconciler: nil"},
		},
		{
			name:  "given a typed-nil client then it is named and never called",
			inner: noop,
			opts:  []claimmw.Option{claimmw.For(&testcrd.Widget{}), claimmw.WithClient((*nilClient)(nil)), claimmw.WithAPIReader(env.APIReader), keys, claimmw.WithClaim(claim.Config{Namespace: "claims"})},
			want:  []string{"WithClient: a nil *claimmw_test.nilClient"},
		},
		{
			name:  "given a nil manager then it is named",
			inner: noop,
			opts:  []claimmw.Option{claimmw.FromManager(nil), claimmw.For(&testcrd.Widget{}), keys, claimmw.WithClaim(claim.Config{Namespace: "claims"})},
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

// nilInner and nilClient stand for dependencies a constructor returned as
// a nil *T beside its error: not nil as interfaces.
type nilInner struct{}

func (*nilInner) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	return reconcile.Result{}, nil
}

type nilClient struct{ client.Client }

func TestWrapAcceptsAWidget(t *testing.T) {
	// Given the minimal options
	claimer, err := claim.New(env.APIReader, env.Client, claim.Config{Namespace: "claims"})
	if err != nil {
		t.Fatal(err)
	}
	// When the middleware is built twice (metrics register once)
	for range 2 {
		_, err := claimmw.Wrap(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }),
			claimmw.For(&testcrd.Widget{}), claimmw.WithClient(env.Client), claimmw.WithClaimer(claimer),
			claimmw.WithKeys(func(context.Context, client.Object) ([]string, error) { return nil, nil }))
		// Then it builds
		if err != nil {
			t.Fatalf("Wrap: %v", err)
		}
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

// versionServer answers /version as an API server of the given minor, and
// nothing else.
func versionServer(t *testing.T, minor string) *rest.Config {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(version.Info{Major: "1", Minor: minor, GitVersion: "v1." + minor + ".0"})
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL}
}

func TestFromManagerRefusesAServerWithoutComparableResourceVersions(t *testing.T) {
	t.Parallel()
	noop := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
	for _, tc := range []struct {
		name    string
		cfg     func(t *testing.T) *rest.Config
		wantErr string
	}{
		{name: "given the pinned envtest server then the middleware builds", cfg: func(*testing.T) *rest.Config { return rest.CopyConfig(env.Config) }},
		{name: "given a 1.34 server then Wrap fails naming the missing promise", cfg: func(t *testing.T) *rest.Config { return versionServer(t, "34") }, wantErr: "does not promise comparable resourceVersions"},
		{name: "given a 1.35 server then the middleware builds", cfg: func(t *testing.T) *rest.Config { return versionServer(t, "35") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mgr, err := ctrl.NewManager(tc.cfg(t), ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
			if err != nil {
				t.Fatal(err)
			}
			// When the middleware is built from the manager
			_, err = claimmw.Wrap(noop, claimmw.FromManager(mgr), claimmw.For(&testcrd.Widget{}),
				claimmw.WithClaim(claim.Config{Namespace: "claims"}, claim.WithBackend(lease.Backend)),
				claimmw.WithKeys(func(context.Context, client.Object) ([]string, error) { return nil, nil }))
			// Then it asked the server its version
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Wrap: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Wrap: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
