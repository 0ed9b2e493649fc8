package clusterclaim

import (
	"context"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
)

// LeasesInKeyNamespace is a backends.Factory that keeps each key's Lease
// in the namespace the key starts with (Config.Normalize checked it), where
// the hand-written claim kept it: the Lease backend, one namespace per call.
// A holder's sweep lists its own namespace, which is its clusters'.
func LeasesInKeyNamespace(reader client.Reader, writer client.Client, cfg backends.Config) (backends.Backend, error) {
	return leasesInKeyNamespace{reader: reader, writer: writer, cfg: cfg}, nil
}

type leasesInKeyNamespace struct {
	reader client.Reader
	writer client.Client
	cfg    backends.Config
}

func (b leasesInKeyNamespace) in(namespace string) (backends.Backend, error) {
	cfg := b.cfg
	cfg.Namespace = namespace
	return lease.Backend(b.reader, b.writer, cfg)
}

func (b leasesInKeyNamespace) of(key string) (backends.Backend, error) {
	namespace, _, _ := strings.Cut(key, "/")
	return b.in(namespace)
}

func (b leasesInKeyNamespace) Get(ctx context.Context, key string) (claim.Record, error) {
	s, err := b.of(key)
	if err != nil {
		return claim.Record{}, err
	}
	return s.Get(ctx, key)
}

func (b leasesInKeyNamespace) Create(ctx context.Context, prev, next claim.Record) (claim.Record, error) {
	s, err := b.of(next.Key)
	if err != nil {
		return claim.Record{}, err
	}
	return s.Create(ctx, prev, next)
}

func (b leasesInKeyNamespace) Update(ctx context.Context, prev, next claim.Record) (claim.Record, error) {
	s, err := b.of(next.Key)
	if err != nil {
		return claim.Record{}, err
	}
	return s.Update(ctx, prev, next)
}

func (b leasesInKeyNamespace) Delete(ctx context.Context, prev claim.Record) error {
	s, err := b.in(prev.Ref.Namespace)
	if err != nil {
		return err
	}
	return s.Delete(ctx, prev)
}

func (b leasesInKeyNamespace) List(ctx context.Context, holder claim.Holder) ([]claim.Record, error) {
	s, err := b.in(holder.Namespace)
	if err != nil {
		return nil, err
	}
	return s.List(ctx, holder)
}
