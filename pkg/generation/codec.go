package generation

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ocf-claim/claim/pkg/backends"
)

// Keys of the labels and annotations the Kubernetes backend writes.
const (
	// ClaimAnnotation holds a claim Lease's record as JSON ([ClaimWire]).
	ClaimAnnotation = backends.Domain + "/generation-claim"
	// KindLabel says which kind of generation-backend object an object is:
	// KindClaim or KindGeneration.
	KindLabel = backends.Domain + "/generation-kind"
	// ServiceLabel selects the generations of one service (its value made
	// valid by backends.LabelValue).
	ServiceLabel = backends.Domain + "/generation-service"

	KindClaim      = "claim"
	KindGeneration = "generation"

	// ClaimPrefix and GenerationPrefix start the names of claim Leases and
	// generation ConfigMaps, followed by 40 hex characters of the sha256 of
	// the claim name or generation ID (backends.HashName).
	ClaimPrefix      = "generation-claim-"
	GenerationPrefix = "generation-"
)

// Keys of a generation ConfigMap's data.
const (
	dataID        = "id"
	dataService   = "service"
	dataInstance  = "instance"
	dataState     = "state"
	dataStartedAt = "startedAt"
	dataUpdatedAt = "updatedAt"
	dataReason    = "reason"
)

// holderIdentityLimit bounds spec.holderIdentity, as client-go's leader
// election expects of that field.
const holderIdentityLimit = 128

// ClaimWire is the JSON form of a claim record in ClaimAnnotation. Token
// zero on an owned record means "the resourceVersion of the write that
// created the Lease": the first grant's token is the version of its own
// write, which no earlier write of the cluster can exceed.
type ClaimWire struct {
	Name             string           `json:"name,omitempty"`
	Owner            string           `json:"owner,omitempty"`
	Token            uint64           `json:"token,omitempty"`
	Phase            ClaimPhase       `json:"phase"`
	AcquiredAt       *time.Time       `json:"acquiredAt,omitempty"`
	ExpiresAt        *time.Time       `json:"expiresAt,omitempty"`
	PreviousOwner    string           `json:"previousOwner,omitempty"`
	PendingSuccessor string           `json:"pendingSuccessor,omitempty"`
	DrainStatus      string           `json:"drainStatus,omitempty"`
	TransferStatus   string           `json:"transferStatus,omitempty"`
	LastHeartbeat    *time.Time       `json:"lastHeartbeat,omitempty"`
	Reason           TransitionReason `json:"reason,omitempty"`
	TTL              string           `json:"ttl,omitempty"`
	Outcomes         []OutcomeWire    `json:"outcomes,omitempty"`
}

// OutcomeWire is one remembered outcome in ClaimWire.
type OutcomeWire struct {
	ID      OperationID `json:"id"`
	Request string      `json:"request"`
	Record  ClaimWire   `json:"record"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func timeOf(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

func recordWire(r ClaimRecord) ClaimWire {
	return ClaimWire{
		Name: r.Name, Owner: r.OwnerGeneration, Token: uint64(r.FencingToken), Phase: r.Phase,
		AcquiredAt: timePtr(r.AcquiredAt), ExpiresAt: timePtr(r.ExpiresAt), PreviousOwner: r.PreviousOwner,
		PendingSuccessor: r.PendingSuccessor, DrainStatus: r.DrainStatus, TransferStatus: r.TransferStatus,
		LastHeartbeat: timePtr(r.LastHeartbeat), Reason: r.Reason,
	}
}

func (w ClaimWire) record() ClaimRecord {
	return ClaimRecord{
		Name: w.Name, OwnerGeneration: w.Owner, FencingToken: FencingToken(w.Token), Phase: w.Phase,
		AcquiredAt: timeOf(w.AcquiredAt), ExpiresAt: timeOf(w.ExpiresAt), PreviousOwner: w.PreviousOwner,
		PendingSuccessor: w.PendingSuccessor, DrainStatus: w.DrainStatus, TransferStatus: w.TransferStatus,
		LastHeartbeat: timeOf(w.LastHeartbeat), Reason: w.Reason,
	}
}

// encodeClaim returns the annotation value of s.
func encodeClaim(s StoredClaim) string {
	w := recordWire(s.Record)
	if s.TTL > 0 {
		w.TTL = s.TTL.String()
	}
	for _, o := range s.Outcomes {
		// The claim's name is the Lease's; it is not repeated per outcome.
		r := recordWire(o.Record)
		r.Name = ""
		w.Outcomes = append(w.Outcomes, OutcomeWire{ID: o.ID, Request: o.Request, Record: r})
	}
	b, _ := json.Marshal(w) //nolint:errchkjson // strings, numbers and times always marshal
	return string(b)
}

// errForeign marks a Lease at a claim's name that this backend did not
// write for that claim.
var errForeign = errors.New("not a generation claim record")

// parseVersion reads a resourceVersion as a number: the record's Version,
// and the token of a grant by create.
func parseVersion(rv string) (uint64, error) {
	v, err := strconv.ParseUint(rv, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Errorf("resourceVersion %q exceeds %d: %w", rv, uint64(math.MaxUint64), ErrTokenOverflow)
	case err != nil:
		return 0, fmt.Errorf("%w: resourceVersion %q is not a decimal number, as fencing tokens need (KEP-5504)", ErrBackend, rv)
	}
	return v, nil
}

// DecodeClaim reads the stored claim of name from a Lease. A Lease without
// a record of name is an error wrapping ErrBackend.
func DecodeClaim(name string, l *coordinationv1.Lease) (*StoredClaim, error) {
	raw, ok := l.Annotations[ClaimAnnotation]
	if !ok {
		return nil, fmt.Errorf("%w: Lease %s/%s: %w: annotation %s is missing", ErrBackend, l.Namespace, l.Name, errForeign, ClaimAnnotation)
	}
	var w ClaimWire
	if err := json.Unmarshal([]byte(raw), &w); err != nil {
		return nil, fmt.Errorf("%w: Lease %s/%s: %w: annotation %s: %w", ErrBackend, l.Namespace, l.Name, errForeign, ClaimAnnotation, err)
	}
	if w.Name != name {
		return nil, fmt.Errorf("%w: Lease %s/%s: %w: it records claim %q, not %q", ErrBackend, l.Namespace, l.Name, errForeign, w.Name, name)
	}
	version, err := parseVersion(l.ResourceVersion)
	if err != nil {
		return nil, fmt.Errorf("decoding Lease %s/%s: %w", l.Namespace, l.Name, err)
	}
	s := &StoredClaim{Record: w.record()}
	if w.TTL != "" {
		if s.TTL, err = time.ParseDuration(w.TTL); err != nil {
			return nil, fmt.Errorf("%w: Lease %s/%s: %w: ttl %q: %w", ErrBackend, l.Namespace, l.Name, errForeign, w.TTL, err)
		}
	}
	for _, o := range w.Outcomes {
		r := o.Record.record()
		r.Name = name
		s.Outcomes = append(s.Outcomes, RememberedOutcome{ID: o.ID, Request: o.Request, Record: r})
	}
	s.AssignToken(FencingToken(version))
	s.Record.Version = version
	return s, nil
}

// encodeLease returns the Lease that stores s in namespace under name. The
// Lease's spec mirrors the record for kubectl and dashboards; it is never
// read back.
func encodeLease(namespace, name string, labels map[string]string, s StoredClaim) *coordinationv1.Lease {
	r := s.Record
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   namespace,
			Name:        name,
			Labels:      labels,
			Annotations: map[string]string{ClaimAnnotation: encodeClaim(s)},
		},
	}
	if r.Phase.Owned() {
		l.Spec.HolderIdentity = ptr.To(backends.Bound(r.OwnerGeneration, holderIdentityLimit))
		l.Spec.LeaseDurationSeconds = ptr.To(int32(min(math.Ceil(s.TTL.Seconds()), math.MaxInt32)))
	}
	if !r.AcquiredAt.IsZero() {
		l.Spec.AcquireTime = ptr.To(metav1.NewMicroTime(r.AcquiredAt))
	}
	if !r.LastHeartbeat.IsZero() {
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(r.LastHeartbeat))
	}
	return l
}

// encodeGeneration returns the ConfigMap that stores g.
func encodeGeneration(namespace, name string, labels map[string]string, g Generation) *corev1.ConfigMap {
	data := map[string]string{
		dataID: g.ID, dataService: g.Service, dataState: string(g.State),
		dataStartedAt: g.StartedAt.UTC().Format(time.RFC3339Nano), dataUpdatedAt: g.UpdatedAt.UTC().Format(time.RFC3339Nano),
	}
	if g.Instance != "" {
		data[dataInstance] = g.Instance
	}
	if g.Reason != "" {
		data[dataReason] = g.Reason
	}
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels}, Data: data}
}

// decodeGeneration reads generation id from a ConfigMap.
func decodeGeneration(id string, cm *corev1.ConfigMap) (*Generation, error) {
	d := cm.Data
	if d[dataID] != id {
		return nil, fmt.Errorf("%w: ConfigMap %s/%s records generation %q, not %q", ErrBackend, cm.Namespace, cm.Name, d[dataID], id)
	}
	g := &Generation{ID: id, Service: d[dataService], Instance: d[dataInstance], State: GenerationState(d[dataState]), Reason: d[dataReason]}
	for _, f := range []struct {
		key string
		t   *time.Time
	}{{dataStartedAt, &g.StartedAt}, {dataUpdatedAt, &g.UpdatedAt}} {
		t, err := time.Parse(time.RFC3339Nano, d[f.key])
		if err != nil {
			return nil, fmt.Errorf("%w: ConfigMap %s/%s: %s: %w", ErrBackend, cm.Namespace, cm.Name, f.key, err)
		}
		*f.t = t
	}
	return g, nil
}
