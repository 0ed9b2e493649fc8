// Package claimsctl is the logic of the kubectl-claims plugin: it shows and
// operates ocf-claim records in a cluster, in the words of claims rather than
// of the Leases and annotations that store them.
//
//   - list: every record of the Lease backend (and, with
//     --annotation-backend, of the annotation backend) with its key, holder,
//     fencing token, age, pending successor and state (held, holder gone,
//     foreign).
//   - why: the claims an object holds or waits for and its claim condition,
//     explained.
//   - release: a manual release of one Lease record, fenced on the holder UID
//     the operator saw and on the UID and resourceVersion of the read that
//     checked it.
//
// The plugin reads records with the claim package's own decoders
// (backends.Annotations.Decode, lease.Decode) under the configuration the
// operator uses, taken from flags or from the ConfigMap the operator
// publishes ([ConfigMapName]). Every read is uncached; the plugin writes
// nothing but the Delete of release.
package claimsctl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Output formats of -o.
const (
	outputTable = ""
	outputWide  = "wide"
	outputYAML  = "yaml"
	outputJSON  = "json"
)

// Options are what every command shares: the kubeconfig flags, the claim
// configuration flags, the output streams and the clock ages are measured
// against.
type Options struct {
	// Flags are the standard kubeconfig flags (--kubeconfig, --context,
	// -n, ...).
	Flags *genericclioptions.ConfigFlags
	// Streams are where output and errors go.
	Streams genericiooptions.IOStreams
	// Clock measures ages. Default: the real clock.
	Clock clock.PassiveClock

	configMap      string
	claimNamespace string
	prefix         string
	annotationKeys map[string]string
	holderUIDLabel string
	conditionType  string
	annotationRes  string
	output         string
	allNamespaces  bool
	selector       string

	// display maps UIDs and tokens to how they are shown; tests replace the
	// values the API server made up with stable names. nil shows them as
	// they are.
	display func(string) string
}

// NewCommand returns the kubectl-claims root command with its subcommands.
// A nil clock is the real one.
func NewCommand(streams genericiooptions.IOStreams, clk clock.PassiveClock) *cobra.Command {
	return newOptions(streams, clk).command()
}

func newOptions(streams genericiooptions.IOStreams, clk clock.PassiveClock) *Options {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Options{Flags: genericclioptions.NewConfigFlags(true), Streams: streams, Clock: clk}
}

func (o *Options) command() *cobra.Command {
	streams := o.Streams
	cmd := &cobra.Command{
		Use:   "kubectl-claims",
		Short: "Show and operate ocf-claim claims",
		Long: "kubectl claims shows which object holds which claim key, why an object waits, and releases a\n" +
			"claim by hand with fencing. Lease names are hashes; this plugin speaks keys and holders.",
		SilenceUsage:  true,
		SilenceErrors: true,
		// kubectl runs the binary as `kubectl claims`; usage says so.
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl claims"},
	}
	cmd.SetOut(streams.Out)
	cmd.SetErr(streams.ErrOut)
	o.Flags.AddFlags(cmd.PersistentFlags())
	pf := cmd.PersistentFlags()
	pf.StringVar(&o.configMap, "config-map", "", "[namespace/]name of the ConfigMap the operator publishes its claim configuration in (default "+ConfigMapName+" in the claim namespace, if present; why, whose -n is the object's namespace, reads one only with --claim-namespace or --config-map)")
	pf.StringVar(&o.claimNamespace, "claim-namespace", "", "namespace of the Lease records (default: -n, else the published namespace, else the current namespace)")
	pf.StringVar(&o.prefix, "prefix", "", "Lease name prefix of the records (default: published, else "+`"claim-"`+")")
	pf.StringToStringVar(&o.annotationKeys, "annotation-keys", nil, "record annotation keys by field, e.g. key=example.com/claim-key,holderUID=example.com/holder-uid (fields: key, holderAPIVersion, holderKind, holderNamespace, holderName, holderUID, token, successor)")
	pf.StringVar(&o.holderUIDLabel, "holder-uid-label", "", "label carrying the holder UID on every record (default: published, else claim.ocf.io/holder-uid)")
	pf.StringVar(&o.annotationRes, "annotation-backend", "", "resource whose objects carry annotation-backed records, e.g. storageconfigs.example.com")
	cmd.AddCommand(o.newListCommand(), o.newWhyCommand(), o.newReleaseCommand())
	return cmd
}

// addOutputFlag adds -o for commands that print records.
func (o *Options) addOutputFlag(cmd *cobra.Command) {
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "output format: wide, yaml or json")
}

func (o *Options) validateOutput() error {
	switch o.output {
	case outputTable, outputWide, outputYAML, outputJSON:
		return nil
	}
	return fmt.Errorf("--output %q: want wide, yaml or json", o.output)
}

// session is what one command run works with: an uncached client, the
// resolved claim configuration, and the namespaces in play.
type session struct {
	c client.Client
	s settings
	// namespace is -n or the kubeconfig's namespace; explicit says whether
	// -n (or a context namespace override) named it.
	namespace string
	explicit  bool
}

// connect builds the uncached client and resolves the claim configuration:
// the published ConfigMap (if any), overridden by flags. The ConfigMap is
// read only from the claim namespace (configMapRef): for why, whose -n is
// the object's namespace (objectNamespace), never from -n, where a tenant
// could plant a configuration that makes other tenants' claims read as
// foreign.
func (o *Options) connect(ctx context.Context, objectNamespace bool) (*session, error) {
	ns, explicit, err := o.Flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, fmt.Errorf("reading the namespace from kubeconfig: %w", err)
	}
	restCfg, err := o.Flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig: %w", err)
	}
	mapper, err := o.Flags.ToRESTMapper()
	if err != nil {
		return nil, fmt.Errorf("discovering the API: %w", err)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	c, err := client.New(restCfg, client.Options{Scheme: scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("creating the API client: %w", err)
	}

	ref, read, err := o.configMapRef(ns, objectNamespace)
	if err != nil {
		return nil, err
	}
	var published Published
	if read {
		if published, err = loadPublished(ctx, c, ref, o.configMap != ""); err != nil {
			return nil, err
		}
		for _, w := range configWarnings(ref.Namespace, o.claimNamespace, published.Namespace) {
			fmt.Fprintf(o.Streams.ErrOut, "Warning: %s\n", printable(w))
		}
	}
	flags := Published{
		Prefix:            o.prefix,
		HolderUIDLabel:    o.holderUIDLabel,
		ConditionType:     o.conditionType,
		AnnotationBackend: o.annotationRes,
	}
	fields := flags.Annotations.fields()
	var errs []error
	for name, key := range o.annotationKeys {
		f, ok := fields[name]
		if !ok {
			errs = append(errs, fmt.Errorf("--annotation-keys: unknown field %q", name))
			continue
		}
		*f = key
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	s, err := resolve(c, c, published.override(flags))
	if err != nil {
		return nil, err
	}
	return &session{c: c, s: s, namespace: ns, explicit: explicit}, nil
}

// configMapRef is the ConfigMap the claim configuration is read from, and
// whether one is read at all: --config-map ([namespace/]name), its
// namespace defaulting to the claim namespace; else ConfigMapName in the
// claim namespace. The claim namespace is --claim-namespace, else, for the
// commands whose -n names the record namespace (list, release), an explicit
// -n or the current namespace. When -n is the object's namespace (why),
// only --claim-namespace counts: without it and without --config-map no
// configuration is read, and a --config-map without a namespace is refused.
func (o *Options) configMapRef(ns string, objectNamespace bool) (types.NamespacedName, bool, error) {
	claimNS := o.claimNamespace
	if claimNS == "" && !objectNamespace {
		claimNS = ns
	}
	switch {
	case o.configMap != "":
		if claimNS == "" && !strings.Contains(o.configMap, "/") {
			return types.NamespacedName{}, false, fmt.Errorf("--config-map %q: name its namespace (namespace/name) or give --claim-namespace; "+
				"why never reads the configuration from the object's namespace", o.configMap)
		}
		ref, err := parseConfigMapRef(o.configMap, claimNS)
		return ref, err == nil, err
	case claimNS == "":
		return types.NamespacedName{}, false, nil
	}
	ref, err := parseConfigMapRef(ConfigMapName, claimNS)
	return ref, err == nil, err
}

// configWarnings are the warnings for a configuration read from the
// ConfigMap in namespace cmNS when --claim-namespace (flagNS) or the
// namespace it publishes (publishedNS) names another claim namespace: the
// configuration may describe another install's records.
func configWarnings(cmNS, flagNS, publishedNS string) []string {
	var out []string
	if flagNS != "" && cmNS != flagNS {
		out = append(out, fmt.Sprintf("the claim configuration is read from namespace %s, not from the claim namespace %s (--claim-namespace); "+
			"it applies only if that namespace's administrators wrote it", cmNS, flagNS))
	}
	if publishedNS != "" && publishedNS != cmNS && (flagNS == "" || publishedNS != flagNS) {
		out = append(out, fmt.Sprintf("the claim configuration read from namespace %s says the records live in namespace %s", cmNS, publishedNS))
	}
	return out
}

// recordNamespace is where Lease records are read: --claim-namespace, else
// an explicit -n, else the published namespace, else the current namespace.
func (o *Options) recordNamespace(ss *session) string {
	switch {
	case o.claimNamespace != "":
		return o.claimNamespace
	case ss.explicit:
		return ss.namespace
	case ss.s.recordNamespace != "":
		return ss.s.recordNamespace
	}
	return ss.namespace
}

// show is how a UID or token is displayed.
func (o *Options) show(s string) string {
	if o.display == nil || s == "" {
		return s
	}
	return o.display(s)
}
