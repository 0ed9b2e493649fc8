package backends

import (
	"fmt"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// LostLabelSelectors returns the label selectors of the objects that may
// store a record of h although they lack one of h's selector labels: one
// selector per selector label key, each matching the objects without that
// key and with every label of base (a backend that writes Config.Labels
// passes them, so that only claim records are sent; nil for none). A
// backend's List lists by each of them besides h's own selector and keeps
// what [KeepLost] keeps, so that a record written before its holder's
// labels existed, under another HolderLabels, or whose label someone
// removed is still listed. The API server filters by them, so a listing
// sends nothing more while no record lacks its labels. A record whose
// selector label is present with another value is not found by them: only
// the reads of its key (an Acquire, which stamps it again) find it.
func (cfg Config) LostLabelSelectors(h Holder, base map[string]string) ([]labels.Selector, error) {
	selector := cfg.SelectorLabels(h)
	keys := make([]string, 0, len(selector))
	for k := range selector {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]labels.Selector, 0, len(keys))
	for _, k := range keys {
		sel := labels.SelectorFromSet(base)
		req, err := labels.NewRequirement(k, selection.DoesNotExist, nil)
		if err != nil {
			return nil, fmt.Errorf("selecting the records of %s without label %q: %w", h, k, err)
		}
		out = append(out, sel.Add(*req))
	}
	return out, nil
}

// KeepLost returns labelled, the records a List by h's selector labels
// found, with every record of lost (found by [Config.LostLabelSelectors])
// that names h as its holder and that labelled does not hold already (by
// Ref). Records of other holders are left out: objects without the label
// are mostly anybody's, and the caller would drop them anyway. List by the
// lost selectors first and by h's own last: a record stamped with its
// labels again between the two listings is then found by the second.
func KeepLost(h Holder, labelled, lost []Record) []Record {
	out := labelled
	for _, rec := range lost {
		if !rec.Exists || !rec.Holder.Is(h) || slices.ContainsFunc(out, func(r Record) bool { return r.Ref == rec.Ref }) {
			continue
		}
		out = append(out, rec)
	}
	return out
}
