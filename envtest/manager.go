package envtest

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ManagerOptions returns the options of a manager that runs in a test
// against e: e's scheme; no metrics listener, since the tests of a package
// would compete for its port; no check that controller names are unique,
// since every test of a package registers the same controller again; and,
// when namespaces are given, a cache that sees only those namespaces, so
// that tests never see each other's objects. Adjust the result (a cache's
// ByObject, a NewClient that wraps the client) before [Env.StartManager].
func (e *Env) ManagerOptions(namespaces ...string) manager.Options {
	o := manager.Options{
		Scheme:     e.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
	if len(namespaces) > 0 {
		o.Cache.DefaultNamespaces = make(map[string]cache.Config, len(namespaces))
		for _, ns := range namespaces {
			o.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return o
}

// WrapClient returns a manager's NewClient that builds the client a manager
// builds by default (with watch) and hands it to wrap: to count or
// intercept what the code under test sends, or to fail some of it.
func WrapClient[C client.Client](wrap func(client.WithWatch) C) client.NewClientFunc {
	return func(cfg *rest.Config, o client.Options) (client.Client, error) {
		c, err := client.NewWithWatch(cfg, o)
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	}
}

// StartManager creates a manager on a copy of e.Config with opts, lets setup
// register the controllers under test with it (an operator's own
// SetupWithManager, say; nil registers none), and starts it. The manager
// stops when t ends, and t fails if it stopped with an error. A setup error
// fails t at once.
func (e *Env) StartManager(t testing.TB, opts manager.Options, setup func(manager.Manager) error) manager.Manager {
	t.Helper()
	mgr, err := manager.New(rest.CopyConfig(e.Config), opts)
	if err != nil {
		t.Fatalf("creating manager: %v", err)
	}
	if setup != nil {
		if err := setup(mgr); err != nil {
			t.Fatalf("setting up manager: %v", err)
		}
	}
	RunManager(t, mgr)
	return mgr
}

// RunManager starts mgr, a manager a test built itself (on a config of its
// own, say), and stops it when t ends; t fails if it stopped with an error.
func RunManager(t testing.TB, mgr manager.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("running manager: %v", err)
		}
	})
}

// Eventually polls cond every 50 ms until it holds, and fails t with the
// message of cond's last answer once timeout has passed: for a state an
// operator reaches in its own time.
func Eventually(t testing.TB, timeout time.Duration, cond func() (ok bool, msg string)) {
	t.Helper()
	EventuallyEvery(t, timeout, 50*time.Millisecond, cond)
}

// EventuallyEvery is [Eventually] polling every interval: for a test that
// measures how soon a state is reached and so must look more often.
func EventuallyEvery(t testing.TB, timeout, interval time.Duration, cond func() (ok bool, msg string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, msg)
		}
		time.Sleep(interval)
	}
}
