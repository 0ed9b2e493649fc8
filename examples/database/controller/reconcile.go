package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/examples/database/api/v1alpha1"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
	"github.com/ocf-claim/claim/pkg/fence"
)

// The condition types of the components: one each, True when the component
// is in its expected state.
const (
	// SchemaReady: the database's schema is migrated to spec.schemaVersion.
	SchemaReady conditions.Type = "SchemaReady"
	// ConnectionReady: the connection details are published in a ConfigMap
	// applications mount.
	ConnectionReady conditions.Type = "ConnectionReady"
)

// The reasons of the component conditions and of Ready: ocf's status names,
// so that they rank against the claim's reasons with conditions.PriorityOf.
const (
	// ReasonOperational: the component is in its expected state (True).
	ReasonOperational conditions.Reason = "Operational"
	// ReasonPrerequisiteNotMet: the component waits for the Database to hold
	// its database (False); it resolves by itself once the key frees.
	ReasonPrerequisiteNotMet conditions.Reason = "PrerequisiteNotMet"
	// ReasonError: the component failed (False); the pass is retried.
	ReasonError conditions.Reason = "Error"
)

// Names of the ConfigMaps the components write, suffixed to the Database's.
const (
	// SchemaSuffix names the schema record: it stands in for the database
	// itself (a real operator migrates PostgreSQL and stores the fencing
	// token there), so it is written through the fenced client.
	SchemaSuffix = "-schema"
	// ConnectionSuffix names the connection details applications mount.
	ConnectionSuffix = "-connection"
)

// Reconcile is the controller-runtime entry point the middleware calls: it
// reads the owner and runs the core.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	db := &v1alpha1.Database{}
	if err := r.client.Get(ctx, req.NamespacedName, db); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return reconcile.Result{}, r.ReconcileDatabase(ctx, db)
}

// ReconcileDatabase is one pass over db, ocf's Reconcile(ctx, owner) error:
// every component converges and stages its condition, Ready aggregates them
// and folds in the claim, and one status write ends the pass. It returns an
// error only for a genuine fault; a component that waits for the claim
// reports it in its condition, and the Lease watch wakes it.
func (r *Reconciler) ReconcileDatabase(ctx context.Context, db *v1alpha1.Database) error {
	state, ok := claimmw.StateFrom(ctx)
	if !ok {
		return fmt.Errorf("reconciling Database %s/%s: called without the claim middleware", db.Namespace, db.Name)
	}
	if state.Deleting {
		// Check the deletion first. The claim is kept until this pass
		// succeeds; state.Grants is empty for a Database that never held
		// its database, which must not touch it.
		return r.dropSchema(ctx, db, state)
	}
	if db.Generation != state.Condition.ObservedGeneration {
		// The spec changed after the middleware judged its keys: these
		// grants belong to the older spec. The change brings another pass.
		return nil
	}
	components := []component{
		{Type: SchemaReady, converge: r.convergeSchema},
		{Type: ConnectionReady, converge: r.convergeConnection},
	}
	staged := make([]metav1.Condition, 0, len(components)+1)
	var errs []error
	for _, c := range components {
		cond, err := c.converge(ctx, c.Type, db, state)
		staged = append(staged, cond)
		errs = append(errs, err)
	}
	ready := conditions.FoldReady(Aggregate(db.Generation, staged), state.Condition)
	staged = append(staged, ready)
	errs = append(errs, r.flushStatus(ctx, db, staged))
	return errors.Join(errs...)
}

// component is one part of a Database: it converges its part and returns the
// one condition it reports, of the component's Type, staged in memory; only
// the end of the pass writes status.
type component struct {
	Type     conditions.Type
	converge func(ctx context.Context, t conditions.Type, db *v1alpha1.Database, state claimmw.State) (metav1.Condition, error)
}

// Condition returns a condition of type t as ocf writes one: True or False,
// a typed reason, the owner's generation.
func Condition(t conditions.Type, ok bool, reason conditions.Reason, message string, generation int64) metav1.Condition {
	status := metav1.ConditionFalse
	if ok {
		status = metav1.ConditionTrue
	}
	return metav1.Condition{
		Type:               string(t),
		Status:             status,
		Reason:             string(reason),
		Message:            conditions.BoundMessage(message),
		ObservedGeneration: generation,
	}
}

// waiting is the condition of a component that does not act because the
// Database does not hold its database: the claim condition says why.
func waiting(t conditions.Type, db *v1alpha1.Database, state claimmw.State) metav1.Condition {
	return Condition(t, false, ReasonPrerequisiteNotMet, "Waits for its database: "+state.Condition.Message, db.Generation)
}

// failed is the condition of a component whose step failed with err.
func failed(t conditions.Type, db *v1alpha1.Database, err error) metav1.Condition {
	return Condition(t, false, ReasonError, err.Error(), db.Generation)
}

// convergeSchema migrates the database to spec.schemaVersion, only while
// the Database holds it, and through the fenced client: a Database that lost
// its database since this pass began is refused instead of migrating under a
// newer holder.
func (r *Reconciler) convergeSchema(ctx context.Context, t conditions.Type, db *v1alpha1.Database, state claimmw.State) (metav1.Condition, error) {
	if !state.Granted {
		return waiting(t, db, state), nil
	}
	fenced, err := claimmw.FencedClient(ctx)
	if err != nil {
		return failed(t, db, err), err
	}
	version := strconv.Itoa(int(db.Spec.SchemaVersion))
	err = r.ensureConfigMap(ctx, fenced, db, SchemaSuffix, map[string]string{
		"database": state.Grants[0].Key,
		"version":  version,
	})
	switch {
	case errors.Is(err, fence.ErrFenced):
		// A newer holder wrote the database: this Database lost it, and
		// learns so in the middleware's next pass. Not a fault to retry.
		return Condition(t, false, ReasonPrerequisiteNotMet, "Lost its database to a newer holder.", db.Generation), nil
	case err != nil:
		err = fmt.Errorf("migrating the schema of Database %s/%s: %w", db.Namespace, db.Name, err)
		return failed(t, db, err), err
	}
	return Condition(t, true, ReasonOperational, "Schema version "+version+" is applied.", db.Generation), nil
}

// convergeConnection publishes the connection details applications mount,
// only while the Database holds its database: an application of a parked
// Database must not connect to a database another Database manages.
func (r *Reconciler) convergeConnection(ctx context.Context, t conditions.Type, db *v1alpha1.Database, state claimmw.State) (metav1.Condition, error) {
	if !state.Granted {
		// Withdraw what applications may still mount: the database may be
		// another Database's now (State.Releasing) or soon.
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: db.Namespace, Name: db.Name + ConnectionSuffix}}
		if err := r.client.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
			err = fmt.Errorf("withdrawing the connection of Database %s/%s: %w", db.Namespace, db.Name, err)
			return failed(t, db, err), err
		}
		return waiting(t, db, state), nil
	}
	err := r.ensureConfigMap(ctx, r.client, db, ConnectionSuffix, map[string]string{"url": state.Grants[0].Key})
	if err != nil {
		err = fmt.Errorf("publishing the connection of Database %s/%s: %w", db.Namespace, db.Name, err)
		return failed(t, db, err), err
	}
	return Condition(t, true, ReasonOperational, "Connection details are published in ConfigMap "+db.Name+ConnectionSuffix+".", db.Generation), nil
}

// ensureConfigMap makes db's ConfigMap with suffix hold data, writing through
// w only when it differs. It reads uncached: a cache that has not seen the
// ConfigMap created in the previous pass would make this pass create it
// again and fail.
func (r *Reconciler) ensureConfigMap(ctx context.Context, w client.Writer, db *v1alpha1.Database, suffix string, data map[string]string) error {
	cm := &corev1.ConfigMap{}
	err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: db.Namespace, Name: db.Name + suffix}, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: db.Namespace, Name: db.Name + suffix,
			Labels: map[string]string{LabelManagedBy: ManagedBy},
		}, Data: data}
		if err := controllerutil.SetControllerReference(db, cm, r.client.Scheme()); err != nil {
			return fmt.Errorf("owning ConfigMap %s: %w", cm.Name, err)
		}
		if err := w.Create(ctx, cm); err != nil {
			return fmt.Errorf("creating ConfigMap %s: %w", cm.Name, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading ConfigMap %s%s: %w", db.Name, suffix, err)
	}
	if maps.Equal(cm.Data, data) {
		return nil
	}
	cm.Data = data
	if err := w.Update(ctx, cm); err != nil {
		return fmt.Errorf("updating ConfigMap %s: %w", cm.Name, err)
	}
	return nil
}

// dropSchema is the deletion path: the holder drops what it stored in its
// database, fenced like every write to it; a Database that does not hold it
// touches nothing.
func (r *Reconciler) dropSchema(ctx context.Context, db *v1alpha1.Database, state claimmw.State) error {
	if len(state.Grants) == 0 {
		return nil
	}
	fenced, err := claimmw.FencedClient(ctx)
	if err != nil {
		return fmt.Errorf("dropping the schema of Database %s/%s: %w", db.Namespace, db.Name, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: db.Namespace, Name: db.Name + SchemaSuffix}}
	if err := fenced.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) && !errors.Is(err, fence.ErrFenced) {
		return fmt.Errorf("dropping the schema of Database %s/%s: %w", db.Namespace, db.Name, err)
	}
	return nil
}

// Aggregate is ocf's Ready over the component conditions: True only when
// every one is True (truth by unanimity); otherwise False with the reason of
// the highest-priority condition that is not True, the first winning ties
// (reason by priority), and its message prefixed with its type. Truth is
// never derived from priority.
func Aggregate(generation int64, components []metav1.Condition) metav1.Condition {
	var worst *metav1.Condition
	for i := range components {
		c := &components[i]
		if c.Status == metav1.ConditionTrue {
			continue
		}
		if worst == nil || conditions.PriorityOf(c.Reason) > conditions.PriorityOf(worst.Reason) {
			worst = c
		}
	}
	if worst == nil {
		return Condition(conditions.Ready, true, ReasonOperational, "Every component is operational.", generation)
	}
	return Condition(conditions.Ready, false, conditions.Reason(worst.Reason), worst.Type+": "+worst.Message, generation)
}

// flushStatus is the pass's one status write, ocf's FlushStatus: it sets the
// staged conditions on db and updates status only when one changed. On a
// conflict it re-reads db through the API reader, sets the staged conditions
// again and retries: the conditions of this pass's components win, and every
// other condition type (Claimed, which the middleware wrote moments ago, and
// any other writer's) is the server's, absence included.
func (r *Reconciler) flushStatus(ctx context.Context, db *v1alpha1.Database, staged []metav1.Condition) error {
	owner := db
	reread := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if reread {
			fresh := &v1alpha1.Database{}
			if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(db), fresh); err != nil {
				return fmt.Errorf("re-reading after a conflict: %w", err)
			}
			owner = fresh
		}
		reread = true
		changed := false
		for _, c := range staged {
			if conditions.Set(owner.GetStatusConditions(), c) {
				changed = true
			}
		}
		if !changed {
			return nil // also after a re-read: someone wrote the same already
		}
		return r.client.Status().Update(ctx, owner)
	})
	if err != nil {
		return fmt.Errorf("writing status of Database %s/%s: %w", db.Namespace, db.Name, err)
	}
	return nil
}
