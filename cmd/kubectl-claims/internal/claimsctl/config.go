package claimsctl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// The ConfigMap an operator publishes its claim configuration in, for this
// plugin to read. Its data key ConfigMapKey holds a [Published] as YAML or
// JSON. See docs/operations.md.
const (
	ConfigMapName = "ocf-claim-config"
	ConfigMapKey  = "config.yaml"
)

// Published is the part of an operator's claim.Config the plugin needs to
// find and read records: where Lease records live, how they are named, and
// the annotation and label keys they carry. Empty fields take the claim
// package's defaults. Functions of a claim.Config (Normalize, NameFunc,
// HolderLabels) cannot be published; the plugin assumes the default name
// (Prefix and a hash of the key) and a single holder-UID label.
type Published struct {
	// Namespace holds the Lease records (claim.Config.Namespace).
	Namespace string `json:"namespace,omitempty"`
	// Prefix starts every Lease record name (claim.Config.Prefix).
	Prefix string `json:"prefix,omitempty"`
	// HolderUIDLabel is the label whose value is the holder's UID on every
	// record. Default: backends.DefaultHolderUIDLabel.
	HolderUIDLabel string `json:"holderUIDLabel,omitempty"`
	// Annotations are the record's annotation keys (backends.Annotations).
	Annotations AnnotationKeys `json:"annotations,omitempty"`
	// ConditionType is the claim condition's type on the holders.
	// Default: Claimed.
	ConditionType string `json:"conditionType,omitempty"`
	// AnnotationBackend is the resource (plural, optionally .group) whose
	// objects carry annotation-backed records, if the operator uses the
	// annotation backend.
	AnnotationBackend string `json:"annotationBackend,omitempty"`
}

// AnnotationKeys are backends.Annotations in published form.
type AnnotationKeys struct {
	Key              string `json:"key,omitempty"`
	HolderAPIVersion string `json:"holderAPIVersion,omitempty"`
	HolderKind       string `json:"holderKind,omitempty"`
	HolderNamespace  string `json:"holderNamespace,omitempty"`
	HolderName       string `json:"holderName,omitempty"`
	HolderUID        string `json:"holderUID,omitempty"`
	Token            string `json:"token,omitempty"`
	Successor        string `json:"successor,omitempty"`
	HandedOverBy     string `json:"handedOverBy,omitempty"`
	Set              string `json:"set,omitempty"`
	RenewTime        string `json:"renewTime,omitempty"`
}

// fields names every annotation key field by its published name, for the
// --annotation-keys flag.
func (a *AnnotationKeys) fields() map[string]*string {
	return map[string]*string{
		"key": &a.Key, "holderAPIVersion": &a.HolderAPIVersion, "holderKind": &a.HolderKind,
		"holderNamespace": &a.HolderNamespace, "holderName": &a.HolderName, "holderUID": &a.HolderUID,
		"token": &a.Token, "successor": &a.Successor, "handedOverBy": &a.HandedOverBy, "set": &a.Set, "renewTime": &a.RenewTime,
	}
}

// ParsePublished reads a Published from YAML or JSON, refusing unknown
// fields so that a misspelt key is an error rather than a silent default.
func ParsePublished(data []byte) (Published, error) {
	var p Published
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return Published{}, fmt.Errorf("parsing claim configuration: %w", err)
	}
	return p, nil
}

// override sets every non-empty field of o on p.
func (p Published) override(o Published) Published {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&p.Namespace, o.Namespace)
	set(&p.Prefix, o.Prefix)
	set(&p.HolderUIDLabel, o.HolderUIDLabel)
	set(&p.ConditionType, o.ConditionType)
	set(&p.AnnotationBackend, o.AnnotationBackend)
	dst, src := p.Annotations.fields(), o.Annotations.fields()
	for name, v := range src {
		set(dst[name], *v)
	}
	return p
}

// settings is a resolved claim configuration: the storage part of a
// defaulted claim.Config and what the plugin needs beyond it.
type settings struct {
	cfg            backends.Config
	holderUIDLabel string
	conditionType  string
	annotationRes  string
	// recordNamespace is the published namespace of Lease records, or empty.
	recordNamespace string
}

// resolve turns p into settings, defaulted and validated by the claim
// package itself (claim.New), so that the plugin reads records exactly as a
// Claimer of the same configuration writes them.
func resolve(reader client.Reader, writer client.Client, p Published) (settings, error) {
	uidLabel := p.HolderUIDLabel
	if uidLabel == "" {
		uidLabel = backends.DefaultHolderUIDLabel
	}
	a := p.Annotations
	cfg := claim.Config{
		// The Lease backend requires a namespace; the plugin never uses the
		// Claimer's own namespace, only its defaulted configuration.
		Namespace: "default",
		Prefix:    p.Prefix,
		HolderLabels: func(h claim.Holder) map[string]string {
			return map[string]string{uidLabel: string(h.UID)}
		},
		Annotations: backends.Annotations{
			Key: a.Key, HolderAPIVersion: a.HolderAPIVersion, HolderKind: a.HolderKind,
			HolderNamespace: a.HolderNamespace, HolderName: a.HolderName, HolderUID: a.HolderUID,
			Token: a.Token, Successor: a.Successor, HandedOverBy: a.HandedOverBy, Set: a.Set, RenewTime: a.RenewTime,
		},
	}
	if _, err := claim.New(reader, writer, cfg); err != nil {
		return settings{}, fmt.Errorf("reading the claim configuration: %w", err)
	}
	s := settings{
		cfg:             cfg.Storage(),
		holderUIDLabel:  uidLabel,
		conditionType:   p.ConditionType,
		annotationRes:   p.AnnotationBackend,
		recordNamespace: p.Namespace,
	}
	if s.conditionType == "" {
		s.conditionType = string(conditions.Claimed)
	}
	return s, nil
}

// recordName is the name of key's Lease under s.
func (s settings) recordName(key string) string { return s.cfg.RecordName(key) }

// loadPublished reads the published configuration from the ConfigMap ref.
// When required is false a missing or unreadable ConfigMap yields the zero
// Published (all defaults), so the plugin works against operators that
// publish nothing.
func loadPublished(ctx context.Context, reader client.Reader, ref types.NamespacedName, required bool) (Published, error) {
	var cm corev1.ConfigMap
	err := reader.Get(ctx, ref, &cm)
	switch {
	case err == nil:
	case !required && (apierrors.IsNotFound(err) || apierrors.IsForbidden(err)):
		return Published{}, nil
	default:
		return Published{}, fmt.Errorf("reading claim configuration ConfigMap %s: %w", ref, err)
	}
	data, ok := cm.Data[ConfigMapKey]
	if !ok {
		return Published{}, fmt.Errorf("reading claim configuration ConfigMap %s: it has no %q key", ref, ConfigMapKey)
	}
	p, err := ParsePublished([]byte(data))
	if err != nil {
		return Published{}, fmt.Errorf("reading claim configuration ConfigMap %s: %w", ref, err)
	}
	return p, nil
}

// parseConfigMapRef parses "[namespace/]name"; an empty namespace takes def.
func parseConfigMapRef(s, def string) (types.NamespacedName, error) {
	ns, name, found := strings.Cut(s, "/")
	if !found {
		ns, name = def, s
	}
	if name == "" || ns == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, errors.New("--config-map: want [namespace/]name")
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}
