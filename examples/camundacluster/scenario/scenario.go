// Package scenario is the example operator's story as a list of steps: two
// CamundaClusters name one storage backend, one is Claimed and one Parked;
// the holder is deleted, the handover gate waits for its broker pod, and the
// successor takes the backend over with a larger fencing token; then a
// planned handover moves the backend to a third cluster.
//
// `make demo` plays the steps against an embedded control plane and prints
// each state; the controller's test plays the same steps, so `make test`
// proves the story the demo tells. A step acts as a user would (through an
// uncached client, like kubectl), then waits until the operator reached the
// state the step expects, and fails with what it saw when it does not.
// There is no kubelet and no StatefulSet controller on an embedded control
// plane: the steps create and delete the broker pods themselves.
package scenario

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/examples/camundacluster/api/v1alpha1"
	"github.com/ocf-claim/claim/examples/camundacluster/controller"
	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// The scenario's clusters and what they name.
const (
	Alpha   = "alpha"
	Bravo   = "bravo"
	Charlie = "charlie"
	// Storage is the backend both clusters name.
	Storage = "elasticsearch|https://es.data.svc:9200"
	// Realm is the Keycloak realm both clusters name.
	Realm = "https://keycloak.auth.svc/realms/camunda"
)

// DefaultTimeout bounds how long a step waits for the state it expects.
const DefaultTimeout = 30 * time.Second

// pollInterval is how often a step reads the state it waits for.
const pollInterval = 50 * time.Millisecond

// World is what the steps act on and what they remember between steps.
type World struct {
	// Client acts as the user: uncached, with CamundaCluster in its scheme.
	Client client.Client
	// Namespace holds the clusters; ClaimNamespace the operator's Leases.
	Namespace, ClaimNamespace string
	// Out receives the timeline; nil prints nothing.
	Out io.Writer
	// Timeout bounds each wait; zero means DefaultTimeout.
	Timeout time.Duration

	start  time.Time
	tokens map[string]claim.Token // the storage token each cluster was granted
}

// Step is one act of the scenario and the state it leads to.
type Step struct {
	// Title says what happens, for the timeline and for test names.
	Title string
	// Why says, for the timeline, what the step shows.
	Why string
	// Run acts and waits for the expected state; its error says what was
	// expected and what was seen.
	Run func(ctx context.Context, w *World) error
}

// Steps returns the scenario, in order.
func Steps() []Step {
	return []Step{
		{
			Title: "alpha claims the storage backend and the realm",
			Why:   "The first Create of a key's Lease wins. alpha holds both keys, runs one broker, and carries the grant's fencing token.",
			Run:   alphaClaims,
		},
		{
			Title: "bravo names the same backend and is parked",
			Why:   "bravo's Create meets alpha's Lease; alpha is alive, so bravo is Parked, names the holder, and renders zero brokers.",
			Run:   bravoParks,
		},
		{
			Title: "alpha's broker pod runs",
			Why:   "The demo plays the StatefulSet controller: the pod carries alpha's UID and the hashes of the keys it uses.",
			Run:   alphaBrokerRuns,
		},
		{
			Title: "alpha is deleted; the handover gate waits for its broker",
			Why: "A cluster being deleted no longer holds its keys, but its broker may still write: alpha's finalizer keeps the Lease " +
				"until its pods stop, and bravo's handover gate stays closed while one runs.",
			Run: alphaDeleted,
		},
		{
			Title: "alpha's broker stops; bravo takes over with a larger token",
			Why:   "The gate opens; bravo's one write is fenced on the Lease it read. Its token is greater than every earlier grant's.",
			Run:   bravoTakesOver,
		},
		{
			Title: "charlie names the backend and is parked behind bravo, whose broker runs",
			Why:   "A third cluster wants the backend while bravo holds it and runs a broker.",
			Run:   charlieParks,
		},
		{
			Title: "bravo is told to hand over to charlie (spec.handoverTo); it stops its broker first",
			Why: "A planned handover: bravo's Lease records charlie as its successor, and charlie waits for the commit. " +
				"bravo keeps the key and scales to zero; the middleware commits only after a pass in which its broker is gone.",
			Run: bravoHandsOver,
		},
		{
			Title: "bravo's broker stops; the handover commits and charlie holds the backend with a larger token",
			Why:   "No takeover and no liveness check: bravo hands its keys over itself. bravo still names the backend, so it is Parked.",
			Run:   charlieTakesOver,
		},
	}
}

// Run plays steps in order and stops at the first that fails.
func Run(ctx context.Context, w *World, steps []Step) error {
	for i, s := range steps {
		if err := w.RunStep(ctx, i+1, len(steps), s); err != nil {
			return err
		}
	}
	return nil
}

// RunStep plays one step, numbered n of total on the timeline.
func (w *World) RunStep(ctx context.Context, n, total int, s Step) error {
	if w.start.IsZero() {
		w.start = time.Now()
	}
	w.printf("\n== step %d/%d: %s\n", n, total, s.Title)
	if s.Why != "" {
		w.printf("   %s\n", s.Why)
	}
	if err := s.Run(ctx, w); err != nil {
		return fmt.Errorf("step %d (%s): %w", n, s.Title, err)
	}
	return nil
}

func alphaClaims(ctx context.Context, w *World) error {
	if err := w.createCluster(ctx, Alpha); err != nil {
		return err
	}
	cc, err := w.waitForCluster(ctx, "alpha Claimed with a storage token and one broker requested", Alpha, conditions.ReasonClaimed, 1, "")
	if err != nil {
		return err
	}
	w.rememberToken(cc)
	return w.show(ctx, true)
}

func bravoParks(ctx context.Context, w *World) error {
	if err := w.createCluster(ctx, Bravo); err != nil {
		return err
	}
	if err := w.parkedBehind(ctx, "bravo Parked, naming alpha as the holder, with zero brokers", Bravo, Alpha); err != nil {
		return err
	}
	return w.show(ctx, false)
}

func alphaBrokerRuns(ctx context.Context, w *World) error { return w.startBroker(ctx, Alpha) }

func alphaDeleted(ctx context.Context, w *World) error {
	alpha := &v1alpha1.CamundaCluster{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: Alpha}}
	if err := w.Client.Delete(ctx, alpha); err != nil {
		return fmt.Errorf("deleting alpha: %w", err)
	}
	w.logf("deleted CamundaCluster %s", Alpha)
	pod := fmt.Sprintf("pod %s/%s-0", w.Namespace, Alpha)
	if _, err := w.waitForCluster(ctx, "bravo WaitingForHandover, naming alpha's broker pod", Bravo, conditions.ReasonWaitingForHandover, 0, pod); err != nil {
		return err
	}
	if _, err := w.waitFor(ctx, "alpha still there (its finalizer waits for its broker), scaled to zero, still holding the Lease", func(ctx context.Context) (bool, string, error) {
		cc := &v1alpha1.CamundaCluster{}
		if err := w.Client.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: Alpha}, cc); err != nil {
			return false, fmt.Sprintf("alpha: %v", err), nil
		}
		if replicas, err := w.replicas(ctx, Alpha); err != nil || replicas != 0 {
			return false, fmt.Sprintf("alpha's StatefulSet asks for %d brokers (%v)", replicas, err), nil
		}
		l, err := w.storageLease(ctx)
		if err != nil {
			return false, err.Error(), nil //nolint:nilerr // not there yet: report what was seen and keep waiting
		}
		if uid := l.Annotations[backends.DefaultHolderUIDAnnotation]; uid != string(cc.UID) {
			return false, fmt.Sprintf("the Lease names holder UID %s, alpha is %s", uid, cc.UID), nil
		}
		return true, "", nil
	}); err != nil {
		return err
	}
	return w.show(ctx, true)
}

// takesOver stops the broker of the holder from and waits until to holds
// the claim with one broker requested and a storage token newer than
// from's.
func (w *World) takesOver(ctx context.Context, to, from string) error {
	if err := w.stopBroker(ctx, from); err != nil {
		return err
	}
	cc, err := w.waitForCluster(ctx, to+" Claimed with one broker requested", to, conditions.ReasonClaimed, 1, "")
	if err != nil {
		return err
	}
	w.rememberToken(cc)
	return newer(to, w.tokens[to], from, w.tokens[from])
}

func bravoTakesOver(ctx context.Context, w *World) error {
	if err := w.takesOver(ctx, Bravo, Alpha); err != nil {
		return err
	}
	w.logf("bravo's storage token %s > alpha's %s: the backend refuses alpha's writes from now on", w.tokens[Bravo], w.tokens[Alpha])
	if _, err := w.waitFor(ctx, "alpha gone (released, finalizer removed)", func(ctx context.Context) (bool, string, error) {
		err := w.Client.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: Alpha}, &v1alpha1.CamundaCluster{})
		return apierrors.IsNotFound(err), fmt.Sprintf("alpha: %v", err), nil
	}); err != nil {
		return err
	}
	return w.show(ctx, true)
}

func charlieParks(ctx context.Context, w *World) error {
	if err := w.startBroker(ctx, Bravo); err != nil {
		return err
	}
	if err := w.createCluster(ctx, Charlie); err != nil {
		return err
	}
	if err := w.parkedBehind(ctx, "charlie Parked, naming bravo as the holder", Charlie, Bravo); err != nil {
		return err
	}
	return w.show(ctx, false)
}

func bravoHandsOver(ctx context.Context, w *World) error {
	bravo := &v1alpha1.CamundaCluster{}
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: Bravo}, bravo); err != nil {
		return fmt.Errorf("reading bravo: %w", err)
	}
	base := bravo.DeepCopy()
	bravo.Spec.HandoverTo = Charlie
	if err := w.Client.Patch(ctx, bravo, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("setting bravo's spec.handoverTo: %w", err)
	}
	w.logf("set bravo's spec.handoverTo=%s", Charlie)
	if _, err := w.waitForCluster(ctx, "charlie WaitingForHandover on the prepared handover", Charlie, conditions.ReasonWaitingForHandover, 0, "planned handover"); err != nil {
		return err
	}
	pod := Bravo + "-0"
	if _, err := w.waitFor(ctx, "bravo still Claimed, scaled to zero, Ready=HandingOver naming its broker", func(ctx context.Context) (bool, string, error) {
		if ok, seen, err := w.clusterIs(ctx, Bravo, conditions.ReasonClaimed, 0, ""); !ok || err != nil {
			return ok, seen, err
		}
		cc := &v1alpha1.CamundaCluster{}
		if err := w.Client.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: Bravo}, cc); err != nil {
			return false, err.Error(), nil //nolint:nilerr // not there yet: report what was seen and keep waiting
		}
		ready := meta.FindStatusCondition(cc.Status.Conditions, string(conditions.Ready))
		if ready == nil || ready.Reason != string(controller.ReasonHandingOver) || !strings.Contains(ready.Message, pod) {
			return false, fmt.Sprintf("bravo's Ready is %+v", ready), nil
		}
		return true, "", nil
	}); err != nil {
		return err
	}
	return w.show(ctx, true)
}

func charlieTakesOver(ctx context.Context, w *World) error {
	if err := w.takesOver(ctx, Charlie, Bravo); err != nil {
		return err
	}
	w.logf("charlie's storage token %s > bravo's %s", w.tokens[Charlie], w.tokens[Bravo])
	if err := w.parkedBehind(ctx, "bravo Parked, naming charlie, without a token", Bravo, Charlie); err != nil {
		return err
	}
	return w.show(ctx, true)
}

// startBroker creates pod <cluster>-0 from the cluster's pod template, as
// the StatefulSet controller and a kubelet would.
func (w *World) startBroker(ctx context.Context, cluster string) error {
	sts := &appsv1.StatefulSet{}
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: cluster}, sts); err != nil {
		return fmt.Errorf("reading %s's StatefulSet: %w", cluster, err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: cluster + "-0", Labels: sts.Spec.Template.Labels},
		Spec:       sts.Spec.Template.Spec,
	}
	if err := w.Client.Create(ctx, pod); err != nil {
		return fmt.Errorf("creating %s's broker pod: %w", cluster, err)
	}
	w.logf("created pod %s with the labels of %s's pod template (no kubelet here):", pod.Name, cluster)
	for _, k := range []string{controller.LabelClusterUID, controller.LabelStorageClaim, controller.LabelRealmClaim} {
		w.printf("             %s=%s\n", k, pod.Labels[k])
	}
	return nil
}

// stopBroker deletes pod <cluster>-0: without a kubelet, an unscheduled
// pod is removed at once.
func (w *World) stopBroker(ctx context.Context, cluster string) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: cluster + "-0"}}
	if err := w.Client.Delete(ctx, pod); err != nil {
		return fmt.Errorf("deleting %s's broker pod: %w", cluster, err)
	}
	w.logf("deleted pod %s (its broker stopped)", pod.Name)
	return nil
}

// createCluster creates the named cluster with the scenario's backend and
// realm.
func (w *World) createCluster(ctx context.Context, name string) error {
	cc := &v1alpha1.CamundaCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: name},
		Spec:       v1alpha1.CamundaClusterSpec{SecondaryStorage: Storage, KeycloakRealm: Realm, Replicas: 1},
	}
	if err := w.Client.Create(ctx, cc); err != nil {
		return fmt.Errorf("creating CamundaCluster %s: %w", name, err)
	}
	w.logf("created CamundaCluster %s: secondaryStorage=%s keycloakRealm=%s", name, Storage, Realm)
	return nil
}

// clusterIs reports whether the cluster's claim condition has reason (and
// a message containing mention, when given), its StatefulSet asks for
// replicas brokers, and its status carries a token exactly when granted.
func (w *World) clusterIs(ctx context.Context, name string, reason conditions.Reason, replicas int32, mention string) (bool, string, error) {
	cc := &v1alpha1.CamundaCluster{}
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: name}, cc); err != nil {
		return false, fmt.Sprintf("%s: %v", name, err), nil
	}
	c := meta.FindStatusCondition(cc.Status.Conditions, string(conditions.Claimed))
	switch {
	case c == nil:
		return false, name + " has no Claimed condition", nil
	case c.Reason != string(reason):
		return false, fmt.Sprintf("%s is %s: %s", name, c.Reason, c.Message), nil
	case !strings.Contains(c.Message, mention):
		return false, fmt.Sprintf("%s's message %q does not name %s", name, c.Message, mention), nil
	case reason.Status() == metav1.ConditionTrue && cc.Status.StorageToken == "":
		return false, name + " is granted but shows no storage token", nil
	case reason.Status() != metav1.ConditionTrue && cc.Status.StorageToken != "":
		return false, fmt.Sprintf("%s is not granted but shows storage token %s", name, cc.Status.StorageToken), nil
	}
	got, err := w.replicas(ctx, name)
	if err != nil || got != replicas {
		return false, fmt.Sprintf("%s's StatefulSet asks for %d brokers, want %d (%v)", name, got, replicas, err), nil
	}
	return true, "", nil
}

func (w *World) replicas(ctx context.Context, name string) (int32, error) {
	sts := &appsv1.StatefulSet{}
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: name}, sts); err != nil {
		return -1, fmt.Errorf("reading StatefulSet %s: %w", name, err)
	}
	if sts.Spec.Replicas == nil {
		return -1, nil
	}
	return *sts.Spec.Replicas, nil
}

// waitForCluster waits, as waitFor does, until clusterIs holds for name:
// its claim condition has reason and mentions mention (when given), and
// its StatefulSet asks for replicas brokers. want says so in words.
func (w *World) waitForCluster(ctx context.Context, want, name string, reason conditions.Reason, replicas int32, mention string) (map[string]*v1alpha1.CamundaCluster, error) {
	return w.waitFor(ctx, want, func(ctx context.Context) (bool, string, error) {
		return w.clusterIs(ctx, name, reason, replicas, mention)
	})
}

// parkedBehind waits until cluster is Parked with zero brokers requested,
// its condition naming the cluster holder as the holder of the key (want
// says so, for the timeline).
func (w *World) parkedBehind(ctx context.Context, want, cluster, holder string) error {
	named := fmt.Sprintf("%s %s/%s", v1alpha1.Kind, w.Namespace, holder)
	_, err := w.waitForCluster(ctx, want, cluster, conditions.ReasonParked, 0, named)
	return err
}

// waitFor polls cond until it holds, and returns the cluster state at the
// end for the caller's checks. want says what is awaited, for the timeline
// and the error.
func (w *World) waitFor(ctx context.Context, want string, cond func(context.Context) (bool, string, error)) (map[string]*v1alpha1.CamundaCluster, error) {
	timeout := w.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, seen, err := cond(ctx)
		if err != nil {
			return nil, err
		}
		if ok {
			w.logf("ok: %s (after %s)", want, time.Since(began).Round(time.Millisecond))
			return w.clusters(ctx)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waited %s for %s; last seen: %s", timeout, want, seen)
		case <-time.After(pollInterval):
		}
	}
}

func (w *World) clusters(ctx context.Context) (map[string]*v1alpha1.CamundaCluster, error) {
	var list v1alpha1.CamundaClusterList
	if err := w.Client.List(ctx, &list, client.InNamespace(w.Namespace)); err != nil {
		return nil, fmt.Errorf("listing CamundaClusters: %w", err)
	}
	out := map[string]*v1alpha1.CamundaCluster{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

func (w *World) rememberToken(ccs map[string]*v1alpha1.CamundaCluster) {
	if w.tokens == nil {
		w.tokens = map[string]claim.Token{}
	}
	for name, cc := range ccs {
		if cc.Status.StorageToken != "" {
			w.tokens[name] = claim.Token(cc.Status.StorageToken)
		}
	}
}

// storageLease reads the Lease of the scenario's storage key.
func (w *World) storageLease(ctx context.Context) (*coordinationv1.Lease, error) {
	key, err := controller.StorageKey(w.Namespace, Storage)
	if err != nil {
		return nil, err
	}
	// The Claimer fills in the defaults of the operator's claim config,
	// among them the naming of Leases.
	cl, err := claim.New(w.Client, w.Client, controller.ClaimConfig(w.ClaimNamespace))
	if err != nil {
		return nil, err
	}
	name := cl.Config().NameFunc(key)
	l := &coordinationv1.Lease{}
	if err := w.Client.Get(ctx, client.ObjectKey{Namespace: w.ClaimNamespace, Name: name}, l); err != nil {
		return nil, fmt.Errorf("reading the Lease of %q: %w", key, err)
	}
	return l, nil
}

// newer checks that the token a successor was granted is newer than its
// predecessor's.
func newer(name string, tok claim.Token, prevName string, prev claim.Token) error {
	cmp, err := tok.Compare(prev)
	if err != nil {
		return fmt.Errorf("comparing %s's token with %s's: %w", name, prevName, err)
	}
	if cmp <= 0 {
		return fmt.Errorf("%s's token %s is not newer than %s's %s", name, tok, prevName, prev)
	}
	return nil
}
