package claimmw_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
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
