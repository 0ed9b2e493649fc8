package claim

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

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
	return []string{a.Key, a.HolderAPIVersion, a.HolderKind, a.HolderNamespace, a.HolderName, a.HolderUID, a.Token, a.Successor}
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
	successor := get(a.Successor, false)
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
	if successor != "" {
		var w successorWire
		if err := json.Unmarshal([]byte(successor), &w); err != nil || w.Name == "" || w.UID == "" {
			return rec, present, fmt.Sprintf("successor annotation %q is malformed", successor)
		}
		rec.Successor = &Holder{APIVersion: w.APIVersion, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, UID: w.UID}
	}
	return rec, present, ""
}
