package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/examples/database/api/v1alpha1"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
	"github.com/ocf-claim/claim/pkg/fence"
	"github.com/ocf-claim/claim/pkg/ocfgate"
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

// ConnectionSuffix names the ConfigMap of the connection details
// applications mount, suffixed to the Database's name.
const ConnectionSuffix = "-connection"

// The schema record's data keys.
const (
	// SchemaDatabase is the key of the database the record stands for.
	SchemaDatabase = "database"
	// SchemaVersion is the schema version the database is migrated to.
	SchemaVersion = "version"
	// SchemaMigratedBy is the Database (namespace/name) that migrated it.
	SchemaMigratedBy = "migratedBy"
)

// SchemaRecordName names the schema record of the database whose key is
// key, in the claim namespace. The record stands in for the database itself
// (a real operator migrates PostgreSQL and stores the fencing token there),
// so there is one per key, shared by every Database naming it, and it is
// written through the fenced client: a newer holder's migration stamps the
// very object a stale holder would write next, and the fence refuses the
// stale one. A record per Database would never carry another holder's
// stamp, and would refuse nothing.
func SchemaRecordName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "schema-" + hex.EncodeToString(sum[:8])
}

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
// every component asks the claim gate, converges and stages its condition,
// Ready aggregates them and folds in the claim, and one status write ends
// the pass. It returns an error only for a genuine fault; a component that
// waits for the claim reports it in its condition, and the Lease watch wakes
// it.
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
	// ocf's ReconcileContext: the client handed to every component. While
	// the Database holds its database it is the fenced client, so that
	// every apply carries the grant's token and a stale holder's apply is
	// refused.
	rc := reconcileContext{Client: r.client, Owner: db}
	if state.Granted {
		fenced, err := claimmw.FencedClient(ctx)
		if err != nil {
			return fmt.Errorf("reconciling Database %s/%s: %w", db.Namespace, db.Name, err)
		}
		rc.Client = fenced
	}
	components := []component{
		{Type: SchemaReady, converge: r.convergeSchema},
		{Type: ConnectionReady, converge: r.convergeConnection},
	}
	staged := make([]metav1.Condition, 0, len(components))
	owned := make([]conditions.Type, 0, len(components))
	var errs []error
	for _, c := range components {
		cond, err := c.converge(ctx, rc, c.Type)
		staged = append(staged, cond)
		owned = append(owned, c.Type)
		errs = append(errs, err)
	}
	for _, c := range staged {
		conditions.Set(db.GetStatusConditions(), c)
	}
	// The controller stages Ready itself: no component owns it.
	ready := conditions.FoldReady(Aggregate(db.Generation, staged), state.Condition)
	conditions.Set(db.GetStatusConditions(), ready)
	errs = append(errs, r.flushStatus(ctx, db, owned))
	errs = append(errs, r.reapplyReady(ctx, db, ready))
	return errors.Join(errs...)
}

// reconcileContext is the part of ocf's ReconcileContext the components
// use: the client they write through and the owner.
type reconcileContext struct {
	Client client.Client
	Owner  *v1alpha1.Database
}

// component is one part of a Database: it converges its part and returns the
// one condition it reports, of the component's Type; the pass stages it in
// memory and only the end of the pass writes status.
type component struct {
	Type     conditions.Type
	converge func(ctx context.Context, rc reconcileContext, t conditions.Type) (metav1.Condition, error)
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

// failed is the condition of a component whose step failed with err.
func failed(t conditions.Type, db *v1alpha1.Database, err error) metav1.Condition {
	return Condition(t, false, ReasonError, err.Error(), db.Generation)
}

// convergeSchema migrates the database to spec.schemaVersion. It asks the
// claim gate first, in every pass: an ocf Prerequisite would be asked only
// until the component first became healthy, and a Database that lost its
// database would go on migrating it. The schema record is applied through
// the fenced client: a Database that lost its database since this pass
// began is refused instead of migrating under a newer holder.
func (r *Reconciler) convergeSchema(ctx context.Context, rc reconcileContext, t conditions.Type) (metav1.Condition, error) {
	db := rc.Owner
	gate := ocfgate.Check(ctx, t, db.Generation)
	if !gate.Open {
		return gate.Condition, nil
	}
	state, _ := claimmw.StateFrom(ctx)
	version := strconv.Itoa(int(db.Spec.SchemaVersion))
	key := state.Grants[0].Key
	// The database is no Database's: the record carries no owner
	// reference, and the holder drops it on its deletion path.
	record := r.configMap(r.ClaimNamespace, SchemaRecordName(key), map[string]string{
		SchemaDatabase:   key,
		SchemaVersion:    version,
		SchemaMigratedBy: db.Namespace + "/" + db.Name,
	})
	return r.applyFenced(ctx, rc, t, record, "migrating the schema", "Schema version "+version+" is applied.")
}

// convergeConnection publishes the connection details applications mount,
// only while the gate is open: an application of a parked Database must not
// connect to a database another Database manages.
func (r *Reconciler) convergeConnection(ctx context.Context, rc reconcileContext, t conditions.Type) (metav1.Condition, error) {
	db := rc.Owner
	gate := ocfgate.Check(ctx, t, db.Generation)
	if !gate.Open {
		// Withdraw what applications may still mount: the database may be
		// another Database's now (State.Releasing) or soon.
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: db.Namespace, Name: db.Name + ConnectionSuffix}}
		if err := r.client.Delete(ctx, cm); err != nil && !apierrors.IsNotFound(err) {
			err = fmt.Errorf("withdrawing the connection of Database %s/%s: %w", db.Namespace, db.Name, err)
			return failed(t, db, err), err
		}
		return gate.Condition, nil
	}
	state, _ := claimmw.StateFrom(ctx)
	cm := r.configMap(db.Namespace, db.Name+ConnectionSuffix, map[string]string{"url": state.Grants[0].Key})
	if err := controllerutil.SetControllerReference(db, cm, r.client.Scheme()); err != nil {
		err = fmt.Errorf("owning ConfigMap %s: %w", cm.Name, err)
		return failed(t, db, err), err
	}
	return r.applyFenced(ctx, rc, t, cm, "publishing the connection", "Connection details are published in ConfigMap "+db.Name+ConnectionSuffix+".")
}

// FieldOwner is the field manager the components apply their resources as.
const FieldOwner = "database-controller"

// configMap is a ConfigMap the components apply: labelled as the
// operator's, so that its cache sees it.
func (r *Reconciler) configMap(namespace, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: name,
			Labels: map[string]string{LabelManagedBy: ManagedBy},
		},
		Data: data,
	}
}

// applyFenced applies cm (apply) through the fenced client of the
// ReconcileContext and returns component t's condition: applied, with
// message done, when it was written; PrerequisiteNotMet when the fence
// refused it; failed, with the error wrapped as doing, otherwise.
func (r *Reconciler) applyFenced(ctx context.Context, rc reconcileContext, t conditions.Type, cm *corev1.ConfigMap, doing, done string) (metav1.Condition, error) {
	db := rc.Owner
	err := r.apply(ctx, rc, cm)
	switch {
	case errors.Is(err, fence.ErrFenced):
		// A newer holder wrote the database: this Database lost it, and
		// learns so in the middleware's next pass. Not a fault to retry.
		return Condition(t, false, ReasonPrerequisiteNotMet, "Lost its database to a newer holder.", db.Generation), nil
	case err != nil:
		err = fmt.Errorf("%s of Database %s/%s: %w", doing, db.Namespace, db.Name, err)
		return failed(t, db, err), err
	}
	return Condition(t, true, ReasonOperational, done, db.Generation), nil
}

// apply applies cm as ocf applies every managed resource: server-side
// apply, forcing ownership, through the client of the ReconcileContext.
func (r *Reconciler) apply(ctx context.Context, rc reconcileContext, cm *corev1.ConfigMap) error {
	if err := rc.Client.Patch(ctx, cm, client.Apply, client.ForceOwnership, client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("applying ConfigMap %s: %w", cm.Name, err)
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
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: r.ClaimNamespace, Name: SchemaRecordName(state.Grants[0].Key)}}
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

// flushStatus is the pass's one status write, as ocf's FlushStatus does it:
// one Status().Update of the staged db, sent on every pass, changed or not,
// under retry.RetryOnConflict. On a conflict it re-reads db through the API
// reader and keeps the staged object, taking from the server only the
// resourceVersion and the conditions of the types none of owned names
// (absence included: an unowned condition the server lacks is dropped).
// Claimed, which the middleware wrote moments ago, is unowned and so comes
// from the server: it is never reverted. Ready, which the controller stages
// itself, is unowned too: on a conflict it is replaced by the server's
// value, which [Reconciler.reapplyReady] repairs.
func (r *Reconciler) flushStatus(ctx context.Context, db *v1alpha1.Database, owned []conditions.Type) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		err := r.client.Status().Update(ctx, db)
		if !apierrors.IsConflict(err) {
			return err
		}
		fresh := &v1alpha1.Database{}
		if rerr := r.apiReader.Get(ctx, client.ObjectKeyFromObject(db), fresh); rerr != nil {
			return fmt.Errorf("re-reading after a conflict: %w", rerr)
		}
		db.ResourceVersion = fresh.ResourceVersion
		MergeUnowned(db.GetStatusConditions(), *fresh.GetStatusConditions(), owned)
		return err
	})
	if err != nil {
		return fmt.Errorf("writing status of Database %s/%s: %w", db.Namespace, db.Name, err)
	}
	return nil
}

// MergeUnowned is ocf's FlushStatus conflict handling: every condition of
// staged whose type is not in owned becomes the server's (removed when the
// server has none), and the server's conditions of types not in owned that
// staged lacks are added. The owned conditions stay as staged.
func MergeUnowned(staged *[]metav1.Condition, server []metav1.Condition, owned []conditions.Type) {
	isOwned := func(t string) bool { return slices.Contains(owned, conditions.Type(t)) }
	kept := (*staged)[:0:0]
	for _, c := range *staged {
		if isOwned(c.Type) {
			kept = append(kept, c)
		}
	}
	for _, c := range server {
		if !isOwned(c.Type) {
			kept = append(kept, c)
		}
	}
	*staged = kept
}

// reapplyReady writes ready again when the flush's conflict handling
// replaced it with the server's older value: the recommended shape with
// ocf's FlushStatus, which owns only its components' conditions. It writes
// nothing in a pass whose flush kept Ready (every pass without a conflict),
// and otherwise sets Ready alone on a fresh read, under RetryOnConflict, as
// ocf edits owner metadata.
func (r *Reconciler) reapplyReady(ctx context.Context, db *v1alpha1.Database, ready metav1.Condition) error {
	if cur := meta.FindStatusCondition(*db.GetStatusConditions(), ready.Type); cur != nil &&
		cur.Status == ready.Status && cur.Reason == ready.Reason && cur.Message == ready.Message && cur.ObservedGeneration == ready.ObservedGeneration {
		return nil
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &v1alpha1.Database{}
		if err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(db), fresh); err != nil {
			return err
		}
		if !conditions.Set(fresh.GetStatusConditions(), ready) {
			return nil
		}
		return r.client.Status().Update(ctx, fresh)
	})
	if err != nil {
		return fmt.Errorf("writing Ready of Database %s/%s again: %w", db.Namespace, db.Name, err)
	}
	return nil
}
