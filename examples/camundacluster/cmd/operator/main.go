// Command operator runs the example CamundaCluster operator against the
// cluster of the current kubeconfig (or in-cluster config), with leader
// election, metrics and health probes, like a real operator:
//
//	kubectl apply -f examples/camundacluster/config/crd/
//	go run ./examples/camundacluster/cmd/operator --claim-namespace camunda-system
//
// It needs RBAC for camundaclusters (and their status and finalizers),
// statefulsets, pods (list, watch), leases in the claim namespace, and events.
package main

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ocf-claim/claim/examples/camundacluster/api/v1alpha1"
	"github.com/ocf-claim/claim/examples/camundacluster/controller"
)

// leaderElectionID names the Lease the replicas of the operator elect a
// leader with. It is not a claim: leader election picks the one process
// that reconciles; claims pick the one CamundaCluster that uses a backend.
const leaderElectionID = "camundacluster-example." + v1alpha1.Group

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "operator:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		claimNamespace = flag.String("claim-namespace", "camunda-system", "Namespace of the claim Leases (usually the operator's own).")
		watchNamespace = flag.String("watch-namespace", "", "Namespace of the CamundaClusters to reconcile; empty for every namespace.")
		metricsAddr    = flag.String("metrics-bind-address", ":8080", "Address of the metrics endpoint; 0 turns it off.")
		probeAddr      = flag.String("health-probe-bind-address", ":8081", "Address of the health and readiness probes.")
		leaderElect    = flag.Bool("leader-elect", true, "Elect a leader so that only one replica reconciles.")
	)
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))

	cacheOpts := controller.CacheOptions(*claimNamespace)
	if *watchNamespace != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{*watchNamespace: {}}
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress:  *probeAddr,
		LeaderElection:          *leaderElect,
		LeaderElectionID:        leaderElectionID,
		LeaderElectionNamespace: *claimNamespace,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := (&controller.Reconciler{ClaimNamespace: *claimNamespace}).SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("adding health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}
