package backends

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Holder identifies the object that holds, or wants to hold, a key.
//
// UID alone decides ownership: two Holders with the same UID are the same
// holder whatever their names say, and an object deleted and recreated under
// the same name is a different holder. Name and UID are required; Namespace is
// empty for cluster-scoped holders. APIVersion and Kind are recorded so that
// the default liveness can read the holder back and so that holders of
// several kinds can share one key space.
type Holder struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	UID        types.UID

	// Created orders sibling claimants for the fairness pre-filter (see
	// claim.WithSiblings). It is not stored in the record.
	Created time.Time
}

// Is reports whether h and other are the same holder, which is decided by UID
// alone.
func (h Holder) Is(other Holder) bool { return h.UID != "" && h.UID == other.UID }

// NamespacedName is the holder's namespace/name.
func (h Holder) NamespacedName() types.NamespacedName {
	return types.NamespacedName{Namespace: h.Namespace, Name: h.Name}
}

// String is the holder's display form, "Kind namespace/name", for messages.
func (h Holder) String() string {
	var b strings.Builder
	if h.Kind != "" {
		b.WriteString(h.Kind)
		b.WriteByte(' ')
	}
	if h.Namespace != "" {
		b.WriteString(h.Namespace)
		b.WriteByte('/')
	}
	b.WriteString(h.Name)
	return b.String()
}

// Identity is the holder's display identity "Kind/namespace/name" bounded to
// limit bytes with [Bound]; the Lease backend writes it to
// spec.holderIdentity. It is for people, never for deciding ownership.
func (h Holder) Identity(limit int) string {
	parts := make([]string, 0, 3)
	if h.Kind != "" {
		parts = append(parts, h.Kind)
	}
	if h.Namespace != "" {
		parts = append(parts, h.Namespace)
	}
	parts = append(parts, h.Name)
	return Bound(strings.Join(parts, "/"), limit)
}
