package claimmw_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/examples/camundacluster/api/v1alpha1"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
	"github.com/ocf-claim/claim/pkg/expiry"
	"github.com/ocf-claim/claim/pkg/fence"
)

// storageKey is the claim key of a CamundaCluster: the storage backend it
// writes to. A real operator normalizes it (see the camundacluster example).
func storageKey(cc *v1alpha1.CamundaCluster) string { return cc.Spec.SecondaryStorage }

// storageKeys is the keys function of a CamundaCluster: its one key,
// storageKey. ExampleWrap writes it out.
func storageKeys(_ context.Context, obj client.Object) ([]string, error) {
	return []string{storageKey(obj.(*v1alpha1.CamundaCluster))}, nil
}

// Wrap the reconciler you already have and register the middleware with the
// manager in its place, with one setup call: it adds the watches the claims
// need (the Leases, objects being deleted) to your builder. Watching pods
// wakes the objects that wait for a handover; the cache keeps only the
// Leases of the claim namespace.
func ExampleWrap() {
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), v1alpha1.AddToScheme(scheme)); err != nil {
		log.Fatal(err)
	}
	claimCfg := claim.Config{Namespace: "camunda-system"}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&coordinationv1.Lease{}: lease.CacheByObject(claimCfg.Namespace, claimCfg.Labels), // only the claim records
		}},
	})
	if err != nil {
		log.Fatal(err)
	}
	inner := &ClusterReconciler{Client: mgr.GetClient()}

	gate := claimmw.PodsGone(mgr.GetAPIReader(), func(key string, previous claim.Holder) map[string]string {
		return map[string]string{"example.com/claim-holder-uid": string(previous.UID)}
	})
	mw, err := claimmw.Wrap(inner,
		claimmw.FromManager(mgr), // client, uncached API reader, event recorder
		claimmw.For(&v1alpha1.CamundaCluster{}),
		claimmw.WithClaim(claimCfg,
			claim.WithHandoverGate(gate),
		),
		claimmw.WithKeys(func(ctx context.Context, obj client.Object) ([]string, error) {
			cc := obj.(*v1alpha1.CamundaCluster)
			return []string{storageKey(cc)}, nil
		}),
	)
	if err != nil {
		log.Fatal(err) // every configuration problem, joined
	}
	err = mw.SetupWithManager(mgr, ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.CamundaCluster{}).
		Watches(&corev1.Pod{}, mw.HandoverEvents())) // opt-in: wake objects waiting for a handover
	if err != nil {
		log.Fatal(err)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Fatal(err)
	}
}

// ClusterReconciler is the reconciler an operator already has; the
// middleware wraps it (see the example of Wrap). These are the RBAC markers
// of the operator with the middleware:
//
// The claim records (Lease backend), in the claim namespace only (a Role, not a ClusterRole):
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete,namespace=camunda-system
// Your kind: the finalizer and the condition
// +kubebuilder:rbac:groups=camunda.example.com,resources=camundaclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=camunda.example.com,resources=camundaclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=camunda.example.com,resources=camundaclusters/finalizers,verbs=update
// Events:
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// Liveness reads every holder kind (the default liveness reads the holder object):
// +kubebuilder:rbac:groups=camunda.example.com,resources=camundaclusters,verbs=get
// Handover gates read what they look at, e.g. PodsGone:
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// FencedClient reads (uncached) every object it writes, e.g. ConfigMaps:
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;create;update;patch;delete
type ClusterReconciler struct {
	Client client.Client
}

// Reconcile runs while the cluster holds its key, when it must stop using
// keys it lost or gives up, and on its deletion (with RunInnerWhileParked,
// also while it is parked). It checks the deletion first: a cluster being
// deleted cleans up only the keys it still holds.
func (r *ClusterReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cc := &v1alpha1.CamundaCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	state, _ := claimmw.StateFrom(ctx)
	if state.Deleting {
		for _, g := range state.Grants { // the records it still holds; empty for a cluster that never held the key
			if err := r.dropData(ctx, cc, g.Key); err != nil {
				return reconcile.Result{}, err // the claims are kept until this succeeds
			}
		}
		return reconcile.Result{}, nil
	}
	if !state.Granted { // told to stop: the keys go to others only after a nil error and a zero Result
		if err := r.stopBrokers(ctx, cc); err != nil {
			return reconcile.Result{}, err // still Stopping: told again in the next pass
		}
	}
	for _, g := range state.Releasing { // keys it gives up: stop using them, then return nil
		if err := r.dropData(ctx, cc, g.Key); err != nil {
			return reconcile.Result{}, err // the keys are kept until this succeeds
		}
	}
	for _, g := range claimmw.GrantsFrom(ctx) { // the keys held for this pass, with fencing tokens
		if g.Key == storageKey(cc) {
			cc.Status.StorageToken = g.Token.String() // the brokers present it to the backend
		}
	}
	ready := r.computeReady(ctx, cc)
	ready = conditions.FoldReady(ready, state.Condition) // a claim that is not True overrides Ready
	conditions.Set(&cc.Status.Conditions, ready)
	return reconcile.Result{}, r.Client.Status().Update(ctx, cc)
}

// stopBrokers scales the cluster's brokers to zero; here, it deletes their
// ConfigMap.
func (r *ClusterReconciler) stopBrokers(ctx context.Context, cc *v1alpha1.CamundaCluster) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cc.Namespace, Name: cc.Name + "-brokers"}}
	return client.IgnoreNotFound(r.Client.Delete(ctx, cm))
}

// dropData deletes what the cluster stored under key; only its holder may.
func (r *ClusterReconciler) dropData(ctx context.Context, cc *v1alpha1.CamundaCluster, key string) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cc.Namespace, Name: cc.Name + "-brokers"}}
	return client.IgnoreNotFound(r.Client.Delete(ctx, cm))
}

// computeReady is the Ready condition the reconciler computes without the
// claim: here, whether the brokers' ConfigMap is written.
func (r *ClusterReconciler) computeReady(ctx context.Context, cc *v1alpha1.CamundaCluster) metav1.Condition {
	cm := &corev1.ConfigMap{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cc.Namespace, Name: cc.Name + "-brokers"}, cm); err != nil {
		return metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "NoBrokerConfig", Message: err.Error()}
	}
	return metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "BrokerConfigWritten"}
}

// The inner reconciler reads the keys its object holds, with their fencing
// tokens, from the context. Here the in-memory backend stands in for the
// Lease backend, and a fake client for the API server.
func ExampleGrantsFrom() {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		fmt.Println(err)
		return
	}
	orders := &v1alpha1.CamundaCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "orders", UID: "uid-orders"},
		Spec:       v1alpha1.CamundaClusterSpec{SecondaryStorage: "elasticsearch|https://es.data.svc:9200"},
	}
	billing := &v1alpha1.CamundaCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "billing", UID: "uid-billing"},
		Spec:       v1alpha1.CamundaClusterSpec{SecondaryStorage: "elasticsearch|https://es.data.svc:9200"},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(orders, billing).
		WithStatusSubresource(&v1alpha1.CamundaCluster{}).
		Build()
	store := memory.New() // records in memory instead of Leases

	inner := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		for _, g := range claimmw.GrantsFrom(ctx) {
			fmt.Printf("%s holds %q with token %s\n", req.Name, g.Key, g.Token)
		}
		return reconcile.Result{}, nil
	})
	mw, err := claimmw.Wrap(inner,
		claimmw.WithClient(c),
		claimmw.WithAPIReader(c),
		claimmw.For(&v1alpha1.CamundaCluster{}),
		claimmw.WithClaim(claim.Config{Namespace: "camunda-system"},
			claim.WithBackend(store.Backend),
			claim.WithLiveness(store), // every holder alive until store.Kill
		),
		claimmw.WithKeys(storageKeys),
		claimmw.WithMetrics(false),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, cc := range []*v1alpha1.CamundaCluster{orders, billing} {
		if _, err := mw.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(cc)}); err != nil {
			fmt.Println(err)
			return
		}
		got := &v1alpha1.CamundaCluster{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(cc), got); err != nil {
			fmt.Println(err)
			return
		}
		for _, cond := range got.Status.Conditions {
			fmt.Printf("%s: %s=%s (%s) %s\n", cc.Name, cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	// Output:
	// orders holds "elasticsearch|https://es.data.svc:9200" with token 1
	// orders: Claimed=True (Claimed) Holds key "elasticsearch|https://es.data.svc:9200".
	// billing: Claimed=False (Parked) Key "elasticsearch|https://es.data.svc:9200" is held by another object, outside this namespace.
}

// Writes that must not land after the object lost its key go through a
// fenced client built for the pass: it stamps the pass's token on what it
// writes. The in-memory backend stands in for the Lease backend, and a fake
// client for the API server.
func ExampleFencedClient() {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), v1alpha1.AddToScheme(scheme)); err != nil {
		fmt.Println(err)
		return
	}
	orders := &v1alpha1.CamundaCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "orders", UID: "uid-orders"},
		Spec:       v1alpha1.CamundaClusterSpec{SecondaryStorage: "elasticsearch|https://es.data.svc:9200"},
	}
	brokers := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "orders-brokers"}}
	kube := fake.NewClientBuilder().WithScheme(scheme).
		WithObjects(orders, brokers).
		WithStatusSubresource(&v1alpha1.CamundaCluster{}).
		Build()
	store := memory.New()

	inner := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		cm := &corev1.ConfigMap{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: req.Name + "-brokers"}, cm); err != nil {
			return reconcile.Result{}, err
		}
		cm.Data = map[string]string{"replicas": "3"}

		c, err := claimmw.FencedClient(ctx) // errors.Is(err, claimmw.ErrNoGrants) when the pass holds no key
		if err != nil {
			return reconcile.Result{}, err
		}
		err = c.Update(ctx, cm)
		if errors.Is(err, fence.ErrFenced) {
			// a newer holder of the key already wrote cm: this object lost the key; stop acting for it
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	})
	mw, err := claimmw.Wrap(inner,
		claimmw.WithClient(kube),
		claimmw.WithAPIReader(kube), // the fenced client checks through it
		claimmw.For(&v1alpha1.CamundaCluster{}),
		claimmw.WithClaim(claim.Config{Namespace: "camunda-system"},
			claim.WithBackend(store.Backend),
			claim.WithLiveness(store),
		),
		claimmw.WithKeys(storageKeys),
		claimmw.WithMetrics(false),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := mw.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(orders)}); err != nil {
		fmt.Println(err)
		return
	}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(brokers), brokers); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("replicas:", brokers.Data["replicas"])
	fmt.Println("stamped token:", brokers.Annotations[fence.AnnotationFor(storageKey(orders))])
	// Output:
	// replicas: 3
	// stamped token: 1
}

// A CamundaCluster hands its key to the cluster its spec.handoverTo names
// (planned handover).
func ExampleWithHandover() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err != nil {
		log.Fatal(err)
	}
	mw, err := claimmw.Wrap(&ClusterReconciler{Client: mgr.GetClient()},
		claimmw.FromManager(mgr),
		claimmw.For(&v1alpha1.CamundaCluster{}),
		claimmw.WithClaim(claim.Config{Namespace: "camunda-system"}),
		claimmw.WithKeys(storageKeys),
		claimmw.WithHandover(func(ctx context.Context, obj client.Object, key string) (client.ObjectKey, bool, error) {
			cc := obj.(*v1alpha1.CamundaCluster)
			if cc.Spec.HandoverTo == "" {
				return client.ObjectKey{}, false, nil
			}
			return client.ObjectKey{Name: cc.Spec.HandoverTo}, true, nil // same namespace
		}),
	)
	if err != nil {
		log.Fatal(err)
	}
	_ = mw // register it with the manager, as in the example of Wrap
}

// Time-based claims: the holder renews its record, and contenders judge it
// by the time they last saw the record change.
func ExampleWithRenewal() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err != nil {
		log.Fatal(err)
	}
	cfg := claim.Config{Namespace: "camunda-system"}

	clk := clock.RealClock{}
	exp, err := expiry.New(30*time.Second, clk)
	if err != nil {
		log.Fatal(err)
	}
	mw, err := claimmw.Wrap(&ClusterReconciler{Client: mgr.GetClient()},
		claimmw.FromManager(mgr),
		claimmw.For(&v1alpha1.CamundaCluster{}),
		claimmw.WithKeys(storageKeys),
		claimmw.WithClaim(cfg, claim.WithLiveness(exp)),
		claimmw.WithRenewal(expiry.KeeperConfig{Duration: 30 * time.Second, RenewEvery: 5 * time.Second, RenewDeadline: 20 * time.Second, Clock: clk}),
	)
	if err != nil {
		log.Fatal(err)
	}
	_ = mw // register it with the manager, as in the example of Wrap
}
