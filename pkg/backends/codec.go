package backends

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// successorWire is the JSON form of a pending successor in its annotation.
type successorWire struct {
	APIVersion string    `json:"apiVersion,omitempty"`
	Kind       string    `json:"kind,omitempty"`
	Namespace  string    `json:"namespace,omitempty"`
	Name       string    `json:"name"`
	UID        types.UID `json:"uid"`
}

// Owned returns the annotation keys a Claimer writes; a backend that stores
// records beside other annotations removes exactly these on release.
func (a Annotations) Owned() []string {
	return []string{a.Key, a.HolderAPIVersion, a.HolderKind, a.HolderNamespace, a.HolderName, a.HolderUID, a.Token, a.Successor, a.HandedOverBy, a.Set, a.RenewTime}
}

// Encode returns the annotations that carry rec's claim fields. Optional
// fields that are empty are left out, so Encode of a record and Decode of
// its annotations round-trip.
func (a Annotations) Encode(rec Record) map[string]string {
	out := map[string]string{
		a.Key:             rec.Key,
		a.HolderNamespace: rec.Holder.Namespace,
		a.HolderName:      rec.Holder.Name,
		a.HolderUID:       string(rec.Holder.UID),
	}
	if rec.Holder.APIVersion != "" {
		out[a.HolderAPIVersion] = rec.Holder.APIVersion
	}
	if rec.Holder.Kind != "" {
		out[a.HolderKind] = rec.Holder.Kind
	}
	if !rec.Token.IsZero() {
		out[a.Token] = rec.Token.String()
	}
	if rec.Set != "" {
		out[a.Set] = rec.Set
	}
	if !rec.RenewTime.IsZero() {
		out[a.RenewTime] = rec.RenewTime.UTC().Format(metav1.RFC3339Micro)
	}
	if rec.HandedOverBy != "" {
		out[a.HandedOverBy] = string(rec.HandedOverBy)
	}
	if s := rec.Successor; s != nil {
		b, _ := json.Marshal(successorWire{APIVersion: s.APIVersion, Kind: s.Kind, Namespace: s.Namespace, Name: s.Name, UID: s.UID}) //nolint:errchkjson // plain strings always marshal
		out[a.Successor] = string(b)
	}
	return out
}

// Decode reads the claim fields of key's record from annotations. present
// reports whether any annotation of ours is there at all. foreign is empty
// when the annotations form a complete record for key and otherwise says what
// makes them someone else's: a record is ours only when it names exactly the
// key asked for (not a hash collision, not a hand-made object) and carries
// every holder annotation.
func (a Annotations) Decode(key string, annotations map[string]string) (rec Record, present bool, foreign string) {
	var missing []string
	get := func(k string, required bool) string {
		v, ok := annotations[k]
		if ok {
			present = true
		} else if required {
			missing = append(missing, k)
		}
		return v
	}
	rec.Key = get(a.Key, true)
	rec.Holder = Holder{
		Namespace:  get(a.HolderNamespace, true),
		Name:       get(a.HolderName, true),
		UID:        types.UID(get(a.HolderUID, true)),
		APIVersion: get(a.HolderAPIVersion, false),
		Kind:       get(a.HolderKind, false),
	}
	rec.Token = Token(get(a.Token, false))
	rec.Set = get(a.Set, false)
	successor := get(a.Successor, false)
	rec.HandedOverBy = types.UID(get(a.HandedOverBy, false))
	renewTime := get(a.RenewTime, false)
	switch {
	case len(missing) > 0:
		sort.Strings(missing)
		return rec, present, "missing annotations " + strings.Join(missing, ", ")
	case rec.Key != key:
		return rec, present, fmt.Sprintf("written for key %q", rec.Key)
	case rec.Holder.Name == "" || rec.Holder.UID == "":
		return rec, present, "holder name or UID is empty"
	}
	if _, err := ParseToken(rec.Token.String()); !rec.Token.IsZero() && err != nil {
		return rec, present, fmt.Sprintf("token annotation %q is not a resourceVersion", rec.Token)
	}
	if renewTime != "" {
		t, err := time.Parse(metav1.RFC3339Micro, renewTime)
		if err != nil {
			return rec, present, fmt.Sprintf("renew-time annotation %q is not a time", renewTime)
		}
		rec.RenewTime = t
	}
	if successor != "" {
		var w successorWire
		if err := json.Unmarshal([]byte(successor), &w); err != nil || w.Name == "" || w.UID == "" {
			return rec, present, fmt.Sprintf("successor annotation %q is malformed", successor)
		}
		rec.Successor = &Holder{APIVersion: w.APIVersion, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, UID: w.UID}
	}
	return rec, present, ""
}

// Stored is what a backend knows of the object that stores a record.
type Stored struct {
	Ref         types.NamespacedName
	UID         types.UID
	Version     string
	Annotations map[string]string
	// Shared marks an object that others write too, such as the claimed
	// object of the annotation backend, which its operator and possibly its
	// tenants edit. A record there must name its holder's apiVersion and
	// kind: without them no liveness can judge the holder, and the record
	// would block its key for good while looking held. It is Foreign instead,
	// which says why.
	Shared bool
	// Labels are the object's labels, to tell whether the holder's selector
	// labels are on it (see Record.Unlabelled).
	Labels map[string]string
}

// DecodeStored reads key's record from the object that stores it: the claim
// fields from its annotations (Foreign when they do not form a complete
// record of key) and the storage fields from the object. The record exists;
// a backend that stores records beside other data decides absence itself.
//
// The token defaults to the object's version: the protocol writes no token
// on the write that grants, so an object nobody wrote since the grant carries
// the grant's own version, and any later write only raises it (see [Token]).
//
// A record no Claimer could have written is Foreign, with the reason: a
// token annotation newer than the object's own resourceVersion (a token is
// the version of an earlier write of the object, so it is never newer: such
// a token was forged, and believing it would let its holder's fenced writes
// beat every real grant), and, on a Shared object, a record without the
// holder's apiVersion or kind.
func (cfg Config) DecodeStored(key string, s Stored) Record {
	rec, _, foreign := cfg.Annotations.WithDefaults().Decode(key, s.Annotations)
	rec.Exists = true
	rec.Foreign = foreign
	rec.Ref, rec.UID, rec.Version = s.Ref, s.UID, s.Version
	if !s.Shared {
		// A shared object's labels are its owner's, not the record's.
		rec.Labels = maps.Clone(s.Labels)
	}
	if rec.Foreign == "" {
		rec.Foreign = impossible(rec, s)
	}
	if rec.Token.IsZero() {
		rec.Token = Token(s.Version)
	}
	if rec.Foreign == "" && rec.Holder.UID != "" {
		// Labels count too where the backend writes them (not on a Shared
		// object, whose labels are its owner's): a record written before
		// Config.Labels was set is invisible to a cache restricted by them.
		want := cfg.RecordLabels(rec.Holder)
		if s.Shared {
			want = cfg.SelectorLabels(rec.Holder)
		}
		for k, v := range want {
			if s.Labels[k] != v {
				rec.Unlabelled = true
			}
		}
	}
	return rec
}

// impossible says what makes a complete record one that no Claimer wrote on
// s, or returns "".
func impossible(rec Record, s Stored) string {
	if !rec.Token.IsZero() && s.Version != "" {
		// A version that does not parse cannot be compared; only a token
		// known to be newer is refused.
		if newer, err := rec.Token.Compare(Token(s.Version)); err == nil && newer >= 0 {
			// The protocol stores a token it read, always older than the
			// write that stores it: equal or newer was not written by it.
			return fmt.Sprintf("token annotation %s is not older than the object's own resourceVersion %s, which no grant can write", rec.Token, s.Version)
		}
	}
	if s.Shared && (rec.Holder.APIVersion == "" || rec.Holder.Kind == "") {
		return fmt.Sprintf("holder %s has no apiVersion or kind, so its liveness cannot be judged", rec.Holder)
	}
	return ""
}

// DecodeListed reads a record found by a List, whose key is known only from
// its own annotation. A record whose object name is not the record name of
// that key was not made by a Claimer under cfg (a hand-made or renamed
// object) and is Foreign.
func (cfg Config) DecodeListed(s Stored) Record {
	key := s.Annotations[cfg.Annotations.WithDefaults().Key]
	rec := cfg.DecodeStored(key, s)
	if rec.Foreign == "" && cfg.RecordName(key) != s.Ref.Name {
		rec.Foreign = fmt.Sprintf("name %q is not the record name of key %q", s.Ref.Name, key)
	}
	return rec
}
