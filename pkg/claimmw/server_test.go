package claimmw_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
)

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
