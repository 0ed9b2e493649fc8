// Package controller is the example operator's reconciler: it renders one
// StatefulSet of brokers per CamundaCluster, and runs them only while the
// cluster holds its claims, so that one storage backend answers to one
// cluster and one Keycloak realm to one cluster.
//
// The claim work is claimmw's: the reconciler here is wrapped with
// [claimmw.Wrap] and reads what the middleware decided with
// [claimmw.StateFrom]. What the example adds is its consumer code:
//
//   - its keys ([Keys]): the normalized storage reference and realm URL;
//   - its liveness: a cluster that is being deleted no longer holds its keys,
//     so a successor may take them over once the handover gate opens;
//   - its handover gate: no pod labelled with the key's hash and the previous
//     holder's UID still runs ([claimmw.PodsGone]);
//   - its deletion path: a deleted cluster scales its brokers to zero and
//     keeps its claims until its pods are gone, so the release never frees a
//     backend its brokers still write;
//   - its planned handover: spec.handoverTo names a successor; the cluster
//     scales its brokers to zero and reports success only once they are
//     gone, and then the middleware commits the handover.
//
// A parked cluster is rendered with zero replicas ([claimmw.RunInnerWhileParked]),
// so the StatefulSet exists and says what would run.
package controller

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/examples/camundacluster/api/v1alpha1"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
)

// Name is the controller's name, in logs and in the claim metrics.
const Name = "camundacluster"

// Labels the operator puts on what it renders. The claim labels carry
// [KeyHash] of the key the workload uses; with the cluster UID they select
// the pods the handover gate waits for.
const (
	LabelName         = "app.kubernetes.io/name"
	LabelInstance     = "app.kubernetes.io/instance"
	LabelManagedBy    = "app.kubernetes.io/managed-by"
	LabelClusterUID   = v1alpha1.Group + "/cluster-uid"
	LabelStorageClaim = v1alpha1.Group + "/storage-claim"
	LabelRealmClaim   = v1alpha1.Group + "/realm-claim"

	// AppName is the value of LabelName.
	AppName = "camunda"
	// ManagedBy is the value of LabelManagedBy on StatefulSets, pods and
	// Leases of this operator.
	ManagedBy = "camundacluster-example"
)

// Environment variables of the broker container.
const (
	EnvSecondaryStorage = "CAMUNDA_SECONDARY_STORAGE"
	EnvStorageToken     = "CAMUNDA_STORAGE_FENCING_TOKEN"
	EnvKeycloakRealm    = "CAMUNDA_KEYCLOAK_REALM"
)

// BrokerImage is the image the rendered brokers run.
const BrokerImage = "camunda/zeebe:8.8.0"

// Reconciler renders CamundaClusters. Configure the exported fields, then
// call [Reconciler.SetupWithManager]; the zero value of every field but
// ClaimNamespace is valid.
type Reconciler struct {
	// ClaimNamespace is where the claim Leases live, usually the
	// operator's own namespace. Required.
	ClaimNamespace string
	// ParkedRequeue and WaitingRequeue override claimmw's safety-net
	// requeue intervals (see [claimmw.WithRequeue]); zero keeps its
	// defaults. Wake-ups normally come long before them.
	ParkedRequeue, WaitingRequeue time.Duration

	client client.Client
	reader client.Reader
	mw     *claimmw.Middleware
}

// ClaimConfig is where and how the operator stores its claims: Leases in
// namespace, labelled as managed by the operator.
func ClaimConfig(namespace string) claim.Config {
	return claim.Config{Namespace: namespace, Labels: map[string]string{LabelManagedBy: ManagedBy}}
}

// CacheOptions restricts the manager's cache to what the operator watches:
// its claim Leases in claimNamespace, and the pods and StatefulSets it
// manages. Without it, watching Leases and pods caches every one of the
// cluster.
func CacheOptions(claimNamespace string) cache.Options {
	managed := labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy})
	claimCfg := ClaimConfig(claimNamespace)
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		// Claim Leases only: the manager's own leader-election Lease may
		// live in the same namespace and changes every few seconds.
		&coordinationv1.Lease{}: lease.CacheByObject(claimCfg.Namespace, claimCfg.Labels),
		&corev1.Pod{}:           {Label: managed},
		&appsv1.StatefulSet{}:   {Label: managed},
	}}
}

// SetupWithManager wraps the reconciler with the claim middleware and
// registers it with mgr. Claims are read through the manager's API reader
// (uncached: a cache that has not seen a Lease yet would make a held
// backend look free).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.ClaimNamespace == "" {
		return fmt.Errorf("setting up %s controller: ClaimNamespace is empty", Name)
	}
	r.client, r.reader = mgr.GetClient(), mgr.GetAPIReader()
	mw, err := claimmw.Wrap(r,
		claimmw.FromManager(mgr),
		claimmw.For(&v1alpha1.CamundaCluster{}),
		claimmw.WithName(Name),
		claimmw.WithClaim(ClaimConfig(r.ClaimNamespace),
			claim.WithLiveness(clusterAlive(r.reader)),
			claim.WithHandoverGate(claimmw.PodsGone(r.reader, PodsOfKey)),
		),
		claimmw.WithKeys(func(_ context.Context, obj client.Object) ([]string, error) {
			cc, ok := obj.(*v1alpha1.CamundaCluster)
			if !ok {
				return nil, fmt.Errorf("computing keys: %T is not a CamundaCluster", obj)
			}
			return Keys(cc)
		}),
		claimmw.WithHandover(handoverTo),
		claimmw.WhileParked(claimmw.RunInnerWhileParked),
		claimmw.WithRequeue(r.ParkedRequeue, r.WaitingRequeue),
	)
	if err != nil {
		return fmt.Errorf("setting up %s controller: %w", Name, err)
	}
	r.mw = mw
	// The middleware adds the watches its claims need (the Leases, and
	// clusters being deleted) and the key index they use.
	err = mw.SetupWithManager(mgr, ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&v1alpha1.CamundaCluster{}).
		Owns(&appsv1.StatefulSet{}).
		// A cluster waiting for a handover wakes when pods come and go...
		Watches(&corev1.Pod{}, mw.HandoverEvents()).
		// ...and a deleted cluster when its own pods stop.
		Watches(&corev1.Pod{}, podStopped()))
	if err != nil {
		return fmt.Errorf("setting up %s controller: %w", Name, err)
	}
	return nil
}

// Middleware returns the claim middleware around the reconciler, once
// SetupWithManager has run: its Claimer reads who holds a key.
func (r *Reconciler) Middleware() *claimmw.Middleware { return r.mw }

// handoverTo names the successor of every key of a cluster whose
// spec.handoverTo is set: the backend and the realm move together.
func handoverTo(_ context.Context, obj client.Object, _ string) (client.ObjectKey, bool, error) {
	cc, ok := obj.(*v1alpha1.CamundaCluster)
	if !ok || cc.Spec.HandoverTo == "" {
		return client.ObjectKey{}, false, nil
	}
	return client.ObjectKey{Namespace: cc.Namespace, Name: cc.Spec.HandoverTo}, true, nil
}

// PodsOfKey selects the pods of the previous holder that use key: the
// handover gate stays closed while one of them runs.
func PodsOfKey(key string, previous claim.Holder) map[string]string {
	label := LabelStorageClaim
	if IsRealmKey(key) {
		label = LabelRealmClaim
	}
	return map[string]string{label: KeyHash(key), LabelClusterUID: string(previous.UID)}
}

// clusterAlive is the example's Liveness: a CamundaCluster holds its keys
// while it exists with the recorded UID and is not being deleted. A deleted
// cluster is done with its keys; the handover gate makes its successor wait
// until its pods are gone.
func clusterAlive(reader client.Reader) claim.Liveness {
	return claim.LivenessFunc(func(ctx context.Context, rec claim.Record) (bool, error) {
		h := rec.Holder
		if h.Kind != v1alpha1.Kind {
			return true, nil // not ours to judge: it keeps the key
		}
		cc := &v1alpha1.CamundaCluster{}
		err := reader.Get(ctx, h.NamespacedName(), cc)
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("reading holder %s: %w", h, err)
		}
		return cc.UID == h.UID && cc.DeletionTimestamp == nil, nil
	})
}

// podStopped enqueues the cluster of a pod that stopped or is gone: a
// deleted cluster waits for exactly that before it releases its claims.
func podStopped() handler.EventHandler {
	enqueue := func(p client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		if name := p.GetLabels()[LabelInstance]; name != "" {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: p.GetNamespace(), Name: name}})
		}
	}
	return handler.Funcs{
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if p, ok := e.ObjectNew.(*corev1.Pod); ok && (p.DeletionTimestamp != nil || terminal(p)) {
				enqueue(p, q)
			}
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(e.Object, q)
		},
	}
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
