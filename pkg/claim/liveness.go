package claim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/ocf-claim/claim/internal/mutant"
)

// Liveness judges whether the holder of a claim record is still alive. A
// holder judged dead may be taken over. An error means "cannot judge": the
// holder keeps the key and Acquire returns the error.
//
// Alive is given the whole record as read (rec.Key, rec.Holder, and what the
// record says of its renewals), so that a Liveness that wraps or dispatches
// to another ([ByKind], a decorator) passes on everything the inner one
// needs: there is one shape, and no capability for a wrapper to hide.
type Liveness interface {
	Alive(ctx context.Context, rec Record) (bool, error)
}

// LivenessFunc adapts a function to [Liveness].
type LivenessFunc func(ctx context.Context, rec Record) (bool, error)

// Alive calls f.
func (f LivenessFunc) Alive(ctx context.Context, rec Record) (bool, error) {
	return f(ctx, rec)
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

// ErrKindNotServed marks a liveness check that could not read the holder
// because the API server serves its kind at no version the reader knows of.
// The holder keeps the key: a kind that is not served says nothing about
// whether the holder is gone (a CRD being upgraded or re-installed, an
// aggregated API that is down), and judging it dead would hand a live
// holder's key to someone else.
var ErrKindNotServed = errors.New("holder kind not served")

// HolderExists is the default Liveness: a holder is alive while an object of
// its recorded group and Kind exists under its name with its recorded UID,
// read through reader (which should be uncached). A holder whose object is
// gone or was recreated with another UID is dead.
//
// The recorded APIVersion is only where the search starts: records keep the
// version their holder had when it acquired, and a CRD may stop serving that
// version later. When the server does not serve it, the holder is read at
// each other version reader's RESTMapper knows for the group and kind (a
// client.Client has one; the manager's API reader does), and, when none is
// served, at the versions the mapper learns when asked again (a mapper that
// learnt the group before the CRD changed its versions); an object keeps its
// UID across versions. When no version is served (or reader has no
// RESTMapper), the holder is kept alive and the error wraps
// [ErrKindNotServed], so the key is not taken over.
//
// A holder recorded without APIVersion and Kind cannot be read and is kept
// alive; use [HolderExistsAs] for records written without them.
func HolderExists(reader client.Reader) Liveness {
	return checkedLiveness{problem: readerProblem("HolderExists", reader), LivenessFunc: func(ctx context.Context, rec Record) (bool, error) {
		h := rec.Holder
		if h.APIVersion == "" || h.Kind == "" {
			return true, nil
		}
		gv, err := schema.ParseGroupVersion(h.APIVersion)
		if err != nil {
			// A recorded apiVersion we cannot parse is a record we cannot
			// judge; the holder keeps it.
			return true, nil //nolint:nilerr // documented: unjudgeable holders stay alive
		}
		return holderAlive(ctx, reader, gv.WithKind(h.Kind), h)
	}}
}

// checkedLiveness is a Liveness built on dependencies that [New] checks
// once: a nil reader would otherwise panic in the first pass that judges a
// holder, which is every waiter's pass.
type checkedLiveness struct {
	LivenessFunc
	problem error
}

// livenessProblem names what is wrong with the Liveness's dependencies, or
// is nil.
func (l checkedLiveness) livenessProblem() error { return l.problem }

// livenessProblem returns the problem of l's dependencies, when l is one
// this package built.
func livenessProblem(l Liveness) error {
	if c, ok := l.(interface{ livenessProblem() error }); ok {
		return c.livenessProblem()
	}
	return nil
}

// readerProblem names a nil reader (typed nil included) handed to a
// Liveness constructor.
func readerProblem(constructor string, reader client.Reader) error {
	if reader == nil || isNil(reader) {
		return fmt.Errorf("%s: the reader is nil; pass the manager's API reader, assigned before the claim is configured", constructor)
	}
	return nil
}

// holderAlive reads h at gvk and, when the server does not serve that
// version, at every other version of gvk's group and kind the reader's
// RESTMapper knows.
func holderAlive(ctx context.Context, reader client.Reader, gvk schema.GroupVersionKind, h Holder) (bool, error) {
	alive, err := metadataAlive(ctx, reader, gvk, h)
	if !errors.Is(err, errNotServed) {
		return alive, err
	}
	tried := []string{gvk.Version}
	withMapper, ok := reader.(interface{ RESTMapper() meta.RESTMapper })
	if !ok {
		return true, fmt.Errorf("judging liveness of holder %s (it keeps the claim): %w: %s is not served and the reader has no RESTMapper to find another version", h, ErrKindNotServed, gvk)
	}
	mapper := withMapper.RESTMapper()
	for attempt := range 2 {
		if attempt == 1 {
			// The mapper may have learnt the group's versions before the
			// CRD changed them; make it learn them again (see
			// relearnGroup) and try the versions it did not know.
			relearnGroup(mapper, gvk.Group)
		}
		mappings, err := mapper.RESTMappings(gvk.GroupKind())
		if err != nil && !meta.IsNoMatchError(err) {
			return true, fmt.Errorf("judging liveness of holder %s (it keeps the claim): finding the served versions of %s: %w", h, gvk.GroupKind(), err)
		}
		for _, m := range mappings {
			v := m.GroupVersionKind.Version
			if slices.Contains(tried, v) {
				continue
			}
			tried = append(tried, v)
			alive, err := metadataAlive(ctx, reader, m.GroupVersionKind, h)
			if errors.Is(err, errNotServed) {
				continue
			}
			return alive, err
		}
	}
	return true, fmt.Errorf("judging liveness of holder %s (it keeps the claim): %w: %s is served at none of the versions %s", h, ErrKindNotServed, gvk.GroupKind(), strings.Join(tried, ", "))
}

// relearnKind is a kind no API group serves.
const relearnKind = "OcfClaimRelearnGroupVersions"

// relearnGroup makes a lazily learning RESTMapper, as controller-runtime's
// dynamic one is, forget what it learnt of group when that is stale. It
// learns a group once, and asks the server again only when asked for a kind
// it does not know; asked for one, it re-reads the versions it learnt, and
// drops the group when one of them is no longer served, so that the next
// lookup learns the group's versions as they are now. The answer to this
// lookup is never found, and is ignored. A mapper that learns otherwise is
// only asked one lookup more.
func relearnGroup(mapper meta.RESTMapper, group string) {
	_, _ = mapper.RESTMapping(schema.GroupKind{Group: group, Kind: relearnKind})
}

// errNotServed marks a read of a version the server does not serve.
var errNotServed = errors.New("version not served")

// metadataAlive reads h's metadata at gvk.
func metadataAlive(ctx context.Context, reader client.Reader, gvk schema.GroupVersionKind, h Holder) (bool, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	return objectAlive(ctx, reader, obj, h)
}

// HolderExistsAs is HolderExists for holders of one type, given by
// prototype, whatever kind the record names. It reads at the prototype's
// version only; when that version is not served the holder is kept alive and
// the error wraps [ErrKindNotServed].
func HolderExistsAs(reader client.Reader, prototype client.Object) Liveness {
	problem := readerProblem("HolderExistsAs", reader)
	if prototype == nil || isNil(prototype) {
		problem = errors.Join(problem, errors.New("HolderExistsAs: the prototype is nil; pass a new object of the holder type, such as &v1.Database{}"))
	}
	return checkedLiveness{problem: problem, LivenessFunc: func(ctx context.Context, rec Record) (bool, error) {
		h := rec.Holder
		obj, ok := prototype.DeepCopyObject().(client.Object)
		if !ok {
			return false, fmt.Errorf("judging liveness of %s: prototype %T is not a client.Object", h, prototype)
		}
		alive, err := objectAlive(ctx, reader, obj, h)
		if errors.Is(err, errNotServed) {
			return true, fmt.Errorf("judging liveness of holder %s (it keeps the claim): %w: %w", h, ErrKindNotServed, err)
		}
		return alive, err
	}}
}

// ByKind dispatches the record to the Liveness registered for its holder's
// Kind, and to fallback for every other kind. A nil fallback keeps holders of
// unknown kinds alive.
func ByKind(byKind map[string]Liveness, fallback Liveness) Liveness {
	var problems []error
	for _, kind := range slices.Sorted(maps.Keys(byKind)) {
		l := byKind[kind]
		if l == nil || isNil(l) {
			problems = append(problems, fmt.Errorf("ByKind: the Liveness of kind %q is nil", kind))
		} else if err := livenessProblem(l); err != nil {
			problems = append(problems, fmt.Errorf("ByKind: kind %q: %w", kind, err))
		}
	}
	if fallback != nil && isNil(fallback) {
		problems = append(problems, errors.New("ByKind: the fallback is a nil Liveness"))
	} else if err := livenessProblem(fallback); err != nil {
		problems = append(problems, fmt.Errorf("ByKind: fallback: %w", err))
	}
	return checkedLiveness{problem: errors.Join(problems...), LivenessFunc: func(ctx context.Context, rec Record) (bool, error) {
		if l, ok := byKind[rec.Holder.Kind]; ok {
			return l.Alive(ctx, rec)
		}
		if fallback == nil {
			return true, nil
		}
		return fallback.Alive(ctx, rec)
	}}
}

// cachedHolders finds holders alive in a cached reader: those of the types
// it was given that the cache shows with the recorded UID.
type cachedHolders struct {
	cached client.Reader
	byKind map[schema.GroupKind]client.Object
}

func newCachedHolders(cached client.Reader, scheme *runtime.Scheme, kinds []client.Object) *cachedHolders {
	c := &cachedHolders{cached: cached, byKind: map[schema.GroupKind]client.Object{}}
	for _, k := range kinds {
		if k == nil || isNil(k) {
			continue
		}
		if gvk, err := apiutil.GVKForObject(k, scheme); err == nil {
			c.byKind[gvk.GroupKind()] = k
		}
	}
	return c
}

// alive reports whether the cache shows h. False says nothing: the cache
// may lag, or not hold h's type or namespace.
func (c *cachedHolders) alive(ctx context.Context, h Holder) bool {
	gv, err := schema.ParseGroupVersion(h.APIVersion)
	if err != nil {
		return false
	}
	prototype, ok := c.byKind[gv.WithKind(h.Kind).GroupKind()]
	if !ok {
		return false
	}
	obj, ok := prototype.DeepCopyObject().(client.Object)
	if !ok {
		return false
	}
	alive, err := objectAlive(ctx, c.cached, obj, h)
	return err == nil && alive
}

// orNext is next, except that a holder the cache shows is alive without
// asking next.
func (c *cachedHolders) orNext(next Liveness) Liveness {
	return LivenessFunc(func(ctx context.Context, rec Record) (bool, error) {
		if c.alive(ctx, rec.Holder) {
			return true, nil
		}
		return next.Alive(ctx, rec)
	})
}

// objectAlive reads h into obj. A version the server does not serve is an
// error wrapping errNotServed, never "gone".
func objectAlive(ctx context.Context, reader client.Reader, obj client.Object, h Holder) (bool, error) {
	err := reader.Get(ctx, h.NamespacedName(), obj)
	switch {
	case notServed(err):
		return false, fmt.Errorf("reading holder %s as %s: %w: %w", h, obj.GetObjectKind().GroupVersionKind(), errNotServed, err)
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading holder %s: %w", h, err)
	}
	mutant.Do(mutant.DeletingHolderJudgedGone, func() { deletingAsGone(obj) })
	return obj.GetUID() == h.UID, nil
}

// notServed reports whether err says that the version read is not served,
// as opposed to the object not existing: a RESTMapper that does not know it
// (NoMatch), or, from a RESTMapper that still remembers a version the server
// stopped serving, a 404 that is not an API status (the server answers a path
// it does not serve with a plain "404 page not found"; a missing object is
// answered with a Status naming it).
func notServed(err error) bool {
	if err == nil {
		return false
	}
	if meta.IsNoMatchError(err) {
		return true
	}
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Type == metav1.CauseTypeUnexpectedServerResponse {
			return true
		}
	}
	return false
}
