// Package annotation stores claim records on the claimed object itself: the
// record of a key is a set of annotations (backends.Annotations, the same wire
// format the Lease backend writes) plus the holder's selector labels
// (backends.Config.SelectorLabels) on an existing object the operator owns, of
// any type the consumer names with a prototype. [Options.Target] maps a claim
// key to that object's namespace and name.
//
// The backend never creates or deletes the claimed object and never writes
// anything of it but its own annotation and label keys: every write is a JSON
// merge patch that names only those keys and carries the object's UID and the
// resourceVersion of the read the protocol decided on, so the API server
// refuses it (as a Conflict, reported as backends.ErrConflict) when anyone wrote
// the object since. Grant, takeover and release are all guarded that way; a
// release removes exactly backends.Annotations.Owned and the holder's selector
// labels. The object's other annotations, labels, spec and status are never
// sent. Config.Labels are not written: the object's labels belong to its
// operator.
//
// A key's record is absent when its object carries none of the claim
// annotations; the absent record still carries the object's UID and
// resourceVersion, so that the grant is fenced on the object as read. An
// object with only some of the claim annotations, or with annotations written
// for another key, holds a foreign record: it blocks the key and is never
// written. Since whoever may edit the object may forge annotations, a record
// no Claimer could have written is foreign too, with the reason: a token
// newer than the object's own resourceVersion, or a holder without
// apiVersion and kind (backends.Stored.Shared); the backend refuses to write a
// record for such a holder (backends.ErrInvalidHolder). An object that does not exist is an error wrapping
// backends.ErrNoTarget that names the object: never a grant, never a create.
//
// # Fencing token
//
// The token of a grant is the object's resourceVersion as written by the
// grant. Unlike a Lease, the claimed object is written by its operator all
// the time (spec, status, its own annotations), and each such write raises
// the object's resourceVersion; the protocol does not re-stamp the token on
// those writes, so the token a Claimer reports for the same grant rises while
// the grant lasts. That is still a valid fencing token: resourceVersions of
// one resource are ordered by write (KEP-5504), the next grant of the key is
// itself a write of the object made after every token of the current grant
// was read, so every token of one grant is older than every token of the
// next. A protected resource that remembers the highest token it has seen
// and refuses older ones refuses the previous holder and never the current
// one. Compare tokens only with backends.Token.Compare.
//
// # Cost and contention
//
// Every conditional write is fenced on the whole object's resourceVersion,
// not on the claim's own annotations, so an operator write to the object
// between the protocol's read and its write makes the write conflict and the
// protocol read again; under constant writes an Acquire can end in
// claim.ErrRaced, which is safe to retry. Re-entry and Holds are one GET.
//
// # RBAC
//
// RBAC markers cannot be generic over the claimed type. A consumer grants its
// manager get, list, watch and patch on the claimed resource, for example
//
//	// +kubebuilder:rbac:groups=example.com,resources=storageconfigs,verbs=get;list;watch;patch
//
// (list for the release sweep, which selects by the holder's labels), and get
// on every holder kind its claim.Liveness reads.
package annotation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/ocf-claim/claim/pkg/backends"
)

// uidField is the field the API server names when a patch carries a UID
// other than the object's.
const uidField = "metadata.uid"

// Options name the claimed objects.
type Options struct {
	// Object is an empty object of the claimed type, such as
	// &v1alpha1.SecondaryStorageConfig{}. An *unstructured.Unstructured or
	// *metav1.PartialObjectMetadata works too when its apiVersion and kind
	// are set; PartialObjectMetadata reads and lists metadata only. Other
	// types must be registered in the writer's scheme. Required.
	Object client.Object
	// Target maps a claim key, as normalized by Config.Normalize, to the
	// namespace and name of the object that stores its record. It must be
	// deterministic; an error rejects the key. Leave the namespace empty for
	// cluster-scoped types. Required.
	Target func(key string) (types.NamespacedName, error)
}

// Backend returns the backends.Factory of records stored on objects as
// opts names them. Config.Namespace, if set, limits the release sweep's List
// to that namespace (leave it empty for cluster-scoped types and for objects
// spread over namespaces).
func Backend(opts Options) backends.Factory {
	return func(reader client.Reader, writer client.Client, cfg backends.Config) (backends.Backend, error) {
		var errs []error
		if opts.Object == nil {
			errs = append(errs, errors.New("options.Object is nil; pass an empty object of the claimed type"))
		}
		if opts.Target == nil {
			errs = append(errs, errors.New("options.Target is nil; pass a function from key to object name"))
		}
		if len(errs) > 0 {
			return nil, fmt.Errorf("annotation backend: %w", errors.Join(errs...))
		}
		gvk, err := apiutil.GVKForObject(opts.Object, writer.Scheme())
		if err != nil {
			return nil, fmt.Errorf("annotation backend: finding the kind of %T: %w", opts.Object, err)
		}
		list, err := newList(opts.Object, gvk, writer.Scheme())
		if err != nil {
			return nil, fmt.Errorf("annotation backend: %w", err)
		}
		return &store{reader: reader, writer: writer, cfg: cfg.WithDefaults(), proto: opts.Object, list: list, kind: gvk.Kind, target: opts.Target}, nil
	}
}

// newList returns an empty list of the prototype's type.
func newList(proto client.Object, gvk schema.GroupVersionKind, scheme *runtime.Scheme) (client.ObjectList, error) {
	listGVK := gvk.GroupVersion().WithKind(gvk.Kind + "List")
	switch proto.(type) {
	case *unstructured.Unstructured:
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(listGVK)
		return l, nil
	case *metav1.PartialObjectMetadata:
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(listGVK)
		return l, nil
	}
	obj, err := scheme.New(listGVK)
	if err != nil {
		return nil, fmt.Errorf("making a list of %s for the release sweep: %w", gvk.Kind, err)
	}
	l, ok := obj.(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("making a list of %s for the release sweep: %T is not a client.ObjectList", gvk.Kind, obj)
	}
	return l, nil
}

type store struct {
	reader client.Reader
	writer client.Client
	cfg    backends.Config
	proto  client.Object
	list   client.ObjectList
	kind   string
	target func(key string) (types.NamespacedName, error)
}

// object returns an empty object of the claimed type named ref.
func (s *store) object(ref types.NamespacedName) (client.Object, error) {
	obj, ok := s.proto.DeepCopyObject().(client.Object)
	if !ok {
		return nil, fmt.Errorf("copying the prototype %T: the copy is not a client.Object", s.proto)
	}
	obj.SetNamespace(ref.Namespace)
	obj.SetName(ref.Name)
	return obj, nil
}

func (s *store) ref(key string) (types.NamespacedName, error) {
	ref, err := s.target(key)
	if err != nil {
		return ref, fmt.Errorf("%w: mapping key %q to its %s: %w", backends.ErrInvalidKey, key, s.kind, err)
	}
	return ref, nil
}

func (s *store) Get(ctx context.Context, key string) (backends.Record, error) {
	ref, err := s.ref(key)
	if err != nil {
		return backends.Record{}, err
	}
	obj, err := s.object(ref)
	if err != nil {
		return backends.Record{}, err
	}
	if err := s.reader.Get(ctx, ref, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return backends.Record{}, fmt.Errorf("getting %s %s, which stores the claim of key %q: %w", s.kind, ref, key, backends.ErrNoTarget)
		}
		return backends.Record{}, fmt.Errorf("getting %s %s: %w", s.kind, ref, err)
	}
	return Decode(s.cfg, key, obj), nil
}

func (s *store) Create(ctx context.Context, prev, next backends.Record) (backends.Record, error) {
	if prev.Version == "" {
		// Without the version of the read, the grant could not be fenced.
		return backends.Record{}, fmt.Errorf("creating the claim of key %q on %s %s: the record read has no resourceVersion; pass the record Get returned", next.Key, s.kind, prev.Ref)
	}
	return s.write(ctx, "creating", prev, next)
}

func (s *store) Update(ctx context.Context, prev, next backends.Record) (backends.Record, error) {
	return s.write(ctx, "updating", prev, next)
}

// write patches next's annotations and labels onto the object prev was read
// from, removing whatever of prev's claim keys next does not carry.
func (s *store) write(ctx context.Context, verb string, prev, next backends.Record) (backends.Record, error) {
	if next.Holder.APIVersion == "" || next.Holder.Kind == "" {
		// Decode makes such a record Foreign (backends.Stored.Shared): writing
		// it would leave a record its own holder could not re-enter.
		return backends.Record{}, fmt.Errorf("%s the claim of key %q on %s %s: %w: holder %s has no apiVersion or kind, which records on a claimed object need (Claimer.HolderOf fills them)", verb, next.Key, s.kind, prev.Ref, backends.ErrInvalidHolder, next.Holder)
	}
	annotations := removals(s.cfg.Annotations.Owned())
	for k, v := range s.cfg.Annotations.Encode(next) {
		annotations[k] = &v
	}
	labels := map[string]*string{}
	if prev.Ours() {
		labels = removals(keys(s.cfg.SelectorLabels(prev.Holder)))
	}
	for k, v := range s.cfg.SelectorLabels(next.Holder) {
		labels[k] = &v
	}
	obj, err := s.patch(ctx, prev, annotations, labels)
	if err != nil {
		if errors.Is(err, backends.ErrConflict) || apierrors.IsNotFound(err) {
			return backends.Record{}, fmt.Errorf("%s the claim of key %q on %s %s: %w: %w", verb, next.Key, s.kind, prev.Ref, backends.ErrConflict, err)
		}
		return backends.Record{}, fmt.Errorf("%s the claim of key %q on %s %s: %w", verb, next.Key, s.kind, prev.Ref, err)
	}
	return Decode(s.cfg, next.Key, obj), nil
}

func (s *store) Delete(ctx context.Context, prev backends.Record) error {
	labels := map[string]*string{}
	if prev.Ours() {
		labels = removals(keys(s.cfg.SelectorLabels(prev.Holder)))
	}
	_, err := s.patch(ctx, prev, removals(s.cfg.Annotations.Owned()), labels)
	if err == nil || apierrors.IsNotFound(err) {
		// An object that is gone holds no claim.
		return nil
	}
	return fmt.Errorf("removing the claim of key %q from %s %s: %w", prev.Key, s.kind, prev.Ref, err)
}

// mergePatch is a JSON merge patch of metadata only. uid and
// resourceVersion are preconditions: the API server refuses the patch when
// the object has another UID (it was deleted and re-created) or another
// resourceVersion (it was written since prev was read). A nil value removes
// its key.
type mergePatch struct {
	Metadata struct {
		UID             types.UID          `json:"uid,omitempty"`
		ResourceVersion string             `json:"resourceVersion"`
		Annotations     map[string]*string `json:"annotations,omitempty"`
		Labels          map[string]*string `json:"labels,omitempty"`
	} `json:"metadata"`
}

// patch sends the guarded merge patch and returns the object as written. A
// refused precondition is an error wrapping backends.ErrConflict; a missing
// object is the API server's NotFound.
func (s *store) patch(ctx context.Context, prev backends.Record, annotations, labels map[string]*string) (client.Object, error) {
	var p mergePatch
	p.Metadata.UID, p.Metadata.ResourceVersion = prev.UID, prev.Version
	p.Metadata.Annotations, p.Metadata.Labels = annotations, labels
	data, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encoding the patch: %w", err)
	}
	obj, err := s.object(prev.Ref)
	if err != nil {
		return nil, err
	}
	err = s.writer.Patch(ctx, obj, client.RawPatch(types.MergePatchType, data))
	switch {
	case err == nil:
		return obj, nil
	case apierrors.IsConflict(err), uidChanged(err):
		return nil, fmt.Errorf("patching %s %s at resourceVersion %s: %w: %w", s.kind, prev.Ref, prev.Version, backends.ErrConflict, err)
	}
	return nil, fmt.Errorf("patching %s %s: %w", s.kind, prev.Ref, err)
}

// uidChanged reports whether err is the API server refusing a patch whose
// UID is not the object's: the object was deleted and re-created since it
// was read. The server reports it as an invalid change of metadata.uid.
func uidChanged(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == uidField {
			return true
		}
	}
	return false
}

// List lists the objects that store holder's records: those carrying its
// selector labels, and those without one of them that name it in their
// claim annotations (see [backends.Config.LostLabelSelectors]); the second
// listing sends every object of the claimed type without that label, the
// free ones included, since the backend writes no label of its own that
// could narrow it. It is listed first, so that a record stamped with its
// labels in between is found by the listing by its labels.
func (s *store) List(ctx context.Context, holder backends.Holder) ([]backends.Record, error) {
	lost, err := s.cfg.LostLabelSelectors(holder, nil)
	if err != nil {
		return nil, fmt.Errorf("listing %s of %s: %w", s.kind, holder, err)
	}
	var unlabelled []backends.Record
	for _, sel := range lost {
		// Decoding only reads the objects: a cache need not copy the free
		// ones it sends.
		recs, err := s.listBy(ctx, holder, client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy)
		if err != nil {
			return nil, err
		}
		unlabelled = append(unlabelled, recs...)
	}
	labelled, err := s.listBy(ctx, holder, client.MatchingLabels(s.cfg.SelectorLabels(holder)))
	if err != nil {
		return nil, err
	}
	return backends.KeepLost(holder, labelled, unlabelled), nil
}

func (s *store) listBy(ctx context.Context, holder backends.Holder, opts ...client.ListOption) ([]backends.Record, error) {
	list, ok := s.list.DeepCopyObject().(client.ObjectList)
	if !ok {
		return nil, fmt.Errorf("listing %s of %s: copying the list prototype %T", s.kind, holder, s.list)
	}
	opts = slices.Clip(opts)
	if s.cfg.Namespace != "" {
		opts = append(opts, client.InNamespace(s.cfg.Namespace))
	}
	if err := s.reader.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing %s of %s: %w", s.kind, holder, err)
	}
	var recs []backends.Record
	err := meta.EachListItem(list, func(item runtime.Object) error {
		obj, ok := item.(client.Object)
		if !ok {
			return fmt.Errorf("listing %s of %s: item %T is not a client.Object", s.kind, holder, item)
		}
		key := obj.GetAnnotations()[s.cfg.Annotations.Key]
		rec := Decode(s.cfg, key, obj)
		if !rec.Exists {
			// An object without claim annotations stores no claim.
			return nil
		}
		if rec.Foreign == "" {
			if ref, err := s.target(key); err != nil || ref != rec.Ref {
				// An object that is not the target of the key it names was
				// not annotated by this claim.
				rec.Foreign = fmt.Sprintf("%s is not the claimed object of key %q", rec.Ref, key)
			}
		}
		recs = append(recs, rec)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return recs, nil
}

// Decode reads the record of key from obj's annotations. An object without
// any claim annotation holds no record (Exists false) but still reports its
// UID and resourceVersion; partial annotations, or annotations written for
// another key, are a foreign record.
func Decode(cfg backends.Config, key string, obj client.Object) backends.Record {
	cfg = cfg.WithDefaults()
	ref := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if _, present, _ := cfg.Annotations.Decode(key, obj.GetAnnotations()); !present {
		return backends.Record{Key: key, Ref: ref, UID: obj.GetUID(), Version: obj.GetResourceVersion()}
	}
	// The token is the object's version at the grant or after a later write
	// of the operator's (see the package comment).
	return cfg.DecodeStored(key, backends.Stored{Ref: ref, UID: obj.GetUID(), Version: obj.GetResourceVersion(), Annotations: obj.GetAnnotations(), Labels: obj.GetLabels(), Shared: true})
}

// removals maps every key to nil: removed by a merge patch.
func removals(keys []string) map[string]*string {
	out := make(map[string]*string, len(keys))
	for _, k := range keys {
		out[k] = nil
	}
	return out
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// RecordRef names the object that stores the record of key (normalized),
// as Options.Target maps it, whatever Config.Namespace says.
func (s *store) RecordRef(key string) (types.NamespacedName, error) { return s.ref(key) }

// RecordType returns an empty object of the claimed type: records are its
// annotations, so a controller learns of every change of a claim by watching
// those objects (see claimmw).
func (s *store) RecordType() client.Object {
	return s.proto.DeepCopyObject().(client.Object) //nolint:forcetypeassert // a client.Object's copy is one
}
