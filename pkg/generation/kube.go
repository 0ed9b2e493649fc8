package generation

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/backends"
)

// maxAttempts bounds how often one call re-reads and decides again after
// its conditional write lost a race.
const maxAttempts = 8

// Option configures New.
type Option func(*KubeBackend)

// WithClock sets the clock every time is read from. Default: RealClock. A
// nil clock keeps the default.
func WithClock(c Clock) Option {
	return func(b *KubeBackend) {
		if c != nil {
			b.clock = c
		}
	}
}

// WithLabels adds labels to every object the backend creates, for instance
// to restrict a cache to them.
func WithLabels(labels map[string]string) Option {
	return func(b *KubeBackend) { maps.Copy(b.labels, labels) }
}

// KubeBackend is the Backend on the API server. It is safe for concurrent
// use. Build it with [New].
//
// Storage: each claim is one coordination.k8s.io/v1 Lease named
// ClaimPrefix + sha256(claim name) whose ClaimAnnotation holds the record,
// its TTL and the remembered outcomes as JSON, and whose spec mirrors the
// owner for people (holderIdentity, leaseDurationSeconds, acquireTime,
// renewTime; never read back). Each generation is one ConfigMap named
// GenerationPrefix + sha256(ID). A Lease rather than a ConfigMap holds a
// claim because it is what a claim is to the cluster's tools (kubectl get
// leases shows the owner) and to RBAC (granting leases does not grant the
// namespace's configuration); the annotation bounds the record to 256 KiB,
// which RememberedOutcomes keeps it far below.
//
// Every claim mutation is one read of the Lease (and of the named
// generation's ConfigMap), a pure decision ([Decide]), and one Create, or
// one Update conditional on the UID and resourceVersion read; a write that
// lost a race is decided again from a new read. Reads are never cached.
//
// Fencing tokens follow the project's token rule (pkg/backends.Token): the
// first grant's token is the resourceVersion of the write that created the
// Lease, and every later grant's is the previous token plus one, which is at
// most that grant's own resourceVersion. Kubernetes orders resourceVersions
// by write (KEP-5504), so a Lease deleted and created again starts above
// every token it ever carried. A write to the Lease by anything else
// between its creation and the next write of this backend raises the first
// grant's token (and makes its owner's token stale); nothing else does.
//
// RBAC: get, list, watch, create and update on leases.coordination.k8s.io
// and get, create and update on configmaps, in the backend's namespace
// only.
type KubeBackend struct {
	c         client.WithWatch
	namespace string
	clock     Clock
	labels    map[string]string
	obs       Observer

	mu      sync.Mutex
	closed  bool
	watches map[*struct{}]context.CancelFunc
}

var _ Backend = (*KubeBackend)(nil)

// New returns the Backend that stores claims and generations in namespace
// through c, which must read from the API server, not from a cache, and
// must be able to watch (client.NewWithWatch).
func New(c client.WithWatch, namespace string, opts ...Option) (*KubeBackend, error) {
	var errs []error
	if c == nil {
		errs = append(errs, errors.New("client is nil"))
	}
	if namespace == "" {
		errs = append(errs, errors.New("namespace is empty; claims and generations need a namespace to live in"))
	}
	b := &KubeBackend{c: c, namespace: namespace, clock: RealClock, labels: map[string]string{}, watches: map[*struct{}]context.CancelFunc{}}
	for _, o := range opts {
		if o != nil {
			o(b)
		}
	}
	for k, v := range b.labels {
		if probs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(probs) > 0 {
			errs = append(errs, fmt.Errorf("label %q=%q: %s", k, v, strings.Join(probs, "; ")))
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("configuring generation backend: %w", errors.Join(errs...))
	}
	return b, nil
}

func (b *KubeBackend) claimRef(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: b.namespace, Name: backends.HashName(ClaimPrefix, name)}
}

func (b *KubeBackend) generationRef(id string) types.NamespacedName {
	return types.NamespacedName{Namespace: b.namespace, Name: backends.HashName(GenerationPrefix, id)}
}

func (b *KubeBackend) objectLabels(kind string, extra map[string]string) map[string]string {
	out := maps.Clone(b.labels)
	out[KindLabel] = kind
	maps.Copy(out, extra)
	return out
}

func (b *KubeBackend) check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrBackend, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return fmt.Errorf("%w: backend closed", ErrBackend)
	}
	return nil
}

// readError wraps an error of a read, which changed nothing.
func readError(what string, err error) error {
	return fmt.Errorf("%w: reading %s: %w", ErrBackend, what, err)
}

// writeError wraps an error of a write: refusals changed nothing; anything
// else (a timeout, a lost connection, an internal error) may have been
// applied, and is ambiguous.
func writeError(what string, err error) error {
	switch {
	case apierrors.IsBadRequest(err), apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsUnauthorized(err),
		apierrors.IsNotFound(err), apierrors.IsMethodNotSupported(err), apierrors.IsNotAcceptable(err),
		apierrors.IsUnsupportedMediaType(err), apierrors.IsRequestEntityTooLargeError(err), apierrors.IsTooManyRequests(err):
		return fmt.Errorf("%w: writing %s: %w", ErrBackend, what, err)
	}
	return fmt.Errorf("%w: %w: writing %s: %w", ErrAmbiguousOutcome, ErrBackend, what, err)
}

// readClaim returns the Lease and stored claim of name, both nil when the
// claim has no record.
func (b *KubeBackend) readClaim(ctx context.Context, name string) (*coordinationv1.Lease, *StoredClaim, error) {
	ref := b.claimRef(name)
	var l coordinationv1.Lease
	if err := b.c.Get(ctx, ref, &l); err != nil {
		if apierrors.IsNotFound(err) {
			b.obs.Forget(name)
			return nil, nil, nil
		}
		return nil, nil, readError("Lease "+ref.String(), err)
	}
	s, err := DecodeClaim(name, &l)
	if err != nil {
		return nil, nil, err
	}
	return &l, s, nil
}

func (b *KubeBackend) readGeneration(ctx context.Context, id string) (*corev1.ConfigMap, *Generation, error) {
	ref := b.generationRef(id)
	var cm corev1.ConfigMap
	if err := b.c.Get(ctx, ref, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil, nil
		}
		return nil, nil, readError("ConfigMap "+ref.String(), err)
	}
	g, err := decodeGeneration(id, &cm)
	if err != nil {
		return nil, nil, err
	}
	return &cm, g, nil
}

// GetClaim implements Backend.
func (b *KubeBackend) GetClaim(ctx context.Context, name string) (*ClaimRecord, error) {
	if err := firstErr(b.check(ctx), checkName("claim name", name)); err != nil {
		return nil, fmt.Errorf("getting claim %q: %w", name, err)
	}
	_, s, err := b.readClaim(ctx, name)
	switch {
	case err != nil:
		return nil, fmt.Errorf("getting claim %q: %w", name, err)
	case s == nil:
		return nil, fmt.Errorf("getting claim %q: %w", name, ErrClaimNotFound)
	}
	b.obs.Observe(s.Record, s.TTL, b.clock.Now())
	rec := s.Record
	return &rec, nil
}

// GetGeneration implements Backend.
func (b *KubeBackend) GetGeneration(ctx context.Context, id string) (*Generation, error) {
	if err := firstErr(b.check(ctx), checkName("generation ID", id)); err != nil {
		return nil, fmt.Errorf("getting generation %q: %w", id, err)
	}
	_, g, err := b.readGeneration(ctx, id)
	switch {
	case err != nil:
		return nil, fmt.Errorf("getting generation %q: %w", id, err)
	case g == nil:
		return nil, fmt.Errorf("getting generation %q: %w", id, ErrGenerationNotFound)
	}
	return g, nil
}

// RegisterGeneration implements Backend: one Create of the generation's
// ConfigMap, or nothing when it is registered already.
func (b *KubeBackend) RegisterGeneration(ctx context.Context, gen Generation) error {
	if err := b.writeGeneration(ctx, gen, func(cur *Generation) (*Generation, error) {
		return DecideRegister(cur, gen, b.clock.Now())
	}); err != nil {
		return fmt.Errorf("registering generation %q: %w", gen.ID, err)
	}
	return nil
}

// UpdateGeneration implements Backend: one Update of the generation's
// ConfigMap conditional on the resourceVersion the transition was checked
// against.
func (b *KubeBackend) UpdateGeneration(ctx context.Context, gen Generation) error {
	if err := b.writeGeneration(ctx, gen, func(cur *Generation) (*Generation, error) {
		return DecideUpdate(cur, gen, b.clock.Now())
	}); err != nil {
		return fmt.Errorf("updating generation %q: %w", gen.ID, err)
	}
	return nil
}

func (b *KubeBackend) writeGeneration(ctx context.Context, gen Generation, decide func(*Generation) (*Generation, error)) error {
	if err := firstErr(b.check(ctx), checkName("Generation.ID", gen.ID)); err != nil {
		return err
	}
	for range maxAttempts {
		cm, cur, err := b.readGeneration(ctx, gen.ID)
		if err != nil {
			return err
		}
		next, err := decide(cur)
		if err != nil || next == nil {
			return err
		}
		ref := b.generationRef(gen.ID)
		obj := encodeGeneration(ref.Namespace, ref.Name, b.objectLabels(KindGeneration, map[string]string{ServiceLabel: backends.LabelValue(next.Service)}), *next)
		if cm == nil {
			err = b.c.Create(ctx, obj)
		} else {
			obj.UID, obj.ResourceVersion = cm.UID, cm.ResourceVersion
			err = b.c.Update(ctx, obj)
		}
		switch {
		case err == nil:
			return nil
		case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err), cm != nil && apierrors.IsNotFound(err):
			continue
		}
		return writeError("ConfigMap "+ref.String(), err)
	}
	return fmt.Errorf("%w: the generation kept changing under %d attempts: %w", ErrBackend, maxAttempts, backends.ErrConflict)
}

// AcquireClaim implements Backend.
func (b *KubeBackend) AcquireClaim(ctx context.Context, req AcquireRequest) (*ClaimRecord, error) {
	return b.mutate(ctx, "acquiring", req)
}

// RenewClaim implements Backend.
func (b *KubeBackend) RenewClaim(ctx context.Context, req RenewRequest) (*ClaimRecord, error) {
	return b.mutate(ctx, "renewing", req)
}

// PrepareTransfer implements Backend.
func (b *KubeBackend) PrepareTransfer(ctx context.Context, req TransferRequest) (*ClaimRecord, error) {
	return b.mutate(ctx, "preparing transfer of", req)
}

// CommitTransfer implements Backend.
func (b *KubeBackend) CommitTransfer(ctx context.Context, req CommitRequest) (*ClaimRecord, error) {
	return b.mutate(ctx, "committing transfer of", req)
}

// AbortTransfer implements Backend.
func (b *KubeBackend) AbortTransfer(ctx context.Context, req AbortRequest) (*ClaimRecord, error) {
	return b.mutate(ctx, "aborting transfer of", req)
}

// ReleaseClaim implements Backend. The Lease stays, unowned, so that the
// next grant's token is greater than the released one.
func (b *KubeBackend) ReleaseClaim(ctx context.Context, req ReleaseRequest) error {
	_, err := b.mutate(ctx, "releasing", req)
	return err
}

// mutate reads, decides and writes once, conditionally; a write that lost a
// race is decided again from a new read.
func (b *KubeBackend) mutate(ctx context.Context, verb string, req Request) (*ClaimRecord, error) {
	name := req.claimName()
	if err := firstErr(b.check(ctx), req.validate()); err != nil {
		return nil, fmt.Errorf("%s claim %q: %w", verb, name, err)
	}
	for range maxAttempts {
		rec, retry, err := b.mutateOnce(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("%s claim %q: %w", verb, name, err)
		}
		if !retry {
			return rec, nil
		}
	}
	return nil, fmt.Errorf("%s claim %q: %w: the record kept changing under %d attempts: %w", verb, name, ErrBackend, maxAttempts, backends.ErrConflict)
}

func (b *KubeBackend) mutateOnce(ctx context.Context, req Request) (rec *ClaimRecord, retry bool, err error) {
	name := req.claimName()
	l, cur, err := b.readClaim(ctx, name)
	if err != nil {
		return nil, false, err
	}
	f := Facts{Now: b.clock.Now()}
	if cur != nil {
		f.Expired = b.obs.Observe(cur.Record, cur.TTL, f.Now)
	}
	if id := req.named(); id != "" {
		if _, f.Generation, err = b.readGeneration(ctx, id); err != nil {
			return nil, false, err
		}
	}
	d, err := Decide(cur, req, f)
	if err != nil {
		return nil, false, err
	}
	if d.Next == nil {
		return &d.Result, false, nil
	}
	ref := b.claimRef(name)
	obj := encodeLease(ref.Namespace, ref.Name, b.objectLabels(KindClaim, nil), *d.Next)
	if l == nil {
		err = b.c.Create(ctx, obj)
	} else {
		// UID and resourceVersion in the body are both preconditions of an
		// Update: a Lease deleted and created again, or written since it
		// was read, answers Conflict.
		obj.UID, obj.ResourceVersion = l.UID, l.ResourceVersion
		err = b.c.Update(ctx, obj)
	}
	switch {
	case err == nil:
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err), l != nil && apierrors.IsNotFound(err):
		return nil, true, nil
	default:
		return nil, false, writeError("Lease "+ref.String(), err)
	}
	stored, err := DecodeClaim(name, obj)
	if err != nil {
		return nil, false, err
	}
	b.obs.Observe(stored.Record, stored.TTL, f.Now)
	return &stored.Record, false, nil
}

// Close ends every watch of this backend and makes its later calls fail
// with ErrBackend. It does not close the client.
func (b *KubeBackend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, cancel := range b.watches {
		cancel()
	}
	b.watches = map[*struct{}]context.CancelFunc{}
	return nil
}
