package fence_test

import (
	"context"
	"errors"
	"log"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/fence"
)

// An inner reconciler wrapped by the claim middleware builds a fenced
// client from the grants of its pass and writes the objects it protects
// through it. (claimmw.FencedClient does the same in one call.)
func ExampleNew() {
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{})
	if err != nil {
		log.Fatal(err)
	}

	inner := reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		deployment := &appsv1.Deployment{}
		if err := mgr.GetClient().Get(ctx, req.NamespacedName, deployment); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		deployment.Spec.Replicas = ptr.To[int32](3)

		grants := make([]fence.Grant, 0, len(claimmw.GrantsFrom(ctx)))
		for _, g := range claimmw.GrantsFrom(ctx) {
			grants = append(grants, fence.Grant(g)) // same fields: Key, Token
		}
		c, err := fence.New(mgr.GetClient(), mgr.GetAPIReader(), grants...)
		if err != nil {
			return reconcile.Result{}, err // no grants, a key twice, a malformed token
		}
		err = c.Update(ctx, deployment) // or Create, Patch, Delete, Status().Update, Status().Patch
		switch {
		case errors.Is(err, fence.ErrFenced):
			// This object was written by a newer holder of the key: we lost it. Stop acting for the key;
			// retrying does not help. errors.As gives *fence.StaleTokenError (key, our token, the newer one).
			logf.FromContext(ctx).Info("Lost the claim; stopped", "reason", err.Error())
			return reconcile.Result{}, nil
		case apierrors.IsConflict(err):
			// Somebody wrote the object since it was read: read again and retry, as with any client.
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, err
	})
	_ = inner // wrap it with claimmw.Wrap and register the middleware with mgr
}
