package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/examples/camundacluster/api/v1alpha1"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// Reasons of the Ready condition the reconciler sets itself. While the
// cluster does not hold its claims, Ready carries the claim condition's
// reason instead (see conditions.FoldReady).
const (
	// ReasonRunning: the StatefulSet asks for the cluster's brokers.
	ReasonRunning conditions.Reason = "Running"
	// ReasonStopped: the cluster asks for zero brokers.
	ReasonStopped conditions.Reason = "Stopped"
	// ReasonHandingOver: the cluster hands its keys to spec.handoverTo and
	// waits for its brokers to stop.
	ReasonHandingOver conditions.Reason = "HandingOver"
	// ReasonReleasing: the cluster moved to other keys (a new storage
	// backend or realm) and its brokers of the old ones still run; the old
	// keys are released, through the handover gate, once they stopped.
	ReasonReleasing conditions.Reason = "Releasing"
)

// handoverRequeue is how soon a cluster handing over looks at its pods
// again when no pod event wakes it earlier.
const handoverRequeue = 5 * time.Second

// ErrPodsStillRunning marks a deleted cluster whose brokers have not
// stopped yet: it keeps its claims until they have.
var ErrPodsStillRunning = errors.New("pods still running")

// staleStatusRequeue is how soon a cluster whose status write met a newer
// version is reconciled again.
const staleStatusRequeue = 100 * time.Millisecond

// Reconcile renders the cluster's StatefulSet and status. The middleware
// calls it with its decision in the context: with the grants while the
// cluster holds its keys, parked otherwise, and Deleting, with the keys it
// still holds, on the deletion path.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	// Uncached: the middleware may have written the claim condition an
	// instant ago, and the status write below replaces the conditions list.
	cc := &v1alpha1.CamundaCluster{}
	if err := r.reader.Get(ctx, req.NamespacedName, cc); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("reading CamundaCluster %s: %w", req.NamespacedName, err)
	}
	state, ok := claimmw.StateFrom(ctx)
	if !ok {
		return reconcile.Result{}, fmt.Errorf("reconciling CamundaCluster %s: called without the claim middleware", req.NamespacedName)
	}
	if state.Deleting {
		// Check the deletion first. The claims stay until this pass
		// succeeds; state.Grants are the keys the cluster still holds (none
		// for a cluster that was parked), the only ones whose data a
		// cleanup may touch.
		return reconcile.Result{}, r.stop(ctx, cc)
	}

	keys, _ := Keys(cc) // invalid keys: the middleware parked the cluster as InvalidKey
	token := ""
	for _, g := range state.Grants {
		if !IsRealmKey(g.Key) {
			token = g.Token.String()
		}
	}
	handingOver := len(state.Handovers) > 0
	want := Render(cc, keys, state.Granted && !handingOver, token)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: want.Namespace, Name: want.Name}}
	op, err := controllerutil.CreateOrUpdate(ctx, r.client, sts, func() error {
		mergeInto(sts, want)
		return controllerutil.SetControllerReference(cc, sts, r.client.Scheme())
	})
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("rendering StatefulSet of %s: %w", req.NamespacedName, err)
	}
	if op != controllerutil.OperationResultNone {
		log.FromContext(ctx).Info("rendered StatefulSet", "operation", op, "replicas", *want.Spec.Replicas, "granted", state.Granted)
	}
	if !handingOver {
		releasing, err := r.stillUsing(ctx, cc, state.Releasing)
		if err != nil {
			return reconcile.Result{}, err
		}
		res, err := r.writeStatus(ctx, cc, state, *want.Spec.Replicas, token, releasing)
		if err != nil || !res.IsZero() || releasing.message == "" {
			return res, err
		}
		// The middleware keeps the old keys (its gate selects these pods)
		// until they stopped: look again soon, as no event of this
		// cluster's follows a pod of its StatefulSet.
		return reconcile.Result{RequeueAfter: handoverRequeue}, nil
	}
	// A handover is committed after a pass that returns a zero Result:
	// return one only when no broker of this cluster runs any more.
	running, err := r.runningPods(ctx, cc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(running) == 0 {
		return r.writeStatus(ctx, cc, state, 0, token, readyNote{})
	}
	msg := fmt.Sprintf("Handing over to %s once pod %s stops.", cc.Spec.HandoverTo, strings.Join(running, ", "))
	if res, err := r.writeStatus(ctx, cc, state, 0, token, readyNote{ReasonHandingOver, msg}); err != nil || !res.IsZero() {
		return res, err
	}
	return reconcile.Result{RequeueAfter: handoverRequeue}, nil
}

// readyNote is a Ready reason and message that say what the cluster waits for.
type readyNote struct {
	reason  conditions.Reason
	message string
}

// stillUsing says, for the Ready message, which pods of cc still run with a
// key it gives up (state.Releasing): a StatefulSet replaces its pods one at
// a time, so the old backend is written until the last old pod stopped.
// Empty when none does.
func (r *Reconciler) stillUsing(ctx context.Context, cc *v1alpha1.CamundaCluster, releasing []claimmw.Grant) (readyNote, error) {
	var out []string
	for _, g := range releasing {
		var pods corev1.PodList
		if err := r.reader.List(ctx, &pods, client.InNamespace(cc.Namespace), client.MatchingLabels(PodsOfKey(g.Key, claim.HolderOf(cc)))); err != nil {
			return readyNote{}, fmt.Errorf("listing pods of CamundaCluster %s/%s: %w", cc.Namespace, cc.Name, err)
		}
		for i := range pods.Items {
			if !terminal(&pods.Items[i]) {
				out = append(out, pods.Items[i].Name)
			}
		}
	}
	if len(out) == 0 {
		return readyNote{}, nil
	}
	slices.Sort(out)
	return readyNote{ReasonReleasing, fmt.Sprintf("Releasing its previous keys once pod %s stops.", strings.Join(slices.Compact(out), ", "))}, nil
}

// runningPods returns the names of cc's pods that have not stopped, read
// uncached: a cache that has not seen a pod yet would let a release or a
// handover free a backend that pod still writes.
func (r *Reconciler) runningPods(ctx context.Context, cc *v1alpha1.CamundaCluster) ([]string, error) {
	var pods corev1.PodList
	if err := r.reader.List(ctx, &pods, client.InNamespace(cc.Namespace), client.MatchingLabels{LabelClusterUID: string(cc.UID)}); err != nil {
		return nil, fmt.Errorf("listing pods of CamundaCluster %s/%s: %w", cc.Namespace, cc.Name, err)
	}
	var running []string
	for i := range pods.Items {
		if !terminal(&pods.Items[i]) {
			running = append(running, pods.Items[i].Name)
		}
	}
	slices.Sort(running)
	return running, nil
}

// writeStatus sets Ready, observedGeneration and storageToken, writing only
// when they changed, with an optimistic lock: the conditions list is written
// whole and must not replace a newer claim condition.
// waiting, when its message is not empty, is the Ready reason and message of
// a cluster that waits for brokers to stop: before it hands over
// (HandingOver), or before the keys it gives up are released (Releasing).
func (r *Reconciler) writeStatus(ctx context.Context, cc *v1alpha1.CamundaCluster, state claimmw.State, replicas int32, token string, waiting readyNote) (reconcile.Result, error) {
	base := cc.DeepCopy()
	ready := conditions.New(conditions.Ready, ReasonRunning,
		fmt.Sprintf("StatefulSet %s asks for %d broker(s).", cc.Name, replicas), cc.Generation)
	switch {
	case waiting.message != "":
		ready = conditions.New(conditions.Ready, waiting.reason, waiting.message, cc.Generation)
	case replicas == 0:
		ready = conditions.New(conditions.Ready, ReasonStopped, "The cluster asks for zero brokers.", cc.Generation)
	}
	ready.Status = metav1.ConditionTrue
	conditions.Set(&cc.Status.Conditions, conditions.FoldReady(ready, state.Condition))
	cc.Status.ObservedGeneration = cc.Generation
	cc.Status.StorageToken = token
	if apiequality.Semantic.DeepEqual(base.Status, cc.Status) {
		return reconcile.Result{}, nil
	}
	patch := client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	if err := r.client.Status().Patch(ctx, cc, patch); err != nil {
		if apierrors.IsConflict(err) {
			return reconcile.Result{RequeueAfter: staleStatusRequeue}, nil
		}
		return reconcile.Result{}, fmt.Errorf("writing status of CamundaCluster %s/%s: %w", cc.Namespace, cc.Name, err)
	}
	return reconcile.Result{}, nil
}

// stop is the deletion path: scale the brokers to zero, and fail until the
// last of them stopped, so that the middleware releases the claims only
// then. Until it does, a successor waits in WaitingForHandover.
func (r *Reconciler) stop(ctx context.Context, cc *v1alpha1.CamundaCluster) error {
	sts := &appsv1.StatefulSet{}
	err := r.client.Get(ctx, client.ObjectKeyFromObject(cc), sts)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("stopping CamundaCluster %s/%s: reading its StatefulSet: %w", cc.Namespace, cc.Name, err)
	case sts.Spec.Replicas == nil || *sts.Spec.Replicas != 0:
		base := sts.DeepCopy()
		sts.Spec.Replicas = ptr.To[int32](0)
		if err := r.client.Patch(ctx, sts, client.MergeFrom(base)); err != nil {
			return fmt.Errorf("stopping CamundaCluster %s/%s: scaling its StatefulSet to zero: %w", cc.Namespace, cc.Name, err)
		}
	}
	running, err := r.runningPods(ctx, cc)
	if err != nil {
		return fmt.Errorf("stopping CamundaCluster %s/%s: %w", cc.Namespace, cc.Name, err)
	}
	if len(running) > 0 {
		return fmt.Errorf("stopping CamundaCluster %s/%s before releasing its claims: %w: %s", cc.Namespace, cc.Name, ErrPodsStillRunning, strings.Join(running, ", "))
	}
	return nil
}

// mergeInto sets the fields of sts that the operator owns to want's, field
// by field: fields the API server defaulted stay as they are, so a steady
// pass changes nothing and writes nothing.
func mergeInto(sts, want *appsv1.StatefulSet) {
	if sts.Labels == nil {
		sts.Labels = map[string]string{}
	}
	maps.Copy(sts.Labels, want.Labels)
	if sts.CreationTimestamp.IsZero() {
		sts.Spec.Selector = want.Spec.Selector // immutable once created
	}
	sts.Spec.Replicas = want.Spec.Replicas
	sts.Spec.ServiceName = want.Spec.ServiceName
	sts.Spec.Template.Labels = want.Spec.Template.Labels
	wantC := want.Spec.Template.Spec.Containers[0]
	i := slices.IndexFunc(sts.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == wantC.Name })
	if i < 0 {
		sts.Spec.Template.Spec.Containers = append(sts.Spec.Template.Spec.Containers, wantC)
		return
	}
	c := &sts.Spec.Template.Spec.Containers[i]
	c.Image, c.Env = wantC.Image, wantC.Env
}

// Render returns the StatefulSet of cc: spec.replicas brokers while granted,
// none otherwise. Its pods carry the claim labels of keys and the cluster's
// UID, which the handover gate of a successor selects, and the storage
// fencing token, which the brokers present to the backend.
func Render(cc *v1alpha1.CamundaCluster, keys []string, granted bool, token string) *appsv1.StatefulSet {
	selector := map[string]string{LabelName: AppName, LabelInstance: cc.Name, LabelClusterUID: string(cc.UID)}
	podLabels := map[string]string{LabelManagedBy: ManagedBy}
	maps.Copy(podLabels, selector)
	for _, key := range keys {
		if IsRealmKey(key) {
			podLabels[LabelRealmClaim] = KeyHash(key)
		} else {
			podLabels[LabelStorageClaim] = KeyHash(key)
		}
	}
	replicas := int32(0)
	if granted {
		replicas = cc.Spec.Replicas
	}
	env := []corev1.EnvVar{{Name: EnvSecondaryStorage, Value: cc.Spec.SecondaryStorage}, {Name: EnvStorageToken, Value: token}}
	if cc.Spec.KeycloakRealm != "" {
		env = append(env, corev1.EnvVar{Name: EnvKeycloakRealm, Value: cc.Spec.KeycloakRealm})
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: cc.Namespace, Name: cc.Name,
			Labels: map[string]string{LabelName: AppName, LabelInstance: cc.Name, LabelManagedBy: ManagedBy},
		},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    &replicas,
			ServiceName: cc.Name,
			Selector:    &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "broker", Image: BrokerImage, Env: env,
				}}},
			},
		},
	}
}
