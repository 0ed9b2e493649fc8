package claimmw_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
