package envtest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Env is a running control plane and the clients tests use against it.
type Env struct {
	// Config reaches the API server as an administrator.
	Config *rest.Config
	// Scheme knows the client-go types, apiextensions, and whatever the
	// functions of Options.AddToScheme registered.
	Scheme *runtime.Scheme
	// Client is a manager-style client: reads from an informer cache, writes
	// to the API server.
	Client client.Client
	// APIReader reads straight from the API server, like the manager's
	// GetAPIReader().
	APIReader client.Reader

	env    *crenvtest.Environment
	cancel context.CancelFunc
	dirs   []string // etcd data and cert dirs of a restartable control plane
}

// Options configure Start.
type Options struct {
	// AddToScheme registers test types (CRDs written in Go) with the scheme.
	AddToScheme []func(*runtime.Scheme) error
	// CRDs are installed before Start returns.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// CRDPaths are files or directories of CRD manifests (YAML or JSON, as
	// controller-gen writes them), installed before Start returns. A path
	// that does not exist is an error, not an empty set: a test that
	// silently runs without its CRD fails later, and less clearly.
	CRDPaths []string
	// Restartable keeps etcd's data and the API server's certificates in
	// directories of their own so that [Env.Restart] can stop and start the
	// control plane without losing either; its API server serves watches from
	// etcd (no watch cache) so that watches resume across a restart. Main
	// ignores it.
	Restartable bool
}

// Start starts a control plane on free ports and connects the clients.
func Start(opts Options) (*Env, error) {
	dir, err := BinaryDir()
	if err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	for _, add := range opts.AddToScheme {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("starting envtest: registering test types: %w", err)
		}
	}
	e := &Env{Scheme: scheme, env: &crenvtest.Environment{
		BinaryAssetsDirectory:    dir,
		Scheme:                   scheme,
		CRDs:                     opts.CRDs,
		CRDDirectoryPaths:        opts.CRDPaths,
		ErrorIfCRDPathMissing:    len(opts.CRDPaths) > 0,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}}
	if opts.Restartable {
		// A restart does not wait for long-running requests to drain: an
		// API server still busy after restartStopTimeout is killed, as a
		// crashed one would be.
		e.env.ControlPlaneStopTimeout = restartStopTimeout
		if err := e.persistentDirs(); err != nil {
			return nil, fmt.Errorf("starting envtest: %w", err)
		}
	}
	if e.Config, err = e.env.Start(); err != nil {
		e.removeDirs()
		return nil, fmt.Errorf("starting envtest control plane from %s: %w", dir, err)
	}
	if err := e.connect(); err != nil {
		_ = e.env.Stop()
		e.removeDirs()
		return nil, err
	}
	return e, nil
}

func (e *Env) connect() error {
	ctx, cancel := context.WithCancel(context.Background())
	c, err := e.NewCachedClient(ctx)
	if err != nil {
		cancel()
		return err
	}
	reader, err := client.New(e.Config, client.Options{Scheme: e.Scheme})
	if err != nil {
		cancel()
		return fmt.Errorf("creating the API reader: %w", err)
	}
	e.Client, e.APIReader, e.cancel = c, reader, cancel
	return nil
}

// Stop stops the clients' caches and the control plane.
func (e *Env) Stop() error {
	if e.cancel != nil {
		e.cancel()
	}
	defer e.removeDirs()
	return e.env.Stop()
}

func (e *Env) removeDirs() {
	for _, d := range e.dirs {
		_ = os.RemoveAll(d)
	}
}

// KubeConfig returns a kubeconfig file's content that reaches the API
// server as the same administrator as Config, credentials inline, for tools
// run against the control plane (kubectl, kubectl-claims).
func (e *Env) KubeConfig() []byte { return e.env.KubeConfig }

// Main is a TestMain helper: it starts a control plane with opts, stores it
// in *env, runs the tests, stops the control plane and exits with the tests'
// code. When the control-plane binaries cannot be found it exits non-zero
// with [BinaryDir]'s error, which says how to provide them.
func Main(m *testing.M, env **Env, opts ...Options) {
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true), zap.Level(zapLevel())))
	var o Options
	for _, opt := range opts {
		o.AddToScheme = append(o.AddToScheme, opt.AddToScheme...)
		o.CRDs = append(o.CRDs, opt.CRDs...)
		o.CRDPaths = append(o.CRDPaths, opt.CRDPaths...)
	}
	e, err := Start(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		os.Exit(1)
	}
	*env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "envtest: stopping control plane:", err)
	}
	os.Exit(code)
}

// NewClient returns a new uncached client with its own connection, as a
// separate claimant process would have. It can watch, so that tests may wrap
// it with controller-runtime's interceptor package.
func (e *Env) NewClient() (client.WithWatch, error) {
	c, err := client.NewWithWatch(rest.CopyConfig(e.Config), client.Options{Scheme: e.Scheme})
	if err != nil {
		return nil, fmt.Errorf("creating client: %w", err)
	}
	return c, nil
}

// TestClient is [Env.NewClient] for a test: an uncached client of its own, as a
// user's kubectl; t fails at once if it cannot be built.
func (e *Env) TestClient(t testing.TB) client.WithWatch {
	t.Helper()
	c, err := e.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// NewCachedClient returns a manager-style client whose reads come from a new
// informer cache that runs until ctx is done.
func (e *Env) NewCachedClient(ctx context.Context) (client.Client, error) {
	cfg := rest.CopyConfig(e.Config)
	ca, err := cache.New(cfg, cache.Options{Scheme: e.Scheme})
	if err != nil {
		return nil, fmt.Errorf("creating cache: %w", err)
	}
	go func() { _ = ca.Start(ctx) }()
	if !ca.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("creating cache: %w", ctx.Err())
	}
	c, err := client.New(cfg, client.Options{Scheme: e.Scheme, Cache: &client.CacheOptions{Reader: ca}})
	if err != nil {
		return nil, fmt.Errorf("creating cached client: %w", err)
	}
	return c, nil
}

// Namespace creates a fresh namespace for t (GenerateName "t-") and deletes
// it when t ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating test namespace: %v", err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// InstallCRDs installs crds and waits until the API server serves them.
func (e *Env) InstallCRDs(crds ...*apiextensionsv1.CustomResourceDefinition) error {
	if _, err := crenvtest.InstallCRDs(e.Config, crenvtest.CRDInstallOptions{CRDs: crds, Scheme: e.Scheme}); err != nil {
		return fmt.Errorf("installing CRDs: %w", err)
	}
	return nil
}

// zapLevel keeps test output to errors unless ENVTEST_VERBOSE is set.
func zapLevel() zapcore.Level {
	if os.Getenv("ENVTEST_VERBOSE") != "" {
		return zapcore.DebugLevel
	}
	return zapcore.ErrorLevel
}
