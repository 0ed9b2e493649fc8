// Package controller is the ocf-shaped example operator: a Database
// controller written the way the operator-component-framework (ocf) writes
// controllers, wrapped by the claim middleware so that one Database at a time
// manages each logical database.
//
// What makes it ocf-shaped:
//
//   - the owner, [v1alpha1.Database], implements GetStatusConditions and
//     GetKind (ocf's OperatorCRD contract);
//   - the core is [Reconciler.ReconcileDatabase], of the shape
//     Reconcile(ctx, owner) error, behind the controller-runtime entry point
//     [Reconciler.Reconcile];
//   - each component converges one part (the schema, the connection details)
//     and stages exactly one condition in memory: True or False, never
//     Unknown, a typed reason, ObservedGeneration set;
//   - each component asks the claim gate (package ocfgate) first, in every
//     pass, and applies nothing while it is closed; an ocf Prerequisite is
//     asked only until a component first becomes healthy;
//   - resources are written with server-side apply, forcing ownership under
//     one field manager, through the client of the pass's ReconcileContext:
//     the fenced client while the Database holds its database;
//   - one status write per pass, at the end, as ocf's FlushStatus does it:
//     always sent, under retry.RetryOnConflict; on a conflict it re-reads
//     through the API reader, keeps the staged object and takes from the
//     server only the resourceVersion and every condition type no component
//     owns (the middleware's Claimed above all, and Ready, which the
//     controller then writes again);
//   - Ready aggregates the components ocf's way (truth by unanimity, reason
//     by priority) and folds the claim in with conditions.FoldReady.
//
// The claim work is claimmw's: the middleware holds the database's key
// before the core runs, writes Claimed, releases the key on deletion, and
// wakes a parked Database when the key frees.
//
// RBAC:
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete,namespace=db-system
// +kubebuilder:rbac:groups=db.example.com,resources=databases,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=db.example.com,resources=databases/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=db.example.com,resources=databases/finalizers,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch;delete
package controller

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/examples/database/api/v1alpha1"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
)

// Name is the controller's name, in logs and in the claim metrics.
const Name = "database"

// Labels the operator puts on what it writes: the claim Leases and the
// ConfigMaps of its components, so that its cache holds only those.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedBy is the value of LabelManagedBy.
	ManagedBy = "database-example"
)

// Reconciler converges Databases. Set ClaimNamespace, then call
// [Reconciler.SetupWithManager].
type Reconciler struct {
	// ClaimNamespace is where the claim Leases live, usually the
	// operator's own namespace. Required.
	ClaimNamespace string
	// ParkedRequeue overrides claimmw's safety-net requeue of a parked
	// Database (see [claimmw.WithRequeue]); zero keeps the default. The
	// Lease watch wakes a parked Database long before it.
	ParkedRequeue time.Duration

	client    client.Client
	apiReader client.Reader
}

// ClaimConfig is where and how the operator stores its claims: Leases in
// namespace, labelled as the operator's.
func ClaimConfig(namespace string) claim.Config {
	return claim.Config{Namespace: namespace, Labels: map[string]string{LabelManagedBy: ManagedBy}}
}

// CacheOptions restricts the manager's cache to what the operator watches:
// its claim Leases in claimNamespace and its own ConfigMaps. Without it,
// watching Leases and ConfigMaps caches every one of the cluster.
func CacheOptions(claimNamespace string) cache.Options {
	claimCfg := ClaimConfig(claimNamespace)
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&coordinationv1.Lease{}: lease.CacheByObject(claimCfg.Namespace, claimCfg.Labels),
		&corev1.ConfigMap{}:     {Label: labels.SelectorFromSet(labels.Set{LabelManagedBy: ManagedBy})},
	}}
}

// SetupWithManager wraps the reconciler with the claim middleware and
// registers it with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.ClaimNamespace == "" {
		return fmt.Errorf("setting up %s controller: ClaimNamespace is empty", Name)
	}
	// The API reader is uncached: it serves the claim protocol, and the
	// status flush re-reads through it on a conflict.
	r.client, r.apiReader = mgr.GetClient(), mgr.GetAPIReader()
	mw, err := claimmw.Wrap(r,
		claimmw.FromManager(mgr),
		claimmw.For(&v1alpha1.Database{}), // GetStatusConditions: no reflection
		claimmw.WithName(Name),
		claimmw.WithClaim(ClaimConfig(r.ClaimNamespace),
			// The holder is alive while its Database exists with its UID.
			claim.WithLiveness(claim.HolderExistsAs(r.apiReader, &v1alpha1.Database{})),
		),
		claimmw.WithKeys(func(_ context.Context, obj client.Object) ([]string, error) {
			db, ok := obj.(*v1alpha1.Database)
			if !ok {
				return nil, fmt.Errorf("computing keys: %T is not a Database", obj)
			}
			key, err := Key(db)
			if err != nil {
				return nil, err
			}
			return []string{key}, nil
		}),
		// Database has GetStatusConditions, so the middleware runs the
		// components in parked passes too (claimmw.WhileParked's default
		// for ocf owners): a parked Database shows why each one waits.
		claimmw.WithRequeue(r.ParkedRequeue, 0),
	)
	if err != nil {
		return fmt.Errorf("setting up %s controller: %w", Name, err)
	}
	err = mw.SetupWithManager(mgr, ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&v1alpha1.Database{}).
		Owns(&corev1.ConfigMap{}))
	if err != nil {
		return fmt.Errorf("setting up %s controller: %w", Name, err)
	}
	return nil
}
