package backends

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Errors a backend reports, for callers to test with errors.Is.
var (
	// ErrInvalidKey marks a key that cannot be claimed: one the protocol's
	// validation refused (claim.ErrInvalidKey is this error), or one a
	// backend cannot map to where its record would live.
	ErrInvalidKey = errors.New("invalid claim key")
	// ErrInvalidHolder marks a Holder that cannot be recorded: without a
	// name or UID (claim.ErrInvalidHolder is this error), or without the
	// apiVersion and kind a backend needs.
	ErrInvalidHolder = errors.New("invalid claim holder")
	// ErrConflict marks a conditional backend write whose precondition no
	// longer held: the record changed (or appeared, or vanished) since it was
	// read. Backends wrap it; the protocol re-reads and decides again.
	ErrConflict = errors.New("claim record changed since it was read")
	// ErrNoTarget marks a backend that has nowhere to store a key's record,
	// such as an annotation backend whose claimed object does not exist.
	ErrNoTarget = errors.New("claim target does not exist")
	// ErrWatchUnsupported marks a Watch on a backend that cannot stream
	// records.
	ErrWatchUnsupported = errors.New("claim backend cannot watch records")
)

// Record is one key's claim record as a backend stores it. The protocol
// fills the claim fields of the record it asks a backend to write; the
// backend fills the storage fields of every record it returns.
type Record struct {
	// Claim fields, written by the protocol.

	// Key is the claim key the record was written for.
	Key string
	// Holder is the current holder.
	Holder Holder
	// Successor is the holder a planned handover is prepared for, if any.
	Successor *Holder
	// Token is the fencing token of the current grant. The protocol leaves it
	// empty on the write that grants, and the backend then reports the
	// version of that write as the token; on every other write the protocol
	// passes the token on and the backend stores it.
	Token Token
	// AcquireTime is when the current holder was granted the key.
	AcquireTime time.Time
	// RenewTime is when the holder was last granted the key or renewed it,
	// by its own clock. It is the protocol's renew marker: every grant writes
	// one (a takeover, and every renewal, one later than the record's last,
	// even on a clock that has not moved), and time-based liveness
	// (pkg/expiry) judges by its changes, never by comparing it with another
	// clock.
	RenewTime time.Time
	// HandedOverBy is the UID of the holder that handed the key to Holder by
	// a committed handover (claim.Claimer.Commit), empty after any other
	// grant. It lets a Commit retried after a lost answer tell its own
	// handover from a grant it had no part in.
	HandedOverBy types.UID
	// Transitions counts how often the key changed holders.
	Transitions int32
	// Set is the claim set of the Claimer that wrote the record (see
	// Config.Set); empty on records written before sets existed. The
	// protocol stamps its own set on every write.
	Set string

	// Storage fields, filled by the backend.

	// Exists is false when the backend holds no record for the key. A record
	// that does not exist may still carry a Version (the annotation backend
	// reports the claimed object's version, which a grant must be fenced on).
	Exists bool
	// Foreign is non-empty when the stored object was not written by a
	// Claimer for this key, and says why (missing annotations, another key).
	// A foreign record blocks its key and is never written or deleted.
	Foreign string
	// Unlabelled is true when the stored object lacks the holder's selector
	// labels (someone removed them, or HolderLabels changed), so that a
	// List by those labels alone cannot find it, or, on a backend that writes
	// them, Config.Labels (a record written before they were set), so that
	// a cache restricted by them cannot see it. The protocol labels it
	// again at the holder's next Acquire.
	Unlabelled bool
	// Labels are the storing object's labels as read, on a backend that
	// stores each record on an object of its own (nil on a Shared object,
	// whose labels are its owner's). A backend that labels records keeps, on a write that keeps the holder, the labels it does not
	// set itself: another release's holder labels or Config.Labels keys (two
	// versions of an operator running side by side in a rolling upgrade), or
	// a person's. A write that changes the holder drops them.
	Labels map[string]string
	// Ref names the object that stores the record, for messages.
	Ref types.NamespacedName
	// UID and Version are the storing object's UID and resourceVersion as
	// read; every conditional write is fenced on both.
	UID     types.UID
	Version string
}

// Ours reports whether the record exists and was written by a Claimer for its
// key.
func (r Record) Ours() bool { return r.Exists && r.Foreign == "" }

// Backend stores claim records and writes them only conditionally. It makes
// no decision about who may hold a key; the claim protocol (claim.Claimer)
// does. Reads must not be
// served from a cache that can lag the API server.
//
// The contract suite in pkg/backends/backendtest states the behaviour every
// Backend must show.
type Backend interface {
	// Get returns the record of key. A missing record is a Record with
	// Exists false and a nil error.
	Get(ctx context.Context, key string) (Record, error)
	// Create stores next as the first record of its key, given prev, the
	// Record Get returned for that key with Exists false. It returns the
	// stored record, or an error wrapping [ErrConflict] when the key already
	// has a record or prev is stale.
	Create(ctx context.Context, prev, next Record) (Record, error)
	// Update replaces prev with next only if the stored record still has
	// prev's UID and Version, and returns the stored record; otherwise it
	// returns an error wrapping [ErrConflict].
	Update(ctx context.Context, prev, next Record) (Record, error)
	// Delete removes prev only if the stored record still has prev's UID and
	// Version. A record that is already gone is success; a changed record is
	// an error wrapping [ErrConflict].
	Delete(ctx context.Context, prev Record) error
	// List returns every record that may belong to holder: those with the
	// holder's selector labels, and those without one of them whose
	// annotations name the holder (found by [Config.LostLabelSelectors] and
	// kept by [KeepLost]), so that a record that lost its label is still
	// given up, renewed and released. It may return records of other
	// holders; the caller filters by UID.
	List(ctx context.Context, holder Holder) ([]Record, error)
}

// FreshLister is implemented by backends whose records are API objects
// that the API server can list from its watch cache at a stated freshness.
// A consistent List (no resourceVersion) waits until that cache has caught
// up with etcd's latest revision, which after a write of another resource
// takes up to the API server's 100 ms progress-request period; a List at
// least as fresh as a revision the cache has already seen is answered at
// once.
type FreshLister interface {
	// ListNotOlderThan is List, answered from a snapshot that includes
	// every write at or before resourceVersion, a resourceVersion of any
	// object in the same etcd (revisions are global); "0" asks for any
	// snapshot, however old. Records written after resourceVersion may be
	// missing.
	ListNotOlderThan(ctx context.Context, holder Holder, resourceVersion string) ([]Record, error)
}

// UnlabelledLister is implemented by backends that write Config.Labels on
// the objects that store records, so that a cache restricted by those
// labels (lease.CacheByObject) holds every record written since, and none
// written before the labels were configured.
type UnlabelledLister interface {
	// ListUnlabelled returns, read uncached, the records of every holder
	// stored on objects that lack one of Config.Labels or carry another
	// value for it: the records such a cache does not hold. It returns
	// nothing when Config.Labels is empty. It may return objects that
	// store no claim record (their Record is not Ours); the caller filters.
	ListUnlabelled(ctx context.Context) ([]Record, error)
}

// AllLister is implemented by backends that can list the records of every
// holder in one read, so that a process starting up finds every record
// whatever labels it carries.
type AllLister interface {
	// ListAll returns, through the backend's reader, every record stored
	// where a reader restricted by Config.Labels can see it (all of them
	// without Config.Labels), whatever its holder labels say. It may return
	// objects that store no claim record (their Record is not Ours); the
	// caller filters.
	ListAll(ctx context.Context) ([]Record, error)
}

// Factory builds a Backend for claim.New from its reader and writer and the
// storage part of its configuration, every default filled in. Backend
// packages export one; claim.WithBackend selects it.
type Factory func(reader client.Reader, writer client.Client, cfg Config) (Backend, error)

// Watcher is implemented by backends that can stream a key's record as it
// changes.
type Watcher interface {
	// Watch sends key's record now and after every change until ctx ends,
	// then closes the channel. A record that is deleted is sent with Exists
	// false. Transient watch failures are retried inside; consecutive sends
	// may be equal.
	Watch(ctx context.Context, key string) (<-chan Record, error)
}
