// Package databaseclaim is the port of a hand-written claim per logical
// PostgreSQL database onto ocf-claim: one Database at a time owns a database,
// keyed "<system identifier>/<database name>" so that two host names of one
// server do not make two keys. The Leases stay in the operator namespace
// under the names, annotations and labels the hand-written claim gave them,
// so an upgrade reads every live claim as held by its holder.
//
// What remains consumer code is the key, the liveness (the holder exists
// with its UID), the fairness pre-filter (the older Database goes first
// while the key is free, read from a cached field index) and the wording of
// the messages. The protocol, the finalizer, the condition and the release
// sweep (every claim but the kept key) are ocf-claim's.
//
// RBAC:
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete,namespace=camunda-system
// +kubebuilder:rbac:groups=ports.example.camunda.io,resources=databases,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ports.example.camunda.io,resources=databases/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ports.example.camunda.io,resources=databases/finalizers,verbs=update
package databaseclaim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/examples/ports/internal/portapi"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
)

// The names the hand-written claim wrote; an upgrade must keep every one of
// them or it orphans the live claims (Leases, finalizers) of the old release.
const (
	LeasePrefix               = "pg-database-"
	KeyAnnotation             = "postgres.camunda.io/claim-key"
	HolderNamespaceAnnotation = "postgres.camunda.io/holder-namespace"
	HolderNameAnnotation      = "postgres.camunda.io/holder-name"
	HolderUIDAnnotation       = "postgres.camunda.io/holder-uid"
	HolderNameLabel           = "postgres.camunda.io/holder-name"
	Finalizer                 = "postgres.camunda.io/database-claim"
)

// KeyIndex is the field index of Databases by claim key that the fairness
// pre-filter lists siblings from; register it with [IndexKey].
const KeyIndex = "databaseclaim.key"

// Requeue is how long a Database that does not hold its key waits before it
// asks again when no Lease event wakes it earlier.
const Requeue = 60 * time.Second

// Config reads and writes the hand-written claim's Leases in the operator
// namespace. Sweeps select a holder's Leases by its name label; the claim
// narrows them by UID.
func Config(operatorNamespace string) claim.Config {
	return claim.Config{
		Namespace: operatorNamespace,
		Prefix:    LeasePrefix,
		Annotations: backends.Annotations{
			Key:             KeyAnnotation,
			HolderNamespace: HolderNamespaceAnnotation,
			HolderName:      HolderNameAnnotation,
			HolderUID:       HolderUIDAnnotation,
		},
		HolderLabels: func(h claim.Holder) map[string]string { return map[string]string{HolderNameLabel: h.Name} },
	}
}

// Key is the claim key of db: "<system identifier>/<database name>".
func Key(db *portapi.Database) (string, error) {
	if db.Spec.SystemIdentifier == "" || db.Spec.Name == "" {
		return "", errors.New("spec.systemIdentifier and spec.name are both required")
	}
	return db.Spec.SystemIdentifier + "/" + db.Spec.Name, nil
}

// IndexKey registers [KeyIndex] with the manager's field indexer.
func IndexKey(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &portapi.Database{}, KeyIndex, func(obj client.Object) []string {
		key, err := Key(obj.(*portapi.Database)) //nolint:forcetypeassert // the index is of Databases
		if err != nil {
			return nil
		}
		return []string{key}
	})
}

// Options are the claimmw options of the port. cached lists siblings
// through [KeyIndex] (the manager's client); apiReader judges liveness and
// must be uncached. Add claimmw.FromManager, or WithClient and
// WithAPIReader, to make a middleware.
func Options(operatorNamespace string, cached, apiReader client.Reader) []claimmw.Option {
	return []claimmw.Option{
		claimmw.For(&portapi.Database{}),
		claimmw.WithClaim(Config(operatorNamespace),
			// The hand-written Leases name no kind, so the liveness reads
			// Databases whatever the record says.
			claim.WithLiveness(claim.HolderExistsAs(apiReader, &portapi.Database{})),
			claim.WithSiblings(siblings(cached)),
			claim.WithMessages(Message),
		),
		claimmw.WithKeys(func(_ context.Context, obj client.Object) ([]string, error) {
			key, err := Key(obj.(*portapi.Database)) //nolint:forcetypeassert // claimmw.For(&portapi.Database{})
			return []string{key}, err
		}),
		claimmw.WithFinalizer(Finalizer),
		claimmw.WithRequeue(Requeue, Requeue),
	}
}

// siblings lists the Databases that want key from the cache. Self may be
// among them or not: the claim compares siblings with self by UID.
func siblings(cached client.Reader) claim.Siblings {
	return claim.SiblingsFunc(func(ctx context.Context, key string, _ claim.Holder) ([]claim.Holder, error) {
		var list portapi.DatabaseList
		if err := cached.List(ctx, &list, client.MatchingFields{KeyIndex: key}); err != nil {
			return nil, fmt.Errorf("listing Databases that want %q: %w", key, err)
		}
		out := make([]claim.Holder, 0, len(list.Items))
		for i := range list.Items {
			if list.Items[i].DeletionTimestamp == nil {
				out = append(out, claim.HolderOf(&list.Items[i]))
			}
		}
		return out, nil
	})
}

// Message words outcomes as the hand-written claim did. A loser names the
// Lease holder once the Lease exists, never the oldest claimant.
func Message(o claim.Outcome) string {
	system, database, _ := strings.Cut(o.Key, "/")
	switch o.Reason {
	case claim.ReasonHeldElsewhere:
		return fmt.Sprintf("Database %q of PostgreSQL system %s is owned by Database %s.", database, system, o.Holder.NamespacedName())
	case claim.ReasonNotFirst:
		return fmt.Sprintf("Database %q of PostgreSQL system %s is also requested by Database %s, which is older and goes first.", database, system, o.Other.NamespacedName())
	}
	return claim.DefaultMessage(o)
}
