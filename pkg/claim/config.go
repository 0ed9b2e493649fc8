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
)

// Default label and annotation keys. A Config's zero value uses these.
const (
	// Domain is the prefix of every default label and annotation key.
	Domain = "claim.ocf.io"

	DefaultKeyAnnotation              = Domain + "/key"
	DefaultHolderAPIVersionAnnotation = Domain + "/holder-api-version"
	DefaultHolderKindAnnotation       = Domain + "/holder-kind"
	DefaultHolderNamespaceAnnotation  = Domain + "/holder-namespace"
	DefaultHolderNameAnnotation       = Domain + "/holder-name"
	DefaultHolderUIDAnnotation        = Domain + "/holder-uid"
	DefaultTokenAnnotation            = Domain + "/token"
	DefaultSuccessorAnnotation        = Domain + "/successor"
	DefaultSetAnnotation              = Domain + "/set"
	DefaultRenewTimeAnnotation        = Domain + "/renew-time"

	// DefaultHolderUIDLabel selects a holder's records for the release
	// sweep.
	DefaultHolderUIDLabel = Domain + "/holder-uid"

	// DefaultPrefix starts every record name unless Config.Prefix is set.
	DefaultPrefix = "claim-"
)

// Annotations names the annotation keys a record is written with. Empty
// fields take the Default*Annotation keys. An operator migrating from a
// hand-written claim sets the keys its existing records carry so that it
// keeps recognising them.
type Annotations struct {
	Key              string
	HolderAPIVersion string
	HolderKind       string
	HolderNamespace  string
	HolderName       string
	HolderUID        string
	Token            string
	Successor        string
	// Set names the claim set that wrote the record (see Config.Set).
	Set string
	// RenewTime carries Record.RenewTime, the protocol's renew marker, for
	// backends that have no field of their own for it (the Lease backend
	// keeps it in spec.renewTime instead).
	RenewTime string
}

// Config says where and how records are stored. Its zero value is valid
// except for Namespace, which backends that store records in a namespace
// (the Lease backend) require.
type Config struct {
	// Namespace holds the records of backends that create their own objects.
	// It is the whole exclusion boundary: a key is exclusive only among
	// Claimers that store its record in the same namespace. Two installs
	// with different claim namespaces hand one key to two holders without
	// any error (kubectl claims list -A warns about a key recorded in more
	// than one namespace).
	Namespace string
	// Prefix starts every record name made by the default NameFunc.
	// Default: DefaultPrefix.
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
	// are written through [LabelValue], which makes any string a valid label
	// value (bounded to 63 bytes, invalid characters replaced and the value
	// hashed). Default: the holder UID under DefaultHolderUIDLabel.
	HolderLabels func(Holder) map[string]string
	// Annotations names the annotation keys. Default: Default*Annotation.
	Annotations Annotations
	// Set names this Claimer's claim set: every record it writes carries it,
	// and Release, Holdings and ReleaseRecords touch only records of this set
	// (and records written before sets existed, which carry none), so that two
	// Claimers (or two middlewares) for one holder kind in one namespace never
	// release each other's records. It must be a valid label value. Default:
	// "cfg-" and 10 hex characters of a hash of Prefix and Labels, so that
	// Claimers with different Labels or Prefix are different sets. Changing
	// the set of a running operator leaves the old set's records to be
	// released by hand (kubectl claims release).
	Set string
}

// withDefaults returns cfg with every empty field defaulted.
func (cfg Config) withDefaults() Config {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.Normalize == nil {
		cfg.Normalize = func(key string) (string, error) { return key, nil }
	}
	if cfg.NameFunc == nil {
		prefix := cfg.Prefix
		cfg.NameFunc = func(key string) string { return HashName(prefix, key) }
	}
	if cfg.HolderLabels == nil {
		cfg.HolderLabels = func(h Holder) map[string]string {
			return map[string]string{DefaultHolderUIDLabel: string(h.UID)}
		}
	}
	if cfg.Set == "" {
		cfg.Set = defaultSet(cfg.Prefix, cfg.Labels)
	}
	a := &cfg.Annotations
	for _, f := range []struct {
		field *string
		def   string
	}{
		{&a.Key, DefaultKeyAnnotation},
		{&a.HolderAPIVersion, DefaultHolderAPIVersionAnnotation},
		{&a.HolderKind, DefaultHolderKindAnnotation},
		{&a.HolderNamespace, DefaultHolderNamespaceAnnotation},
		{&a.HolderName, DefaultHolderNameAnnotation},
		{&a.HolderUID, DefaultHolderUIDAnnotation},
		{&a.Token, DefaultTokenAnnotation},
		{&a.Successor, DefaultSuccessorAnnotation},
		{&a.Set, DefaultSetAnnotation},
		{&a.RenewTime, DefaultRenewTimeAnnotation},
	} {
		if *f.field == "" {
			*f.field = f.def
		}
	}
	return cfg
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
	seen := map[string]string{}
	a := cfg.Annotations
	for _, f := range []struct{ name, key string }{
		{"Key", a.Key}, {"HolderAPIVersion", a.HolderAPIVersion}, {"HolderKind", a.HolderKind},
		{"HolderNamespace", a.HolderNamespace}, {"HolderName", a.HolderName}, {"HolderUID", a.HolderUID},
		{"Token", a.Token}, {"Successor", a.Successor}, {"Set", a.Set}, {"RenewTime", a.RenewTime},
	} {
		for _, msg := range validation.IsQualifiedName(f.key) {
			errs = append(errs, fmt.Errorf("config.Annotations.%s %q: %s", f.name, f.key, msg))
		}
		if other, dup := seen[f.key]; dup {
			errs = append(errs, fmt.Errorf("config.Annotations.%s %q: also used by config.Annotations.%s", f.name, f.key, other))
		}
		seen[f.key] = f.name
	}
	// HolderLabels is a function; check what it makes of a typical holder so
	// that a bad label fails here, not on the first write. Values are written
	// through LabelValue, so the value to check is what it makes of them.
	probe := Holder{APIVersion: "example.com/v1", Kind: "Probe", Namespace: "probe-namespace", Name: "probe", UID: "00000000-0000-0000-0000-000000000000"}
	for k, v := range cfg.HolderLabels(probe) {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("config.HolderLabels key %q: %s", k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(LabelValue(v)) {
			errs = append(errs, fmt.Errorf("config.HolderLabels[%q] value %q (written as %q): %s", k, v, LabelValue(v), msg))
		}
	}
	return errors.Join(errs...)
}

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
	return "cfg-" + hex.EncodeToString(h.Sum(nil))[:boundSuffixLen]
}

// RecordName is the object name of key's record (key already normalized).
// It works on any Config: one without a NameFunc (not passed through
// [New], such as a tool's Config{Prefix: ...}) names records as the default
// NameFunc does.
func (cfg Config) RecordName(key string) string {
	if cfg.NameFunc == nil {
		cfg = cfg.withDefaults()
	}
	return cfg.NameFunc(key)
}

// RecordLabels returns every label a record held by h carries: Config.Labels
// and the holder's sweep labels, with values bounded to valid label values.
func (cfg Config) RecordLabels(h Holder) map[string]string {
	out := make(map[string]string, len(cfg.Labels)+1)
	for k, v := range cfg.Labels {
		out[k] = v
	}
	for k, v := range cfg.SelectorLabels(h) {
		out[k] = v
	}
	return out
}

// SelectorLabels returns the labels that select h's records, with values
// made valid by [LabelValue]. A Config without HolderLabels uses the
// default.
func (cfg Config) SelectorLabels(h Holder) map[string]string {
	if cfg.HolderLabels == nil {
		cfg = cfg.withDefaults()
	}
	out := map[string]string{}
	for k, v := range cfg.HolderLabels(h) {
		out[k] = LabelValue(v)
	}
	return out
}

// LabelValue makes any v a valid label value: at most 63 bytes of
// alphanumerics, '-', '_' and '.', starting and ending with an alphanumeric.
// A value that is one already is returned unchanged. Characters a label value
// cannot hold (the '/' of "namespace/name", spaces, non-ASCII) become '-' and
// the first 10 hex characters of sha256(v) are appended, so that values that
// differ only in those characters stay distinct; a value too long is cut
// with [Bound]; leading and trailing '-', '_', '.' are trimmed.
//
// Values made only of label characters come out as earlier releases made
// them, so records written then keep matching their holder's selector.
func LabelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	clean := strings.Map(func(r rune) rune {
		if isLabelChar(r) {
			return r
		}
		return '-'
	}, v)
	if clean != v {
		sum := sha256.Sum256([]byte(v))
		clean += "-" + hex.EncodeToString(sum[:])[:boundSuffixLen]
	}
	return strings.Trim(Bound(clean, validation.LabelValueMaxLength), "-._")
}

// isLabelChar reports whether r may appear in a label value.
func isLabelChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.'
}
