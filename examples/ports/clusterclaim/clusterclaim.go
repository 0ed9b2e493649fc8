// Package clusterclaim is the port of a hand-written claim per CamundaCluster
// onto ocf-claim: Backups, Restores and Exports contend for their cluster,
// one at a time, in one key space (the holder's kind is part of the record).
// The Leases stay in the cluster's namespace under the names, annotations and
// labels the hand-written claim gave them, so an upgrade reads every live
// claim as held by its holder.
//
// What remains consumer code is the key, the liveness (a holder is alive
// until it reaches a terminal phase; a Backup that could not resume its
// cluster stays alive so nobody runs against a paused cluster), the
// tie-break between sibling Backups, the wording of the messages, and
// [LeasesInKeyNamespace], because the Lease backend keeps every record in one
// namespace and these Leases live in the namespace of their cluster.
//
// The tie-break once deadlocked: the younger of two Backups held the claim
// and yielded to the older one, which waited for it. The claim judges "held
// by self" before it asks for siblings, so a holder always re-enters.
//
// RBAC:
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=ports.example.camunda.io,resources=backups;restores;exports,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ports.example.camunda.io,resources=backups/status;restores/status;exports/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ports.example.camunda.io,resources=backups/finalizers;restores/finalizers;exports/finalizers,verbs=update
package clusterclaim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/examples/ports/internal/portapi"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
)

// The names the hand-written claim wrote; an upgrade must keep every one of
// them or it orphans the live claims (Leases, finalizers) of the old release.
const (
	LeasePrefix               = "camunda-cluster-claim-"
	KeyAnnotation             = "camunda.io/cluster-claim-key"
	HolderKindAnnotation      = "camunda.io/holder-kind"
	HolderNamespaceAnnotation = "camunda.io/holder-namespace"
	HolderNameAnnotation      = "camunda.io/holder-name"
	HolderUIDAnnotation       = "camunda.io/holder-uid"
	HolderUIDLabel            = "camunda.io/holder-uid"
	Finalizer                 = "camunda.io/cluster-claim"
)

// Requeue is how long a holder that does not hold its cluster waits before
// it asks again when no Lease event wakes it earlier.
const Requeue = 30 * time.Second

// Key is the claim key of the CamundaCluster cluster in namespace.
func Key(namespace, cluster string) string { return namespace + "/" + cluster }

// Config reads and writes the hand-written claim's Leases. It has no
// Namespace: [LeasesInKeyNamespace] takes it from the key.
func Config() claim.Config {
	return claim.Config{
		Prefix: LeasePrefix,
		Annotations: backends.Annotations{
			Key:             KeyAnnotation,
			HolderKind:      HolderKindAnnotation,
			HolderNamespace: HolderNamespaceAnnotation,
			HolderName:      HolderNameAnnotation,
			HolderUID:       HolderUIDAnnotation,
		},
		HolderLabels: func(h claim.Holder) map[string]string { return map[string]string{HolderUIDLabel: string(h.UID)} },
		Normalize: func(key string) (string, error) {
			ns, cluster, _ := strings.Cut(key, "/")
			if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(cluster)) > 0 {
				return "", fmt.Errorf("want <namespace>/<CamundaCluster name>, got %q", key)
			}
			return key, nil
		},
	}
}

// NewClaimer returns the Claimer that the middlewares of every holder kind
// share. cached lists sibling Backups (the manager's client); apiReader
// reads the records and the holders and must be uncached.
func NewClaimer(cached, apiReader client.Reader, writer client.Client) (*claim.Claimer, error) {
	return claim.New(apiReader, writer, Config(),
		claim.WithBackend(LeasesInKeyNamespace),
		claim.WithLiveness(Liveness(apiReader)),
		claim.WithSiblings(siblingBackups(cached)),
		claim.WithMessages(Message),
	)
}

// Options are the claimmw options for holders of prototype's type
// (&portapi.Backup{}, &portapi.Restore{} or &portapi.Export{}). Add
// claimmw.FromManager, or WithClient and WithAPIReader, to make a middleware.
func Options(claimer *claim.Claimer, prototype client.Object) []claimmw.Option {
	return []claimmw.Option{
		claimmw.For(prototype),
		claimmw.WithClaimer(claimer),
		claimmw.WithKeys(keys),
		claimmw.WithFinalizer(Finalizer),
		claimmw.WithRequeue(Requeue, Requeue),
	}
}

// keys names the holder's cluster until the holder is finished: a finished
// holder names none, and the sweep after its last pass frees the cluster.
func keys(_ context.Context, obj client.Object) ([]string, error) {
	var spec portapi.JobSpec
	switch o := obj.(type) {
	case *portapi.Backup:
		if backupFinished(o) {
			return nil, nil
		}
		spec = o.Spec
	case *portapi.Restore:
		if o.Status.Phase.Terminal() {
			return nil, nil
		}
		spec = o.Spec
	case *portapi.Export:
		if o.Status.Phase.Terminal() {
			return nil, nil
		}
		spec = o.Spec
	}
	if spec.Cluster == "" {
		return nil, errors.New("spec.cluster is required")
	}
	return []string{Key(obj.GetNamespace(), spec.Cluster)}, nil
}

// backupFinished: a Backup that could not resume its cluster is not finished;
// it keeps the claim so that nothing runs against the paused cluster.
func backupFinished(b *portapi.Backup) bool {
	return b.Status.Phase.Terminal() && !b.Status.ResumeFailed
}

// Liveness asks each holder kind whether the holder reached a terminal
// phase. A kind it does not know counts as alive.
func Liveness(apiReader client.Reader) claim.Liveness {
	return claim.ByKind(map[string]claim.Liveness{
		"Backup":  untilFinished(apiReader, &portapi.Backup{}, backupFinished),
		"Restore": untilFinished(apiReader, &portapi.Restore{}, func(r *portapi.Restore) bool { return r.Status.Phase.Terminal() }),
		"Export":  untilFinished(apiReader, &portapi.Export{}, func(e *portapi.Export) bool { return e.Status.Phase.Terminal() }),
	}, nil)
}

// untilFinished: a holder is gone when its object is gone, was recreated
// with another UID, is finished, or its kind is not served at all (an
// optional CRD that is not installed).
func untilFinished[T client.Object](apiReader client.Reader, prototype T, finished func(T) bool) claim.Liveness {
	return claim.LivenessFunc(func(ctx context.Context, rec claim.Record) (bool, error) {
		h := rec.Holder
		obj := prototype.DeepCopyObject().(T) //nolint:forcetypeassert // a copy has its original's type
		err := apiReader.Get(ctx, h.NamespacedName(), obj)
		switch {
		case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("reading holder %s: %w", h, err)
		}
		return obj.GetUID() == h.UID && !finished(obj), nil
	})
}

// siblingBackups lists, for a Backup, the unfinished Backups of the same
// cluster: while the cluster is free the oldest goes first.
func siblingBackups(cached client.Reader) claim.Siblings {
	return claim.SiblingsFunc(func(ctx context.Context, key string, self claim.Holder) ([]claim.Holder, error) {
		if self.Kind != "Backup" {
			return nil, nil
		}
		var list portapi.BackupList
		if err := cached.List(ctx, &list, client.InNamespace(self.Namespace)); err != nil {
			return nil, fmt.Errorf("listing Backups in %s: %w", self.Namespace, err)
		}
		var out []claim.Holder
		for i := range list.Items {
			b := &list.Items[i]
			if Key(b.Namespace, b.Spec.Cluster) == key && !backupFinished(b) && b.DeletionTimestamp == nil {
				out = append(out, claim.HolderOf(b))
			}
		}
		return out, nil
	})
}

// Message words outcomes as the hand-written claim did.
func Message(o claim.Outcome) string {
	_, cluster, _ := strings.Cut(o.Key, "/")
	switch o.Reason {
	case claim.ReasonHeldElsewhere:
		return fmt.Sprintf("CamundaCluster %q is in use by %s %s until it finishes.", cluster, o.Holder.Kind, o.Holder.Name)
	case claim.ReasonNotFirst:
		return fmt.Sprintf("CamundaCluster %q is free, but the older Backup %s goes first.", cluster, o.Other.Name)
	}
	return claim.DefaultMessage(o)
}
