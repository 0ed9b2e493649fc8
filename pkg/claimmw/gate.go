package claimmw

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/claim"
)

// LabelsFunc returns the labels that mark workloads as belonging to the
// previous holder of key. An empty result selects nothing, which opens the
// gate: a gate must never select every workload of a namespace.
type LabelsFunc func(key string, previous claim.Holder) map[string]string

// PodsGone is the common HandoverGate: it stays closed while a pod labelled
// by labelsFor as belonging to the previous holder still runs in the
// previous holder's namespace (every namespace for a cluster-scoped
// holder). A pod counts as running until it reaches
// phase Succeeded or Failed; a pending pod may still start. Read pods
// through an uncached reader, or through the manager's cache when the pods
// are watched anyway (the gate only delays a takeover, and Create still
// fences the record).
func PodsGone(reader client.Reader, labelsFor LabelsFunc) claim.HandoverGate {
	return claim.GateFunc(func(ctx context.Context, key string, previous claim.Holder) (bool, string, error) {
		sel := labelsFor(key, previous)
		if len(sel) == 0 {
			return true, "", nil
		}
		var pods corev1.PodList
		if err := reader.List(ctx, &pods, client.InNamespace(previous.Namespace), client.MatchingLabels(sel)); err != nil {
			return false, "", fmt.Errorf("listing pods of %s: %w", previous, err)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			return false, fmt.Sprintf("pod %s/%s of %s is still running", p.Namespace, p.Name, previous), nil
		}
		return true, "", nil
	})
}

// ObjectsGone is the HandoverGate for other kinds of workloads (Jobs,
// Deployments, StatefulSets): it stays closed while any object of list's
// kind labelled by labelsFor exists in the previous holder's namespace.
// list is an empty list of the kind, for example &batchv1.JobList{}; it is
// copied for every call.
func ObjectsGone(reader client.Reader, list client.ObjectList, labelsFor LabelsFunc) claim.HandoverGate {
	return claim.GateFunc(func(ctx context.Context, key string, previous claim.Holder) (bool, string, error) {
		sel := labelsFor(key, previous)
		if len(sel) == 0 {
			return true, "", nil
		}
		l, ok := list.DeepCopyObject().(client.ObjectList)
		if !ok {
			return false, "", fmt.Errorf("copying %T: not a client.ObjectList", list)
		}
		if err := reader.List(ctx, l, client.InNamespace(previous.Namespace), client.MatchingLabels(sel), client.Limit(1)); err != nil {
			return false, "", fmt.Errorf("listing %T of %s: %w", list, previous, err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			return false, "", fmt.Errorf("reading %T of %s: %w", list, previous, err)
		}
		if len(items) == 0 {
			return true, "", nil
		}
		name := "an object"
		if o, ok := items[0].(client.Object); ok {
			name = o.GetNamespace() + "/" + o.GetName()
		}
		return false, fmt.Sprintf("%s of %s still exists", name, previous), nil
	})
}
