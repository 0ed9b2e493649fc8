package claim

import (
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/backends"
)

// The claim vocabulary, defined with the backend contract in pkg/backends so
// that backends need not import this package.
type (
	// Holder identifies the object that holds, or wants to hold, a key;
	// its UID alone decides ownership. See [backends.Holder].
	Holder = backends.Holder
	// Record is one key's claim record as read: holder, successor, fencing
	// token, and where it is stored. See [backends.Record].
	Record = backends.Record
	// Token is the fencing token of a grant, rising with every grant of a
	// key. See [backends.Token].
	Token = backends.Token
)

// Errors a caller can test for with errors.Is. Contention is never an error:
// it is an [Outcome]. A write that lost to a concurrent one wraps
// [backends.ErrConflict].
var (
	// ErrInvalidKey marks a key that [ValidateKey] or Config.Normalize
	// rejected, or that the backend cannot map to a record. It is
	// [backends.ErrInvalidKey].
	ErrInvalidKey = backends.ErrInvalidKey
	// ErrInvalidHolder marks a Holder without a name or UID, or one the
	// backend cannot record. It is [backends.ErrInvalidHolder].
	ErrInvalidHolder = backends.ErrInvalidHolder
	// ErrRaced marks an Acquire that lost every round of a bounded number of
	// re-reads to concurrent writers. Retrying later is safe.
	ErrRaced = errors.New("claim record kept changing")
)

// HolderOf builds the Holder of obj from its metadata and its TypeMeta.
// Objects read through a typed client often carry no TypeMeta; use
// [Claimer.HolderOf] to fill APIVersion and Kind from the client's scheme.
func HolderOf(obj client.Object) Holder {
	gvk := obj.GetObjectKind().GroupVersionKind()
	return Holder{
		APIVersion: gvk.GroupVersion().String(),
		Kind:       gvk.Kind,
		Namespace:  obj.GetNamespace(),
		Name:       obj.GetName(),
		UID:        obj.GetUID(),
		Created:    obj.GetCreationTimestamp().Time,
	}
}

// validateHolder refuses a holder the protocol cannot record.
func validateHolder(h Holder) error {
	var problems []string
	if h.Name == "" {
		problems = append(problems, "name is empty")
	}
	if h.UID == "" {
		problems = append(problems, "UID is empty")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: holder %q: %s", ErrInvalidHolder, h.String(), strings.Join(problems, ", "))
	}
	return nil
}
