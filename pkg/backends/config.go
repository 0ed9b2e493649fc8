package backends

// Default label and annotation keys. An empty field of [Annotations] or a
// [Config] without HolderLabels uses these.
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
	DefaultHandedOverByAnnotation     = Domain + "/handed-over-by"
	DefaultSetAnnotation              = Domain + "/set"
	DefaultRenewTimeAnnotation        = Domain + "/renew-time"

	// DefaultHolderUIDLabel selects a holder's records for the release
	// sweep.
	DefaultHolderUIDLabel = Domain + "/holder-uid"

	// DefaultPrefix starts every record name unless a prefix is configured.
	DefaultPrefix = "claim-"
)

// Annotations names the annotation keys a record is written with. Empty
// fields take the Default*Annotation keys. An operator migrating from a
// hand-written claim sets the keys its existing records carry (in
// claim.Config.Annotations) so that it keeps recognising them.
type Annotations struct {
	Key              string
	HolderAPIVersion string
	HolderKind       string
	HolderNamespace  string
	HolderName       string
	HolderUID        string
	Token            string
	Successor        string
	// HandedOverBy carries Record.HandedOverBy.
	HandedOverBy string
	// Set names the claim set that wrote the record (see claim.Config.Set).
	Set string
	// RenewTime carries Record.RenewTime, the protocol's renew marker, for
	// backends that have no field of their own for it (the Lease backend
	// keeps it in spec.renewTime instead).
	RenewTime string
}

// WithDefaults returns a with every empty key set to its Default*Annotation.
func (a Annotations) WithDefaults() Annotations {
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
		{&a.HandedOverBy, DefaultHandedOverByAnnotation},
		{&a.Set, DefaultSetAnnotation},
		{&a.RenewTime, DefaultRenewTimeAnnotation},
	} {
		if *f.field == "" {
			*f.field = f.def
		}
	}
	return a
}

// Config is what a backend needs to know to store records: the storage part
// of claim.Config. claim.New hands a backend's [Factory] one with every
// default filled in and validated. Its zero value is usable too, with the
// defaults below, for tools and tests that read or write records without a
// Claimer.
type Config struct {
	// Namespace holds the records of backends that create their own objects.
	Namespace string
	// Prefix starts every record name when NameFunc is nil.
	// Default: DefaultPrefix.
	Prefix string
	// Labels are added to every record.
	Labels map[string]string
	// NameFunc names the record object of a normalized key. Default: Prefix
	// followed by the first 40 hex characters of sha256(key) ([HashName]).
	NameFunc func(key string) string
	// HolderLabels returns the labels that select a holder's records.
	// Values pass through [LabelValue]. Default: the holder UID under
	// DefaultHolderUIDLabel.
	HolderLabels func(Holder) map[string]string
	// Annotations names the annotation keys; empty ones take their default.
	Annotations Annotations
	// Set is the claim set stamped on records (see claim.Config.Set).
	Set string
}

// WithDefaults returns cfg with every empty field but Namespace, Labels and
// Set given its default. Backend factories and the exported encoders call it,
// so that a zero Config reads and writes records as claim.New's defaults do.
func (cfg Config) WithDefaults() Config {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if cfg.NameFunc == nil {
		prefix := cfg.Prefix
		cfg.NameFunc = func(key string) string { return HashName(prefix, key) }
	}
	if cfg.HolderLabels == nil {
		cfg.HolderLabels = DefaultHolderLabels
	}
	cfg.Annotations = cfg.Annotations.WithDefaults()
	return cfg
}

// RecordName is the object name of key's record (key already normalized).
func (cfg Config) RecordName(key string) string {
	if cfg.NameFunc != nil {
		return cfg.NameFunc(key)
	}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return HashName(prefix, key)
}

// RecordLabels returns every label a record held by h carries: Labels and
// the holder's selector labels.
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

// WriteLabels returns the labels a write of next over prev (the record as
// read) puts on a record's object: [Config.RecordLabels] of next's holder,
// and, when the write keeps prev's holder, every other label prev's object
// carries. Two releases of an operator that label records differently thus
// each find their own labels on a steady record and stop writing it, and
// nobody's label is lost to a renewal. A write that changes the holder
// writes RecordLabels alone: labels that selected the former holder must not
// select its successor.
func (cfg Config) WriteLabels(prev, next Record) map[string]string {
	out := cfg.RecordLabels(next.Holder)
	if !prev.Exists || prev.Holder.UID == "" || prev.Holder.UID != next.Holder.UID {
		return out
	}
	for k, v := range prev.Labels {
		if _, own := out[k]; !own {
			out[k] = v
		}
	}
	return out
}

// SelectorLabels returns the labels that select h's records, with values
// made valid by [LabelValue].
func (cfg Config) SelectorLabels(h Holder) map[string]string {
	labels := cfg.HolderLabels
	if labels == nil {
		labels = DefaultHolderLabels
	}
	out := map[string]string{}
	for k, v := range labels(h) {
		out[k] = LabelValue(v)
	}
	return out
}

// DefaultHolderLabels is the default HolderLabels: the holder's UID under
// DefaultHolderUIDLabel.
func DefaultHolderLabels(h Holder) map[string]string {
	return map[string]string{DefaultHolderUIDLabel: string(h.UID)}
}
