// Command demo shows what ocf-claim does in one run: it starts an embedded
// control plane (kube-apiserver and etcd from bin/k8s, built by `make
// envtest`), installs the CamundaCluster CRD, runs the example operator in
// this process, and plays the scenario of package scenario, printing each
// state. It exits 0 when every step reached the state it expects, and 1 with
// the step, what it waited for and what it saw otherwise.
//
//	make demo            # or: go run ./examples/camundacluster/demo [-v]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
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

// budget bounds the whole demo, control plane included.
const budget = 2 * time.Minute

func main() {
	verbose := flag.Bool("v", false, "print the operator's logs")
	flag.Parse()
	if *verbose {
		ctrl.SetLogger(zap.New(zap.UseDevMode(true)))
	} else {
		ctrl.SetLogger(logr.Discard())
	}
	began := time.Now()
	if err := run(*verbose); err != nil {
		fmt.Fprintf(os.Stderr, "\ndemo FAILED after %s: %v\n", time.Since(began).Round(time.Millisecond), err)
		os.Exit(1)
	}
	fmt.Printf("\ndemo: every step reached the state it expects (%s).\n", time.Since(began).Round(time.Millisecond))
}

func run(verbose bool) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), budget)
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

	user, err := env.NewClient()
	if err != nil {
		return err
	}
	for _, ns := range []string{clusterNamespace, claimNamespace} {
		if err := user.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}

	stop, err := startOperator(ctx, env)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, stop()) }()
	fmt.Printf("demo: the example operator runs in this process; claim Leases go to namespace %s%s\n",
		claimNamespace, map[bool]string{true: "", false: " (operator logs: -v)"}[verbose])

	w := &scenario.World{Client: user, Namespace: clusterNamespace, ClaimNamespace: claimNamespace, Out: os.Stdout}
	return scenario.Run(ctx, w, scenario.Steps())
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
