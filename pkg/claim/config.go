package claim

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ocf-claim/claim/pkg/backends"
)

// Config says where and how records are stored. Its zero value is valid
// except for Namespace, which backends that store records in a namespace
// (the Lease backend) require.
type Config struct {
	// Namespace holds the records of backends that create their own objects.
	// With the record name it is the whole exclusion boundary: a key is
	// exclusive only among Claimers that store its record under the same
	// name (Prefix, NameFunc) in the same namespace. Two installs with
	// different claim namespaces, or two Claimers of one namespace with
	// different Prefixes, hand one key to two holders without any error
	// (kubectl claims list -A warns about a key recorded in more than one
	// namespace, or under more than one name).
	Namespace string
	// Prefix starts every record name made by the default NameFunc; every
	// Claimer of a key must use the same one (see Namespace).
	// Default: backends.DefaultPrefix ("claim-").
	Prefix string
	// Labels are added to every record a backend writes.
	Labels map[string]string
	// Normalize normalizes a key before it is validated and used, for example
	// to drop userinfo from a URL. It must be deterministic. Default: keys
	// are used as given.
	Normalize func(key string) (string, error)
	// NameFunc names the record object of a normalized key. It must be
	// deterministic and return a valid object name. Default: Prefix
	// followed by the first 40 hex characters of sha256(key).
	NameFunc func(key string) string
	// HolderLabels returns the labels that select a holder's records for the
	// release sweep; they are written on every record of that holder. Values
	// are written through [backends.LabelValue], which makes any string a
	// valid label value (bounded to 63 bytes, invalid characters replaced and
	// the value hashed). Default: the holder UID under
	// backends.DefaultHolderUIDLabel.
	HolderLabels func(Holder) map[string]string
	// Annotations names the annotation keys. Default: the
	// backends.Default*Annotation keys.
	Annotations backends.Annotations
	// Set names this Claimer's claim set: every record it writes carries it,
	// and Release, Holdings and ReleaseRecords touch only records of this set
	// (and records written before sets existed, which carry none), so that two
	// Claimers (or two middlewares) for one holder kind in one namespace never
	// release each other's records. It must be a valid label value. Default:
	// "cfg-" and 10 hex characters of a hash of Prefix and Labels, so that
	// Claimers with different Labels or Prefix are different sets. To change
	// the set of a running operator (renaming a middleware, changing Labels),
	// name the old set in FormerSets.
	Set string
	// FormerSets are claim sets this Claimer takes as its own: a record of its
	// holder stamped with one of them is held, listed and released as if it
	// carried Set, and is stamped with Set at its holder's next Acquire. Name
	// a set here when you rename it (the middleware's name is its default
	// set); without it, an object whose record carries the old set finds its
	// key held by another claim of itself, and waits for it. Never name the
	// set of another Claimer that is still in use.
	FormerSets []string
}

// sets returns the claim sets whose records of its holder a Claimer of cfg
// holds: Set, then FormerSets.
func (cfg Config) sets() []string {
	return append([]string{cfg.Set}, cfg.FormerSets...)
}

// withDefaults returns cfg with every empty field defaulted.
func (cfg Config) withDefaults() Config {
	// The storage defaults are the backends' own, so that a zero
	// backends.Config and a defaulted Config name and encode records alike.
	st := backends.Config{Prefix: cfg.Prefix, NameFunc: cfg.NameFunc, HolderLabels: cfg.HolderLabels, Annotations: cfg.Annotations}.WithDefaults()
	cfg.Prefix, cfg.NameFunc, cfg.HolderLabels, cfg.Annotations = st.Prefix, st.NameFunc, st.HolderLabels, st.Annotations
	if cfg.Normalize == nil {
		cfg.Normalize = func(key string) (string, error) { return key, nil }
	}
	if cfg.Set == "" {
		cfg.Set = defaultSet(cfg.Prefix, cfg.Labels)
	}
	return cfg
}

// Storage is the part of cfg a backend sees, every default filled in, as
// [New] hands it to the backend's factory: for tools that read records the
// way a Claimer of cfg writes them, and for backends that wrap another. It
// does not validate cfg; New does.
func (cfg Config) Storage() backends.Config {
	cfg = cfg.withDefaults()
	return backends.Config{
		Namespace: cfg.Namespace, Prefix: cfg.Prefix, Labels: cfg.Labels, NameFunc: cfg.NameFunc,
		HolderLabels: cfg.HolderLabels, Annotations: cfg.Annotations, Set: cfg.Set,
	}
}

// validate reports every problem of a defaulted Config at once.
func (cfg Config) validate() error {
	var errs []error
	if cfg.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(cfg.Namespace) {
			errs = append(errs, fmt.Errorf("config.Namespace %q: %s", cfg.Namespace, msg))
		}
	}
	// The default name is the prefix plus 40 hex characters; the prefix is
	// valid when such a name is.
	for _, msg := range validation.IsDNS1123Subdomain(cfg.Prefix + strings.Repeat("0", hashLen)) {
		errs = append(errs, fmt.Errorf("config.Prefix %q: %s", cfg.Prefix, msg))
	}
	for k, v := range cfg.Labels {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("config.Labels key %q: %s", k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("config.Labels[%q] value %q: %s", k, v, msg))
		}
	}
	for _, msg := range validation.IsValidLabelValue(cfg.Set) {
		errs = append(errs, fmt.Errorf("config.Set %q: %s", cfg.Set, msg))
	}
	for i, set := range cfg.FormerSets {
		if set == "" || set == cfg.Set {
			errs = append(errs, fmt.Errorf("config.FormerSets[%d] %q: must be another, non-empty set than config.Set %q", i, set, cfg.Set))
		}
	}
	seen := map[string]string{}
	a := cfg.Annotations
	for _, f := range []struct{ name, key string }{
		{"Key", a.Key}, {"HolderAPIVersion", a.HolderAPIVersion}, {"HolderKind", a.HolderKind},
		{"HolderNamespace", a.HolderNamespace}, {"HolderName", a.HolderName}, {"HolderUID", a.HolderUID},
		{"Token", a.Token}, {"Successor", a.Successor}, {"HandedOverBy", a.HandedOverBy}, {"Set", a.Set}, {"RenewTime", a.RenewTime},
	} {
		for _, msg := range validation.IsQualifiedName(f.key) {
			errs = append(errs, fmt.Errorf("config.Annotations.%s %q: %s", f.name, f.key, msg))
		}
		if other, dup := seen[f.key]; dup {
			errs = append(errs, fmt.Errorf("config.Annotations.%s %q: also used by config.Annotations.%s", f.name, f.key, other))
		}
		seen[f.key] = f.name
	}
	// NameFunc is a function too; a name it makes of a typical key, as
	// Normalize hands keys on, must be a valid object name, or every first
	// write of a key fails. A function that panics on the sample is an
	// error here, not a crash of the operator.
	const probeKey = "probe|https://probe.example.com:443/a_b"
	if err := probing("config.Normalize", func() error {
		key, err := cfg.Normalize(probeKey)
		if err != nil {
			// A normalizer may refuse the sample; NameFunc is then not
			// probed (its keys are the normalizer's).
			return nil //nolint:nilerr // the sample, not the Config, is refused
		}
		var name string
		if err := probing("config.NameFunc", func() error { name = cfg.NameFunc(key); return nil }); err != nil {
			return err
		}
		var bad []error
		for _, msg := range validation.IsDNS1123Subdomain(name) {
			bad = append(bad, fmt.Errorf("config.NameFunc(%q) = %q: %s", key, name, msg))
		}
		return errors.Join(bad...)
	}); err != nil {
		errs = append(errs, err)
	}
	// HolderLabels is a function; check what it makes of a typical holder so
	// that a bad label fails here, not on the first write. Values are written
	// through LabelValue, so the value to check is what it makes of them.
	probe := Holder{APIVersion: "example.com/v1", Kind: "Probe", Namespace: "probe-namespace", Name: "probe", UID: "00000000-0000-0000-0000-000000000000"}
	var labels map[string]string
	if err := probing("config.HolderLabels", func() error { labels = cfg.HolderLabels(probe); return nil }); err != nil {
		errs = append(errs, err)
	}
	for k, v := range labels {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("config.HolderLabels key %q: %s", k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(backends.LabelValue(v)) {
			errs = append(errs, fmt.Errorf("config.HolderLabels[%q] value %q (written as %q): %s", k, v, backends.LabelValue(v), msg))
		}
	}
	return errors.Join(errs...)
}

// probing runs f, a probe of a function of the Config, and turns a panic in
// it into an error naming the function.
func probing(name string, f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s panicked: %v", name, r)
		}
	}()
	return f()
}

// setHashLen is how many hex characters of a hash name a default set.
const setHashLen = 10

// defaultSet derives a claim set from what makes two Configs store different
// records: the record name prefix and the labels.
func defaultSet(prefix string, labels map[string]string) string {
	h := sha256.New()
	h.Write([]byte(prefix))
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		h.Write([]byte{0})
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write([]byte(labels[k]))
	}
	return "cfg-" + hex.EncodeToString(h.Sum(nil))[:setHashLen]
}
