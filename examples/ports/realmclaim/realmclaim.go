// Package realmclaim is the port of a hand-written claim per Keycloak realm
// onto ocf-claim: one IdentityPlane at a time configures a realm, keyed by
// the normalized Keycloak URL and "/realms/<realm>" ([NormalizeKey] drops
// userinfo: a password in a key once leaked into annotations and split one
// realm in two). The Leases stay in the operator namespace under the names,
// annotations and labels the hand-written claim gave them, so an upgrade
// reads every live claim as held by its holder.
//
// A suspended plane touches no claim: [Reconciler] calls the inner
// reconciler without the middleware. A plane keeps, beside its spec realm,
// every realm it holds that its status records or that a live workload of
// the plane (Deployment, ReplicaSet or Pod labelled [PlaneLabel]) may still
// write, by env ([KeycloakURLEnv] and [KeycloakRealmEnv]) or by
// [RealmAnnotation]. A workload that writes a realm it does not name keeps
// every claim of the plane.
//
// RBAC:
//
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete,namespace=camunda-system
// +kubebuilder:rbac:groups=ports.example.camunda.io,resources=identityplanes,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=ports.example.camunda.io,resources=identityplanes/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=ports.example.camunda.io,resources=identityplanes/finalizers,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments;replicasets,verbs=list
// +kubebuilder:rbac:groups="",resources=pods,verbs=list
package realmclaim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/examples/ports/internal/portapi"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw"
)

// The names the hand-written claim wrote; an upgrade must keep every one of
// them or it orphans the live claims (Leases, finalizers) of the old release.
const (
	LeasePrefix               = "keycloak-realm-"
	KeyAnnotation             = "identity.camunda.io/realm-key"
	HolderNamespaceAnnotation = "identity.camunda.io/holder-namespace"
	HolderNameAnnotation      = "identity.camunda.io/holder-name"
	HolderUIDAnnotation       = "identity.camunda.io/holder-uid"
	HolderUIDLabel            = "identity.camunda.io/holder-uid"
	Finalizer                 = "identity.camunda.io/realm-claim"
)

// How a plane's workloads say which realm they write.
const (
	// PlaneLabel carries the plane's name on every workload it runs.
	PlaneLabel = "identity.camunda.io/plane"
	// RealmAnnotation holds the realm URL a workload writes.
	RealmAnnotation = "identity.camunda.io/keycloak-realm"
	// KeycloakURLEnv and KeycloakRealmEnv name a realm in a container's env.
	KeycloakURLEnv   = "KEYCLOAK_URL"
	KeycloakRealmEnv = "KEYCLOAK_REALM"
)

// Requeue is how long a plane that does not hold its realm waits before it
// asks again when no Lease event wakes it earlier.
const Requeue = 30 * time.Second

// RealmKey is the claim key of realm on the Keycloak at keycloakURL.
func RealmKey(keycloakURL, realm string) string {
	return strings.TrimRight(keycloakURL, "/") + "/realms/" + realm
}

// NormalizeKey is the Config.Normalize: userinfo, query and fragment dropped,
// scheme and host lower-cased, default ports and repeated or trailing
// slashes removed. A key that is not an http(s) URL ending in
// /realms/<realm> is refused.
func NormalizeKey(key string) (string, error) {
	u, err := url.Parse(key)
	if err != nil {
		return "", fmt.Errorf("parsing realm URL: %w", err) // url.Error quotes the URL without its password
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return "", fmt.Errorf("realm URL %s: want http(s)://<host>/.../realms/<realm>", u.Redacted())
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	switch {
	case port != "":
		u.Host = net.JoinHostPort(host, port)
	case strings.Contains(host, ":"):
		u.Host = "[" + host + "]"
	default:
		u.Host = host
	}
	u.User, u.RawQuery, u.Fragment, u.RawPath = nil, "", "", ""
	u.Path = path.Clean("/" + u.Path)
	if dir, realm := path.Split(u.Path); path.Base(dir) != "realms" || realm == "" {
		return "", fmt.Errorf("realm URL %s: want http(s)://<host>/.../realms/<realm>", u.Redacted())
	}
	return u.String(), nil
}

// Config reads and writes the hand-written claim's Leases in the operator
// namespace.
func Config(operatorNamespace string) claim.Config {
	return claim.Config{
		Namespace: operatorNamespace,
		Prefix:    LeasePrefix,
		Normalize: NormalizeKey,
		Annotations: backends.Annotations{
			Key:             KeyAnnotation,
			HolderNamespace: HolderNamespaceAnnotation,
			HolderName:      HolderNameAnnotation,
			HolderUID:       HolderUIDAnnotation,
		},
		HolderLabels: func(h claim.Holder) map[string]string { return map[string]string{HolderUIDLabel: string(h.UID)} },
	}
}

// Reconciler is the claim middleware around an IdentityPlane reconciler,
// bypassed while the plane is suspended.
type Reconciler struct {
	*claimmw.Middleware
	inner  reconcile.Reconciler
	client client.Client
}

// Wrap returns the Reconciler of inner. cl reads planes (the manager's
// client); apiReader reads Leases, holders and workloads and must be
// uncached, because a workload the cache has not seen yet would let a realm
// go that it still writes. opts are further claimmw options, such as an
// event recorder.
func Wrap(inner reconcile.Reconciler, operatorNamespace string, cl client.Client, apiReader client.Reader, opts ...claimmw.Option) (*Reconciler, error) {
	claimer, err := claim.New(apiReader, cl, Config(operatorNamespace),
		claim.WithLiveness(claim.HolderExistsAs(apiReader, &portapi.IdentityPlane{})),
		claim.WithMessages(Message),
	)
	if err != nil {
		return nil, err
	}
	k := keeper{claimer: claimer, reader: apiReader}
	mw, err := claimmw.Wrap(inner, append([]claimmw.Option{
		claimmw.For(&portapi.IdentityPlane{}),
		claimmw.WithClient(cl),
		claimmw.WithAPIReader(apiReader),
		claimmw.WithClaimer(claimer),
		claimmw.WithKeys(k.keys),
		claimmw.WithFinalizer(Finalizer),
		claimmw.WithRequeue(Requeue, Requeue),
	}, opts...)...)
	if err != nil {
		return nil, err
	}
	return &Reconciler{Middleware: mw, inner: inner, client: cl}, nil
}

// Reconcile runs the inner reconciler alone for a suspended plane that is
// not being deleted, and the middleware otherwise.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var plane portapi.IdentityPlane
	if err := r.client.Get(ctx, req.NamespacedName, &plane); err == nil && plane.Spec.Suspended && plane.DeletionTimestamp == nil {
		return r.inner.Reconcile(ctx, req)
	}
	return r.Middleware.Reconcile(ctx, req)
}

type keeper struct {
	claimer *claim.Claimer
	reader  client.Reader
}

// keys are the spec realm and every other realm the plane holds and must
// keep. Kept realms are named as keys because the middleware's sweep
// releases every claim its keys do not name; since the plane holds them,
// acquiring them again writes nothing. A plane that holds only its spec
// realm has nothing to keep, and its steady pass reads no workload.
func (k keeper) keys(ctx context.Context, obj client.Object) ([]string, error) {
	plane := obj.(*portapi.IdentityPlane) //nolint:forcetypeassert // claimmw.For(&portapi.IdentityPlane{})
	if plane.Spec.KeycloakURL == "" || plane.Spec.Realm == "" {
		return nil, errors.New("spec.keycloakURL and spec.realm are both required")
	}
	want, err := k.claimer.NormalizeKey(RealmKey(plane.Spec.KeycloakURL, plane.Spec.Realm))
	if err != nil {
		return nil, err
	}
	self, err := k.claimer.HolderOf(plane)
	if err != nil {
		return nil, err
	}
	held, err := k.held(ctx, self)
	if err != nil {
		return nil, err
	}
	others := slices.DeleteFunc(held, func(key string) bool { return key == want })
	if len(others) == 0 {
		return []string{want}, nil
	}
	keep, unnamed, err := k.written(ctx, plane)
	if err != nil {
		return nil, err
	}
	if status, err := NormalizeKey(RealmKey(plane.Status.KeycloakURL, plane.Status.Realm)); err == nil {
		keep = append(keep, status)
	}
	keys := []string{want}
	for _, key := range others {
		if unnamed || slices.Contains(keep, key) {
			keys = append(keys, key)
		}
	}
	return keys, nil
}

// written returns the realms the plane's live workloads may write,
// normalized; unnamed is true when one writes a realm it does not name.
func (k keeper) written(ctx context.Context, plane *portapi.IdentityPlane) (keys []string, unnamed bool, err error) {
	opts := []client.ListOption{client.InNamespace(plane.Namespace), client.MatchingLabels{PlaneLabel: plane.Name}}
	var deployments appsv1.DeploymentList
	var replicaSets appsv1.ReplicaSetList
	var pods corev1.PodList
	for _, list := range []client.ObjectList{&deployments, &replicaSets, &pods} {
		if err := k.reader.List(ctx, list, opts...); err != nil {
			return nil, false, fmt.Errorf("listing the workloads of plane %s: %w", plane.Name, err)
		}
	}
	type workload struct {
		annotations []map[string]string
		pod         corev1.PodSpec
	}
	var live []workload
	for _, d := range deployments.Items {
		if d.Spec.Replicas == nil || *d.Spec.Replicas > 0 || d.Status.Replicas > 0 {
			live = append(live, workload{[]map[string]string{d.Annotations, d.Spec.Template.Annotations}, d.Spec.Template.Spec})
		}
	}
	for _, rs := range replicaSets.Items {
		if rs.Spec.Replicas == nil || *rs.Spec.Replicas > 0 || rs.Status.Replicas > 0 {
			live = append(live, workload{[]map[string]string{rs.Annotations, rs.Spec.Template.Annotations}, rs.Spec.Template.Spec})
		}
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			live = append(live, workload{[]map[string]string{p.Annotations}, p.Spec})
		}
	}
	add := func(key string) {
		norm, err := NormalizeKey(key)
		if err != nil {
			unnamed = true // a realm we cannot read is a realm we do not know
			return
		}
		keys = append(keys, norm)
	}
	for _, w := range live {
		for _, a := range w.annotations {
			if v, ok := a[RealmAnnotation]; ok {
				add(v)
			}
		}
		for _, c := range append(w.pod.InitContainers, w.pod.Containers...) {
			var base, realm *corev1.EnvVar
			for i := range c.Env {
				switch c.Env[i].Name {
				case KeycloakURLEnv:
					base = &c.Env[i]
				case KeycloakRealmEnv:
					realm = &c.Env[i]
				}
			}
			switch {
			case base == nil && realm == nil:
			case base == nil || realm == nil || base.ValueFrom != nil || realm.ValueFrom != nil:
				unnamed = true
			default:
				add(RealmKey(base.Value, realm.Value))
			}
		}
	}
	return keys, unnamed, nil
}

// held returns the keys of every claim self holds, read uncached.
func (k keeper) held(ctx context.Context, self claim.Holder) ([]string, error) {
	recs, err := k.claimer.Holdings(ctx, self)
	if err != nil {
		return nil, fmt.Errorf("listing the realm claims of %s: %w", self, err)
	}
	keys := make([]string, 0, len(recs))
	for _, rec := range recs {
		keys = append(keys, rec.Key)
	}
	return keys, nil
}

// Message words outcomes as the hand-written claim did.
func Message(o claim.Outcome) string {
	if o.Reason == claim.ReasonHeldElsewhere {
		i := strings.LastIndex(o.Key, "/realms/")
		return fmt.Sprintf("Realm %q of Keycloak %s is claimed elsewhere, by IdentityPlane %s.", o.Key[i+len("/realms/"):], o.Key[:i], o.Holder.NamespacedName())
	}
	return claim.DefaultMessage(o)
}
