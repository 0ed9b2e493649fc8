// Command demo shows what ocf-claim does in one run: it starts an embedded
// control plane (kube-apiserver and etcd from bin/k8s, built by `make
// envtest`), installs the CamundaCluster CRD, runs the example operator in
// this process, and plays the scenario of package scenario, printing each
// state. It then runs the kubectl plugin (bin/kubectl-claims, built by `make
// build`) against the state the scenario left: list, why, and a release of
// the live holder's key, which the plugin must refuse, naming bravo as the
// object waiting for it. It exits 0 when every step reached the state it
// expects and the plugin did what it should, and 1 with the step, what it
// waited for and what it saw, or with the plugin's error, otherwise. Without
// bin/kubectl-claims it says to run `make build` and skips the plugin.
//
// With -keep the control plane and the operator keep running after the
// scenario until Ctrl-C; the demo prints a kubeconfig to reach them.
//
//	make demo            # or: go run ./examples/camundacluster/demo [-v] [-keep]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/examples/camundacluster/api/v1alpha1"
	"github.com/ocf-claim/claim/examples/camundacluster/config/crd"
	"github.com/ocf-claim/claim/examples/camundacluster/controller"
	"github.com/ocf-claim/claim/examples/camundacluster/scenario"
)

// Namespaces of the demo: the clusters live in one, the operator's claim
// Leases in the other, as in a real installation.
const (
	clusterNamespace = "camunda"
	claimNamespace   = "camunda-system"
)

// budget bounds the scenario and the plugin's runs; -keep waits beyond it.
const budget = 2 * time.Minute

// pluginPath is where `make build` puts the kubectl plugin, under the
// repository root.
var pluginPath = filepath.Join("bin", "kubectl-claims")

func main() {
	verbose := flag.Bool("v", false, "print the operator's logs")
	keep := flag.Bool("keep", false, "after the scenario, keep the control plane and the operator running until Ctrl-C, and print a kubeconfig to reach them")
	flag.Parse()
	if *verbose {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	// Ctrl-C stops the demo through its deferred cleanup, so that
	// kube-apiserver and etcd never outlive it.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	began := time.Now()
	err := run(ctx, *verbose, *keep)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo FAILED after %s: %v\n", time.Since(began).Round(time.Millisecond), err)
		os.Exit(1)
	}
	if *keep {
		fmt.Println("demo: control plane stopped.")
		return
	}
	fmt.Printf("\ndemo: every step reached the state it expects (%s).\n", time.Since(began).Round(time.Millisecond))
}

// run plays the demo; the operator runs until base is done or run returns,
// the scenario and the plugin within budget.
func run(base context.Context, verbose, keep bool) (err error) {
	ctx, cancel := context.WithTimeout(base, budget)
	defer cancel()

	dir, err := envtest.BinaryDir()
	if err != nil {
		return err
	}
	def, err := crd.CamundaCluster()
	if err != nil {
		return err
	}
	fmt.Printf("demo: starting kube-apiserver and etcd from %s, installing %s\n", dir, def.Name)
	env, err := envtest.Start(envtest.Options{
		AddToScheme: []func(*runtime.Scheme) error{v1alpha1.AddToScheme},
		CRDs:        []*apiextensionsv1.CustomResourceDefinition{def},
	})
	if err != nil {
		return err
	}
	defer func() {
		if stopErr := env.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the control plane: %w", stopErr))
		}
	}()
	kubeconfig, err := writeKubeConfig(env)
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(kubeconfig) }()

	user, err := env.NewClient()
	if err != nil {
		return err
	}
	for _, ns := range []string{clusterNamespace, claimNamespace} {
		if err := user.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}

	stop, err := startOperator(base, env)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()
	fmt.Printf("demo: the example operator runs in this process; claim Leases go to namespace %s%s\n",
		claimNamespace, map[bool]string{true: "", false: " (operator logs: -v)"}[verbose])

	w := &scenario.World{Client: user, Namespace: clusterNamespace, ClaimNamespace: claimNamespace, Out: os.Stdout}
	if err := scenario.Run(ctx, w, scenario.Steps()); err != nil {
		return err
	}
	plugin := findPlugin()
	if err := showPlugin(ctx, plugin, user, kubeconfig); err != nil {
		return err
	}
	if keep {
		return wait(base, plugin, dir, kubeconfig)
	}
	return nil
}

// writeKubeConfig writes env's kubeconfig to a new temporary file and
// returns its path.
func writeKubeConfig(env *envtest.Env) (string, error) {
	f, err := os.CreateTemp("", "ocf-claim-demo-*.kubeconfig")
	if err != nil {
		return "", fmt.Errorf("writing the kubeconfig: %w", err)
	}
	_, err = f.Write(env.KubeConfig())
	if err = errors.Join(err, f.Close()); err != nil {
		_ = os.Remove(f.Name())
		return "", fmt.Errorf("writing the kubeconfig: %w", err)
	}
	return f.Name(), nil
}

// findPlugin returns the path of bin/kubectl-claims under the repository
// root, or "" when it is not there.
func findPlugin() string {
	root, err := envtest.RepoRoot()
	if err != nil {
		return ""
	}
	plugin := filepath.Join(root, pluginPath)
	if _, err := os.Stat(plugin); err != nil {
		return ""
	}
	return plugin
}

// showPlugin runs the plugin against the state the scenario left: charlie
// holds the storage backend and bravo is parked behind it. Any failure of
// the plugin fails the demo; without the plugin ("") it says how to build it.
func showPlugin(ctx context.Context, plugin string, user client.Client, kubeconfig string) error {
	if plugin == "" {
		fmt.Printf("\ndemo: %s is missing, so the kubectl claims section is skipped; run `make build` (make demo does) to see it.\n", pluginPath)
		return nil
	}
	holder := &v1alpha1.CamundaCluster{}
	if err := user.Get(ctx, client.ObjectKey{Namespace: clusterNamespace, Name: scenario.Charlie}, holder); err != nil {
		return fmt.Errorf("reading the holder %s: %w", scenario.Charlie, err)
	}
	key, err := controller.StorageKey(clusterNamespace, scenario.Storage)
	if err != nil {
		return err
	}
	fmt.Printf("\n== kubectl claims, against the demo's cluster state\n")
	fmt.Printf("   The plugin reads the records by key and holder. release refuses charlie's key, since charlie still\n")
	fmt.Printf("   exists, and names who would get it (bravo waits for it); it is a server-side dry run all the same.\n")
	for _, step := range []struct {
		args []string
		// refused: the plugin must exit 1 with a refusal.
		refused bool
	}{
		{args: []string{"list", "-n", claimNamespace}},
		{args: []string{"why", strings.ToLower(v1alpha1.Kind) + "/" + scenario.Charlie, "-n", clusterNamespace, "--claim-namespace", claimNamespace}},
		{args: []string{"release", key, "--holder-uid", string(holder.UID), "-n", claimNamespace, "--dry-run=server"}, refused: true},
	} {
		sub := step.args[0]
		args := append([]string{"--kubeconfig", kubeconfig}, step.args...)
		fmt.Printf("\n  $ %s\n", shellQuote(append([]string{display(plugin)}, args...)))
		out, err := exec.CommandContext(ctx, plugin, args...).CombinedOutput()
		for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			fmt.Printf("  %s\n", line)
		}
		var exit *exec.ExitError
		switch {
		case step.refused && errors.As(err, &exit) && strings.Contains(string(out), pluginRefusal):
		case step.refused && err == nil:
			return fmt.Errorf("kubectl claims %s of a live holder's key was not refused (output above)", sub)
		case step.refused:
			return fmt.Errorf("kubectl claims %s of a live holder's key failed without a refusal (output above): %w", sub, err)
		case err != nil:
			return fmt.Errorf("kubectl claims %s against the demo's cluster state failed (output above): %w", sub, err)
		}
	}
	return nil
}

// pluginRefusal ends the message of every release the plugin refuses (its
// ErrRefused); the plugin is another module, so the demo cannot import it.
const pluginRefusal = "release refused"

// wait keeps the control plane and the operator running until base is
// done (Ctrl-C), after saying how to reach them.
func wait(base context.Context, plugin, dir, kubeconfig string) error {
	fmt.Printf("\n== the control plane and the operator keep running (-keep); Ctrl-C stops them\n")
	fmt.Printf("   kubeconfig: %s\n", kubeconfig)
	if plugin == "" {
		plugin = pluginPath
		fmt.Printf("   (run `make build` first for %s)\n", pluginPath)
	}
	fmt.Println()
	fmt.Printf("  $ %s\n", shellQuote([]string{display(plugin), "--kubeconfig", kubeconfig, "list", "-A"}))
	fmt.Printf("  $ %s\n", shellQuote([]string{display(filepath.Join(dir, "kubectl")), "--kubeconfig", kubeconfig, "get", "leases", "-A"}))
	<-base.Done()
	fmt.Println()
	return nil
}

// display shows path relative to the working directory when it lies
// below it, as bin/... from the repository root.
func display(path string) string {
	wd, err := os.Getwd()
	if err != nil {
		return path
	}
	rel, err := filepath.Rel(wd, path)
	if err != nil || strings.HasPrefix(rel, "..") {
		return path
	}
	return rel
}

// shellQuote joins args into a command line a shell reads back as args.
func shellQuote(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@") == "" {
			quoted[i] = a
			continue
		}
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}

// startOperator runs the example operator as its main.go would, without
// leader election (one process) and without a metrics listener.
func startOperator(ctx context.Context, env *envtest.Env) (stop func() error, err error) {
	mgr, err := ctrl.NewManager(rest.CopyConfig(env.Config), ctrl.Options{
		Scheme:  env.Scheme,
		Cache:   controller.CacheOptions(claimNamespace),
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the operator's manager: %w", err)
	}
	if err := (&controller.Reconciler{ClaimNamespace: claimNamespace}).SetupWithManager(mgr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	// Wait for the caches, so that the first step does not race the start.
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("starting the operator: %w", errors.Join(ctx.Err(), <-done))
	}
	return func() error {
		cancel()
		if err := <-done; err != nil {
			return fmt.Errorf("running the operator: %w", err)
		}
		return nil
	}, nil
}
