package claim

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Liveness judges whether the holder recorded for a key is still alive. A
// holder judged dead may be taken over. An error means "cannot judge": the
// holder keeps the key and Acquire returns the error.
type Liveness interface {
	Alive(ctx context.Context, key string, holder Holder) (bool, error)
}

// LivenessFunc adapts a function to [Liveness].
type LivenessFunc func(ctx context.Context, key string, holder Holder) (bool, error)

// Alive calls f.
func (f LivenessFunc) Alive(ctx context.Context, key string, holder Holder) (bool, error) {
	return f(ctx, key, holder)
}

// HandoverGate decides whether a holder judged dead has let go of what the
// key guards, for instance whether its pods have stopped. A closed gate
// yields [ReasonWaitingForHandover] with detail as the reason in words. An
// error keeps the previous holder and is returned.
type HandoverGate interface {
	Open(ctx context.Context, key string, previous Holder) (open bool, detail string, err error)
}

// GateFunc adapts a function to [HandoverGate].
type GateFunc func(ctx context.Context, key string, previous Holder) (bool, string, error)

// Open calls f.
func (f GateFunc) Open(ctx context.Context, key string, previous Holder) (bool, string, error) {
	return f(ctx, key, previous)
}

// Siblings lists the other objects that want key, for the fairness
// pre-filter: while a key has no record, a claimant yields
// ([ReasonNotFirst]) to any sibling created before it (ties: smaller
// namespace/name). It may include self; self is ignored by UID. The list may
// come from a cache: once a record exists the record decides, and Create
// still decides between claimants that both believe they are first.
type Siblings interface {
	Siblings(ctx context.Context, key string, self Holder) ([]Holder, error)
}

// SiblingsFunc adapts a function to [Siblings].
type SiblingsFunc func(ctx context.Context, key string, self Holder) ([]Holder, error)

// Siblings calls f.
func (f SiblingsFunc) Siblings(ctx context.Context, key string, self Holder) ([]Holder, error) {
	return f(ctx, key, self)
}

// HolderExists is the default Liveness: a holder is alive while an object of
// its recorded APIVersion and Kind exists under its name with its recorded
// UID, read through reader (which should be uncached). A holder whose object
// is gone, was recreated with another UID, or whose kind the server no longer
// serves is dead. A holder recorded without APIVersion and Kind cannot be
// read and is kept alive; use [HolderExistsAs] for records written without
// them.
func HolderExists(reader client.Reader) Liveness {
	return LivenessFunc(func(ctx context.Context, _ string, h Holder) (bool, error) {
		if h.APIVersion == "" || h.Kind == "" {
			return true, nil
		}
		gv, err := schema.ParseGroupVersion(h.APIVersion)
		if err != nil {
			// A recorded apiVersion we cannot parse is a record we cannot
			// judge; the holder keeps it.
			return true, nil //nolint:nilerr // documented: unjudgeable holders stay alive
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gv.WithKind(h.Kind))
		return objectAlive(ctx, reader, obj, h)
	})
}

// HolderExistsAs is HolderExists for holders of one type, given by
// prototype, whatever kind the record names.
func HolderExistsAs(reader client.Reader, prototype client.Object) Liveness {
	return LivenessFunc(func(ctx context.Context, _ string, h Holder) (bool, error) {
		obj, ok := prototype.DeepCopyObject().(client.Object)
		if !ok {
			return false, fmt.Errorf("judging liveness of %s: prototype %T is not a client.Object", h, prototype)
		}
		return objectAlive(ctx, reader, obj, h)
	})
}

// ByKind dispatches to the Liveness registered for the holder's Kind, and to
// fallback for every other kind. A nil fallback keeps holders of unknown
// kinds alive.
func ByKind(byKind map[string]Liveness, fallback Liveness) Liveness {
	return LivenessFunc(func(ctx context.Context, key string, h Holder) (bool, error) {
		if l, ok := byKind[h.Kind]; ok {
			return l.Alive(ctx, key, h)
		}
		if fallback == nil {
			return true, nil
		}
		return fallback.Alive(ctx, key, h)
	})
}

func objectAlive(ctx context.Context, reader client.Reader, obj client.Object, h Holder) (bool, error) {
	err := reader.Get(ctx, h.NamespacedName(), obj)
	switch {
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading holder %s: %w", h, err)
	}
	return obj.GetUID() == h.UID, nil
}
