package claimsctl

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/backends/annotation"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
)

// State is what the plugin makes of a record. The values are printed and
// are stable: scripts may match on them.
type State string

const (
	// StateHeld means the record is ours and its holder exists (or cannot be
	// read back because the record names no kind).
	StateHeld State = "held"
	// StateHolderGone means the record is ours and its holder object is gone or
	// was recreated with another UID; the next claimant will take it over.
	StateHolderGone State = "holder gone"
	// StateForeign means the object was not written by a Claimer for its key; it
	// blocks the key until a person removes it.
	StateForeign State = "foreign"
	// StateUnknown means the holder could not be read (for instance, no RBAC to
	// get its kind); Detail says why.
	StateUnknown State = "unknown"
)

// backendLease names the Lease backend in output.
const backendLease = "Lease"

// record is one claim record as found in the cluster.
type record struct {
	rec claim.Record
	// backend is "Lease" or the resource of annotation-backed records.
	backend string
	state   State
	detail  string
	// since is when the current holder got the key, if known.
	since time.Time
	// recordedIn is set by markSplitKeys: every namespace with a record of
	// the same key, when there is more than one.
	recordedIn []string
}

// leaseRecords lists the Leases in namespace (all namespaces when empty)
// that carry a claim annotation or the holder-UID label, and decodes each.
// extra narrows the list (a --selector, a holder's label).
func (ss *session) leaseRecords(ctx context.Context, namespace string, extra ...client.ListOption) ([]record, error) {
	var list coordinationv1.LeaseList
	opts := append([]client.ListOption{client.InNamespace(namespace)}, extra...)
	if err := ss.c.List(ctx, &list, opts...); err != nil {
		return nil, fmt.Errorf("listing Leases: %w", err)
	}
	var out []record
	for i := range list.Items {
		l := &list.Items[i]
		if !ss.carriesClaim(l) {
			continue
		}
		out = append(out, ss.leaseRecord(l))
	}
	return out, nil
}

// leaseRecord decodes one Lease. A Lease whose name is not the record name
// of the key it names was not made by a Claimer of this configuration.
func (ss *session) leaseRecord(l *coordinationv1.Lease) record {
	key := l.Annotations[ss.s.cfg.Annotations.Key]
	rec := lease.Decode(ss.s.cfg, key, l)
	if rec.Foreign == "" && ss.s.recordName(key) != l.Name {
		rec.Foreign = fmt.Sprintf("name %q is not the record name of key %q", l.Name, key)
	}
	r := record{rec: rec, backend: backendLease, since: rec.AcquireTime}
	if r.since.IsZero() {
		r.since = l.CreationTimestamp.Time
	}
	return r
}

// carriesClaim reports whether obj bears any sign of a claim record: one of
// the record annotations or the holder-UID label.
func (ss *session) carriesClaim(obj metav1.Object) bool {
	if _, ok := obj.GetLabels()[ss.s.holderUIDLabel]; ok {
		return true
	}
	for _, k := range ss.s.cfg.Annotations.Owned() {
		if _, ok := obj.GetAnnotations()[k]; ok {
			return true
		}
	}
	return false
}

// annotationRecords lists the objects of resource in namespace (all when
// empty) that carry claim annotations, metadata only, and decodes each with
// the annotation backend's decoder.
func (ss *session) annotationRecords(ctx context.Context, resource, namespace string, extra ...client.ListOption) ([]record, error) {
	gvk, err := ss.kindFor(resource)
	if err != nil {
		return nil, fmt.Errorf("--annotation-backend: %w", err)
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	opts := append([]client.ListOption{client.InNamespace(namespace)}, extra...)
	if err := ss.c.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing %s: %w", resource, err)
	}
	var out []record
	for i := range list.Items {
		obj := &list.Items[i]
		key := obj.Annotations[ss.s.cfg.Annotations.Key]
		rec := annotation.Decode(ss.s.cfg, key, obj)
		if !rec.Exists {
			// Only a holder label, no annotation: no record.
			continue
		}
		out = append(out, record{rec: rec, backend: resource})
	}
	return out, nil
}

// kindFor resolves a resource argument (plural, singular or short name,
// optionally with .group or .version.group) to its kind.
func (ss *session) kindFor(resource string) (schema.GroupVersionKind, error) {
	mapper := ss.c.RESTMapper()
	if gvr, _ := schema.ParseResourceArg(resource); gvr != nil {
		if gvk, err := mapper.KindFor(*gvr); err == nil {
			return gvk, nil
		}
	}
	gvk, err := mapper.KindFor(schema.ParseGroupResource(resource).WithVersion(""))
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("resolving resource %q: %w", resource, err)
	}
	return gvk, nil
}

// judge sets each record's state: foreign records as such, the others by
// reading their holder back with the claim package's default liveness.
func (ss *session) judge(ctx context.Context, recs []record) {
	alive := claim.HolderExists(ss.c)
	for i := range recs {
		r := &recs[i]
		if r.rec.Foreign != "" {
			r.state, r.detail = StateForeign, r.rec.Foreign
			continue
		}
		ok, err := alive.Alive(ctx, r.rec)
		switch {
		case err != nil:
			r.state, r.detail = StateUnknown, err.Error()
		case ok:
			r.state = StateHeld
		default:
			r.state, r.detail = StateHolderGone, "the holder object is gone or was recreated with another UID"
		}
	}
}

// sortRecords orders records by key, then by where they are stored.
func sortRecords(recs []record) {
	sort.SliceStable(recs, func(i, j int) bool {
		a, b := recs[i], recs[j]
		if a.rec.Key != b.rec.Key {
			return a.rec.Key < b.rec.Key
		}
		if a.backend != b.backend {
			return a.backend < b.backend
		}
		return a.rec.Ref.String() < b.rec.Ref.String()
	})
}

// holderRef is the display form kind/namespace/name of a holder.
func holderRef(h claim.Holder) string {
	if h.Name == "" {
		return ""
	}
	parts := make([]string, 0, 3)
	if h.Kind != "" {
		parts = append(parts, h.Kind)
	}
	if h.Namespace != "" {
		parts = append(parts, h.Namespace)
	}
	return strings.Join(append(parts, h.Name), "/")
}

// waiter is an object whose claim condition says it waits for a key.
type waiter struct {
	holder claim.Holder
	// reason is the reason of its claim condition.
	reason string
}

// waiters lists the objects of holder's kind, in every namespace, whose
// claim condition says they wait for holder to give up key (see
// waitsBehind). Claimants of another kind, or whose operator words its
// messages itself, are not found. A holder recorded without its kind has no
// kind to list.
func (ss *session) waiters(ctx context.Context, key string, holder claim.Holder) ([]waiter, error) {
	if holder.APIVersion == "" || holder.Kind == "" {
		return nil, nil
	}
	gv, err := schema.ParseGroupVersion(holder.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("listing objects waiting for claim %q: holder apiVersion %q: %w", key, holder.APIVersion, err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gv.WithKind(holder.Kind + "List"))
	if err := ss.c.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing %s objects waiting for claim %q: %w", holder.Kind, key, err)
	}
	var out []waiter
	for i := range list.Items {
		obj := &list.Items[i]
		if obj.GetUID() == holder.UID {
			continue
		}
		cond, err := conditionOf(obj, ss.s.conditionType)
		if err != nil {
			continue // a condition that does not parse names no key
		}
		if waitsBehind(cond, key, holder, claim.HolderOf(obj)) {
			out = append(out, waiter{holder: claim.HolderOf(obj), reason: cond.Reason})
		}
	}
	return out, nil
}

// waitsBehind reports whether cond is a claim condition written with the
// claim's default messages (claim.DefaultMessage), as the middleware shows
// them to self under any disclosure (a holder in another namespace is not
// named by default, and no holder under DiscloseNone), for an object parked
// behind holder on key, or waiting for holder to hand key over. An object
// waiting for the same key in another install (another claim namespace,
// another record) names another holder, and does not count, unless its
// install names none (DiscloseNone).
func waitsBehind(cond *metav1.Condition, key string, holder, self claim.Holder) bool {
	if cond == nil || cond.Status == metav1.ConditionTrue {
		return false
	}
	parked := claim.Outcome{Reason: claim.ReasonHeldElsewhere, Key: key, Holder: holder}
	parked.Message = claim.DefaultMessage(parked)
	waiting := claim.Outcome{Reason: claim.ReasonWaitingForHandover, Key: key, Previous: holder}
	waiting.Message = claim.DefaultMessage(waiting)
	for _, d := range []claimmw.Disclosure{claimmw.DiscloseAll, claimmw.DiscloseSameNamespace, claimmw.DiscloseNone} {
		wait := strings.TrimSuffix(d.Message(waiting, self), ".")
		if cond.Message == d.Message(parked, self) || cond.Message == wait+"." || strings.HasPrefix(cond.Message, wait+": ") {
			return true
		}
	}
	return false
}

// markSplitKeys finds the keys recorded in more than one namespace among
// recs, sets recordedIn on each of their records, and returns one sentence
// per such key, in key order, naming each namespace and its holder. Two
// installs of an operator with different claim namespaces each grant a key
// on their own: nothing in the protocol stops both from handing it out, so
// this is the one place it shows. So do two Claimers in one namespace that
// name records differently (another Prefix or NameFunc): a key recorded
// under more than one name in one namespace is flagged too.
func markSplitKeys(recs []record) []string {
	byKey := map[string][]int{}
	var keys []string
	for i, r := range recs {
		if r.rec.Key == "" {
			// A leftover label without a key annotation names no key.
			continue
		}
		if _, ok := byKey[r.rec.Key]; !ok {
			keys = append(keys, r.rec.Key)
		}
		byKey[r.rec.Key] = append(byKey[r.rec.Key], i)
	}
	sort.Strings(keys)
	var warnings []string
	for _, key := range keys {
		idx := byKey[key]
		namespaces := map[string]bool{}
		for _, i := range idx {
			namespaces[recs[i].rec.Ref.Namespace] = true
		}
		if len(namespaces) < 2 {
			if w := namesSplit(key, recs, idx); w != "" {
				warnings = append(warnings, w)
			}
			continue
		}
		list := slices.Sorted(maps.Keys(namespaces))
		where := make([]string, 0, len(idx))
		for _, i := range idx {
			recs[i].recordedIn = list
			holder := holderRef(recs[i].rec.Holder)
			if holder == "" {
				holder = "no holder"
			}
			where = append(where, fmt.Sprintf("%s (%s, %s)", recs[i].rec.Ref.Namespace, holder, recs[i].state))
		}
		warnings = append(warnings, fmt.Sprintf("key %q is recorded in %d namespaces: %s. The claim namespace is the whole exclusion boundary: "+
			"installs with different claim namespaces each grant the key, so it can have a holder in each. Give every operator that claims it one claim namespace.",
			key, len(list), strings.Join(where, ", ")))
	}
	return warnings
}

// namesSplit returns the warning for key when its records idx, all in one
// namespace, are more than one object, or "".
func namesSplit(key string, recs []record, idx []int) string {
	objects := map[string]bool{}
	for _, i := range idx {
		objects[recs[i].rec.Ref.Name] = true
	}
	if len(objects) < 2 {
		return ""
	}
	where := make([]string, 0, len(idx))
	for _, i := range idx {
		holder := holderRef(recs[i].rec.Holder)
		if holder == "" {
			holder = "no holder"
		}
		where = append(where, fmt.Sprintf("%s (%s, %s)", recs[i].rec.Ref.Name, holder, recs[i].state))
	}
	sort.Strings(where)
	return fmt.Sprintf("key %q is recorded under %d names in namespace %s: %s. Claimers exclude each other only when they name "+
		"a key's record alike: Claimers with another Prefix or NameFunc each grant the key. Give every Claimer of the key one naming.",
		key, len(objects), recs[idx[0]].rec.Ref.Namespace, strings.Join(where, ", "))
}
