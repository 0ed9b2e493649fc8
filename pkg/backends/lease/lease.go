// Package lease stores claim records as coordination.k8s.io/v1 Leases: one
// Lease per key, in backends.Config.Namespace, named by Config.NameFunc
// (default: the prefix and 40 hex characters of sha256(key)).
//
// The API server's atomic Create decides between claimants of a free key;
// every other write is an Update or a Delete fenced on the Lease's UID and
// resourceVersion. Exact identity (the key, the holder's namespace, name, UID
// and kind) lives in annotations; spec.holderIdentity is a display form
// bounded to 128 bytes and is never read back. The Lease carries no duration:
// liveness is judged by claim.Liveness, not by expiry.
//
// The Lease belongs to the claim: every write replaces its labels, annotations
// and spec with the claim's own. Reads go through the reader given to
// claim.New, which must be uncached.
//
// RBAC: get, list, watch, create, update and delete on
// leases.coordination.k8s.io in the claim namespace only, bound with a Role
// there (kubebuilder: a +kubebuilder:rbac marker with namespace=<claim
// namespace>). A ClusterRole with these rights could delete node heartbeats
// and other controllers' leader-election Leases.
package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/backends"
)

// HolderIdentityLimit bounds spec.holderIdentity, as client-go's leader
// election expects of that field.
const HolderIdentityLimit = 128

// Backend is the [backends.Factory] of Lease records, and the backend
// claim.New uses when given none. It requires Config.Namespace.
func Backend(reader client.Reader, writer client.Client, cfg backends.Config) (backends.Backend, error) {
	if cfg.Namespace == "" {
		return nil, errors.New("lease backend: config.Namespace is empty; Leases need a namespace to live in")
	}
	return &store{reader: reader, writer: writer, cfg: cfg.WithDefaults()}, nil
}

type store struct {
	reader client.Reader
	writer client.Client
	cfg    backends.Config
}

var (
	_ backends.FreshLister      = (*store)(nil)
	_ backends.UnlabelledLister = (*store)(nil)
	_ backends.AllLister        = (*store)(nil)
)

func (s *store) ref(key string) types.NamespacedName {
	return types.NamespacedName{Namespace: s.cfg.Namespace, Name: s.cfg.RecordName(key)}
}

func (s *store) Get(ctx context.Context, key string) (backends.Record, error) {
	ref := s.ref(key)
	var l coordinationv1.Lease
	if err := s.reader.Get(ctx, ref, &l); err != nil {
		if apierrors.IsNotFound(err) {
			return backends.Record{Key: key, Ref: ref}, nil
		}
		return backends.Record{}, fmt.Errorf("getting Lease %s: %w", ref, err)
	}
	return Decode(s.cfg, key, &l), nil
}

func (s *store) Create(ctx context.Context, _, next backends.Record) (backends.Record, error) {
	l := Encode(s.cfg, next)
	if err := s.writer.Create(ctx, l); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return backends.Record{}, fmt.Errorf("creating Lease %s/%s: %w: %w", l.Namespace, l.Name, backends.ErrConflict, err)
		}
		return backends.Record{}, fmt.Errorf("creating Lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	return Decode(s.cfg, next.Key, l), nil
}

func (s *store) Update(ctx context.Context, prev, next backends.Record) (backends.Record, error) {
	l := Encode(s.cfg, next)
	l.Labels = s.cfg.WriteLabels(prev, next)
	// UID and resourceVersion in the body are both preconditions of an
	// Update: a Lease deleted and recreated, or written since prev was read,
	// answers Conflict.
	l.UID, l.ResourceVersion = prev.UID, prev.Version
	if err := s.writer.Update(ctx, l); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return backends.Record{}, fmt.Errorf("updating Lease %s/%s: %w: %w", l.Namespace, l.Name, backends.ErrConflict, err)
		}
		return backends.Record{}, fmt.Errorf("updating Lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	return Decode(s.cfg, next.Key, l), nil
}

func (s *store) Delete(ctx context.Context, prev backends.Record) error {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: prev.Ref.Namespace, Name: prev.Ref.Name}}
	err := s.writer.Delete(ctx, l, client.Preconditions{UID: ptr.To(prev.UID), ResourceVersion: ptr.To(prev.Version)})
	switch {
	case err == nil, apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("deleting Lease %s: %w: %w", prev.Ref, backends.ErrConflict, err)
	}
	return fmt.Errorf("deleting Lease %s: %w", prev.Ref, err)
}

func (s *store) List(ctx context.Context, holder backends.Holder) ([]backends.Record, error) {
	return s.list(ctx, holder)
}

// ListNotOlderThan implements [backends.FreshLister].
func (s *store) ListNotOlderThan(ctx context.Context, holder backends.Holder, resourceVersion string) ([]backends.Record, error) {
	return s.list(ctx, holder, &client.ListOptions{Raw: &metav1.ListOptions{
		ResourceVersion:      resourceVersion,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
	}})
}

// list lists the Leases of holder's records: those carrying its selector
// labels, and those without one of them that name it in their annotations
// (see [backends.Config.LostLabelSelectors]), restricted to Config.Labels
// when it has any, so that only claim records are sent. The second kind
// is listed first, so that a record stamped with its labels in between is
// found by the listing by its labels.
func (s *store) list(ctx context.Context, holder backends.Holder, opts ...client.ListOption) ([]backends.Record, error) {
	lost, err := s.cfg.LostLabelSelectors(holder, s.cfg.Labels)
	if err != nil {
		return nil, fmt.Errorf("listing Leases of %s in %s: %w", holder, s.cfg.Namespace, err)
	}
	var unlabelled []backends.Record
	for _, sel := range lost {
		// Decoding only reads the objects: a cache need not copy them.
		recs, err := s.listBy(ctx, holder, append(slices.Clip(opts), client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy))
		if err != nil {
			return nil, err
		}
		unlabelled = append(unlabelled, recs...)
	}
	labelled, err := s.listBy(ctx, holder, append(slices.Clip(opts), client.MatchingLabels(s.cfg.SelectorLabels(holder))))
	if err != nil {
		return nil, err
	}
	return backends.KeepLost(holder, labelled, unlabelled), nil
}

// ListAll implements [backends.AllLister]: one List of the Leases in the
// claim namespace that carry Config.Labels.
func (s *store) ListAll(ctx context.Context) ([]backends.Record, error) {
	var list coordinationv1.LeaseList
	// Decoding only reads the objects: a cache need not copy them.
	opts := []client.ListOption{client.InNamespace(s.cfg.Namespace), client.UnsafeDisableDeepCopy}
	if len(s.cfg.Labels) > 0 {
		opts = append(opts, client.MatchingLabels(s.cfg.Labels))
	}
	if err := s.reader.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("listing the Leases in %s: %w", s.cfg.Namespace, err)
	}
	out := make([]backends.Record, 0, len(list.Items))
	for i := range list.Items {
		l := &list.Items[i]
		out = append(out, withSpec(s.cfg.DecodeListed(stored(l)), l))
	}
	return out, nil
}

// ListUnlabelled implements [backends.UnlabelledLister]: one List per key
// of Config.Labels, each of the Leases in the claim namespace without that
// label's value (the API server filters, so while every record carries its
// labels only the namespace's other Leases are sent).
func (s *store) ListUnlabelled(ctx context.Context) ([]backends.Record, error) {
	keys := make([]string, 0, len(s.cfg.Labels))
	for k := range s.cfg.Labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []backends.Record
	for _, k := range keys {
		req, err := labels.NewRequirement(k, selection.NotIn, []string{s.cfg.Labels[k]})
		if err != nil {
			return nil, fmt.Errorf("listing Leases without label %q in %s: %w", k, s.cfg.Namespace, err)
		}
		var list coordinationv1.LeaseList
		if err := s.reader.List(ctx, &list, client.InNamespace(s.cfg.Namespace), client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*req)}); err != nil {
			return nil, fmt.Errorf("listing Leases without label %q in %s: %w", k, s.cfg.Namespace, err)
		}
		for i := range list.Items {
			l := &list.Items[i]
			rec := withSpec(s.cfg.DecodeListed(stored(l)), l)
			if !slices.ContainsFunc(out, func(r backends.Record) bool { return r.Ref == rec.Ref }) {
				out = append(out, rec)
			}
		}
	}
	return out, nil
}

func (s *store) listBy(ctx context.Context, holder backends.Holder, opts []client.ListOption) ([]backends.Record, error) {
	var list coordinationv1.LeaseList
	opts = append(opts, client.InNamespace(s.cfg.Namespace))
	if err := s.reader.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("listing Leases of %s in %s: %w", holder, s.cfg.Namespace, err)
	}
	recs := make([]backends.Record, 0, len(list.Items))
	for i := range list.Items {
		l := &list.Items[i]
		recs = append(recs, withSpec(s.cfg.DecodeListed(stored(l)), l))
	}
	return recs, nil
}

// Encode returns the Lease that stores rec under cfg. It is exported for
// tools and golden tests that need the exact wire shape.
func Encode(cfg backends.Config, rec backends.Record) *coordinationv1.Lease {
	cfg = cfg.WithDefaults()
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   cfg.Namespace,
			Name:        cfg.RecordName(rec.Key),
			Labels:      cfg.RecordLabels(rec.Holder),
			Annotations: cfg.Annotations.Encode(rec),
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:   ptr.To(rec.Holder.Identity(HolderIdentityLimit)),
			LeaseTransitions: ptr.To(rec.Transitions),
		},
	}
	if !rec.AcquireTime.IsZero() {
		l.Spec.AcquireTime = ptr.To(metav1.NewMicroTime(rec.AcquireTime))
	}
	if !rec.RenewTime.IsZero() {
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(rec.RenewTime))
	}
	// The Lease has a field for the renew time; the annotation would say
	// the same twice.
	delete(l.Annotations, cfg.Annotations.RenewTime)
	return l
}

// Decode reads the record of key from a Lease. A Lease whose annotations do
// not form a complete record for key is reported Foreign.
func Decode(cfg backends.Config, key string, l *coordinationv1.Lease) backends.Record {
	return withSpec(cfg.DecodeStored(key, stored(l)), l)
}

func stored(l *coordinationv1.Lease) backends.Stored {
	return backends.Stored{
		Ref:         types.NamespacedName{Namespace: l.Namespace, Name: l.Name},
		UID:         l.UID,
		Version:     l.ResourceVersion,
		Annotations: l.Annotations,
		Labels:      l.Labels,
	}
}

// withSpec fills the record fields the Lease keeps in its spec.
func withSpec(rec backends.Record, l *coordinationv1.Lease) backends.Record {
	if t := l.Spec.AcquireTime; t != nil {
		rec.AcquireTime = t.Time
	}
	if t := l.Spec.RenewTime; t != nil {
		rec.RenewTime = t.Time
	}
	if n := l.Spec.LeaseTransitions; n != nil {
		rec.Transitions = *n
	}
	return rec
}

// RecordRef names the Lease that stores the record of key (normalized):
// Config.Namespace and the record name of key.
func (s *store) RecordRef(key string) (types.NamespacedName, error) { return s.ref(key), nil }

// RecordType returns an empty Lease: records are Leases, which a controller
// watches to learn of every change of a claim (see claimmw).
func (s *store) RecordType() client.Object { return &coordinationv1.Lease{} }

// CacheByObject returns the manager cache option for Leases that restricts
// the Lease informer to claim records: Leases in namespace (the claim
// namespace, backends.Config.Namespace), and of those only the ones carrying
// recordLabels (backends.Config.Labels) when it has any, so that, for example, a
// leader-election Lease in the same namespace, which changes every few
// seconds, is not cached. Use it as
//
//	cache.Options{ByObject: map[client.Object]cache.ByObject{
//		&coordinationv1.Lease{}: lease.CacheByObject(cfg.Namespace, cfg.Labels),
//	}}
func CacheByObject(namespace string, recordLabels map[string]string) cache.ByObject {
	by := cache.ByObject{Namespaces: map[string]cache.Config{namespace: {}}}
	if len(recordLabels) > 0 {
		by.Label = labels.SelectorFromSet(recordLabels)
	}
	return by
}
