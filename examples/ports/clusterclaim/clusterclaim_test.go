package clusterclaim_test

import (
	"context"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/examples/ports/clusterclaim"
	"github.com/ocf-claim/claim/examples/ports/internal/portapi"
	"github.com/ocf-claim/claim/examples/ports/internal/porttest"
	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

var env *envtest.Env

// TestMain installs Backup and Restore but not Export: Export stands for an
// optional kind the API server does not serve.
func TestMain(m *testing.M) { porttest.Main(m, &env, portapi.BackupCRD(), portapi.RestoreCRD()) }

const cluster = "camunda"

// fixture is the ported operator in one namespace: a Claimer shared by the
// Backup and Restore middlewares.
type fixture struct {
	ns      string
	client  client.Client
	backups *claimmw.Middleware
	restore *claimmw.Middleware
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := env.TestClient(t)
	claimer, err := clusterclaim.NewClaimer(env.APIReader, env.APIReader, c)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{ns: env.Namespace(t), client: c}
	noop := reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil })
	for _, mw := range []struct {
		into  **claimmw.Middleware
		proto client.Object
	}{{&f.backups, &portapi.Backup{}}, {&f.restore, &portapi.Restore{}}} {
		opts := append(clusterclaim.Options(claimer, mw.proto), claimmw.WithClient(c), claimmw.WithAPIReader(env.APIReader), claimmw.WithMetrics(false))
		if *mw.into, err = claimmw.Wrap(noop, opts...); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) key() string { return clusterclaim.Key(f.ns, cluster) }

// backup creates a Backup of cluster and gives it status.
func (f *fixture) backup(t *testing.T, name string, status portapi.JobStatus) *portapi.Backup {
	t.Helper()
	b := &portapi.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}, Spec: portapi.JobSpec{Cluster: cluster}}
	f.create(t, b, func() { b.Status = status })
	return b
}

func (f *fixture) restoreOf(t *testing.T, name string, status portapi.JobStatus) *portapi.Restore {
	t.Helper()
	r := &portapi.Restore{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name}, Spec: portapi.JobSpec{Cluster: cluster}}
	f.create(t, r, func() { r.Status = status })
	return r
}

func (f *fixture) create(t *testing.T, obj client.Object, setStatus func()) {
	t.Helper()
	if err := f.client.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %s: %v", obj.GetName(), err)
	}
	setStatus()
	if err := f.client.Status().Update(context.Background(), obj); err != nil {
		t.Fatalf("writing the status of %s: %v", obj.GetName(), err)
	}
}

// reconcile runs one pass of obj's middleware and returns the result and
// the claim condition as the API server has it.
func (f *fixture) reconcile(t *testing.T, obj client.Object) (reconcile.Result, metav1.Condition) {
	t.Helper()
	mw := f.restore
	if _, ok := obj.(*portapi.Backup); ok {
		mw = f.backups
	}
	res := porttest.Pass(t, mw, obj)
	cond, exists := porttest.ClaimCondition(t, env.APIReader, obj)
	if !exists {
		t.Fatalf("%s is gone", obj.GetName())
	}
	if cond == nil {
		t.Fatalf("%s has no claim condition", obj.GetName())
	}
	return res, *cond
}

func (f *fixture) lease(t *testing.T) (*coordinationv1.Lease, bool) {
	t.Helper()
	return porttest.Lease(t, env.APIReader, f.ns, clusterclaim.LeasePrefix, f.key())
}

// legacyLease writes the cluster's Lease as the hand-written claim did: in
// the cluster's namespace, its prefix and annotations, kind but no
// apiVersion, a label by holder UID.
func (f *fixture) legacyLease(t *testing.T, kind, name string, uid types.UID) *coordinationv1.Lease {
	t.Helper()
	return porttest.CreateLegacyLease(t, env.Client, porttest.LegacyLease{
		Namespace: f.ns, Prefix: clusterclaim.LeasePrefix, Key: f.key(), Identity: kind + "/" + name,
		Labels: map[string]string{clusterclaim.HolderUIDLabel: string(uid)},
		Annotations: map[string]string{
			clusterclaim.KeyAnnotation:             f.key(),
			clusterclaim.HolderKindAnnotation:      kind,
			clusterclaim.HolderNamespaceAnnotation: f.ns,
			clusterclaim.HolderNameAnnotation:      name,
			clusterclaim.HolderUIDAnnotation:       string(uid),
		},
	})
}

var (
	running   = portapi.JobStatus{Phase: portapi.PhaseRunning}
	completed = portapi.JobStatus{Phase: portapi.PhaseCompleted}
)

func TestTheLivenessOfEachHolderKind(t *testing.T) {
	failed := portapi.JobStatus{Phase: portapi.PhaseFailed}
	stuck := portapi.JobStatus{Phase: portapi.PhaseFailed, ResumeFailed: true}
	for _, tc := range []struct {
		name string
		// kind and holder name the recorded holder. When job is set, a
		// Backup or Restore of that name exists with that status, and the
		// record names its UID unless recreated; otherwise the record names
		// a UID no object has.
		kind, holder string
		job          *portapi.JobStatus
		recreated    bool
		want         conditions.Reason
	}{
		{name: "a running Backup keeps the cluster", kind: "Backup", holder: "b", job: &running, want: conditions.ReasonParked},
		{name: "a completed Backup lets go", kind: "Backup", holder: "b", job: &completed, want: conditions.ReasonClaimed},
		{name: "a failed Backup that resumed its cluster lets go", kind: "Backup", holder: "b", job: &failed, want: conditions.ReasonClaimed},
		{name: "a failed Backup that could not resume its cluster keeps it", kind: "Backup", holder: "b", job: &stuck, want: conditions.ReasonParked},
		{name: "a deleted Backup lets go", kind: "Backup", holder: "b", want: conditions.ReasonClaimed},
		{name: "a running Backup recreated under the holder's name is another holder", kind: "Backup", holder: "b", job: &running, recreated: true, want: conditions.ReasonClaimed},
		{name: "a running Restore keeps the cluster", kind: "Restore", holder: "other", job: &running, want: conditions.ReasonParked},
		{name: "a completed Restore lets go", kind: "Restore", holder: "other", job: &completed, want: conditions.ReasonClaimed},
		{name: "a holder of a kind the liveness does not know keeps the cluster", kind: "Snapshot", holder: "s", want: conditions.ReasonParked},
		{name: "a holder of a kind the server does not serve lets go", kind: "Export", holder: "e", want: conditions.ReasonClaimed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			// Given the cluster's Lease, as the hand-written claim wrote it,
			// naming the holder
			kind, name, uid := tc.kind, tc.holder, uuid.NewUUID()
			if tc.job != nil {
				var job metav1.Object
				if kind == "Restore" {
					job = f.restoreOf(t, name, *tc.job)
				} else {
					job = f.backup(t, name, *tc.job)
				}
				if !tc.recreated {
					uid = job.GetUID()
				}
			}
			f.legacyLease(t, kind, name, uid)
			// When a Restore of the cluster reconciles
			r := f.restoreOf(t, "r", running)
			res, cond := f.reconcile(t, r)
			// Then it parks behind a live holder, naming it, or takes over
			porttest.WantCondition(t, "restore", cond, tc.want)
			if tc.want == conditions.ReasonParked {
				porttest.WantCondition(t, "restore", cond, tc.want, kind+" "+name)
				if res.RequeueAfter != clusterclaim.Requeue {
					t.Fatalf("requeue %s, want %s", res.RequeueAfter, clusterclaim.Requeue)
				}
			}
		})
	}
}

func TestALegacyLeaseIsHeldByItsHolderAfterThePort(t *testing.T) {
	f := newFixture(t)
	// Given a running Backup holding its cluster through a Lease the
	// hand-written claim wrote
	b := f.backup(t, "b", running)
	legacy := f.legacyLease(t, "Backup", b.Name, b.UID)
	r := f.restoreOf(t, "r", running)

	// When the ported operator reconciles the Backup and a Restore
	_, condB := f.reconcile(t, b)
	_, condR := f.reconcile(t, r)

	// Then the Backup re-enters without a write and the Restore parks
	// naming it: no double grant across the upgrade
	porttest.WantCondition(t, "backup", condB, conditions.ReasonClaimed)
	porttest.WantCondition(t, "restore", condR, conditions.ReasonParked, "Backup b")
	if l, _ := f.lease(t); l.ResourceVersion != legacy.ResourceVersion {
		t.Fatal("the legacy Lease was written on re-entry")
	}
}

func TestAHoldingBackupReentersWhenAnOlderSiblingAppears(t *testing.T) {
	f := newFixture(t)
	// Given an older Backup of another cluster, and a younger one that
	// takes this cluster
	older := f.backup(t, "older", running)
	older.Spec.Cluster = "elsewhere"
	if err := f.client.Update(context.Background(), older); err != nil {
		t.Fatal(err)
	}
	younger := f.backup(t, "younger", running)
	_, cond := f.reconcile(t, younger)
	porttest.WantCondition(t, "younger", cond, conditions.ReasonClaimed)

	// When the older Backup turns to this cluster and both reconcile
	older.Spec.Cluster = cluster
	if err := f.client.Update(context.Background(), older); err != nil {
		t.Fatal(err)
	}
	_, condOlder := f.reconcile(t, older)
	_, condYounger := f.reconcile(t, younger)

	// Then the Lease decides, not age: the holder keeps the cluster and the
	// older one waits for it (the tie-break by age never makes both wait)
	porttest.WantCondition(t, "older", condOlder, conditions.ReasonParked, "Backup younger")
	porttest.WantCondition(t, "younger", condYounger, conditions.ReasonClaimed)
}

func TestTheFirstBackupGoesFirstWhileTheClusterIsFree(t *testing.T) {
	f := newFixture(t)
	// Given two Backups of a free cluster, created in this order (in the
	// same second the name breaks the tie, and "older" sorts first too)
	older := f.backup(t, "older", running)
	younger := f.backup(t, "younger", running)
	// When the younger reconciles first, it yields to the older one
	_, cond := f.reconcile(t, younger)
	porttest.WantCondition(t, "younger", cond, conditions.ReasonNotFirst, "older")
	// And the older one takes the cluster
	_, cond = f.reconcile(t, older)
	porttest.WantCondition(t, "older", cond, conditions.ReasonClaimed)
}

func TestAFinishedHolderFreesTheCluster(t *testing.T) {
	f := newFixture(t)
	// Given a running Backup holding the cluster in a Lease of the
	// cluster's namespace under the legacy name, and a Restore parked behind it
	b := f.backup(t, "b", running)
	_, cond := f.reconcile(t, b)
	porttest.WantCondition(t, "backup", cond, conditions.ReasonClaimed)
	l, ok := f.lease(t)
	if !ok || l.Annotations[clusterclaim.HolderKindAnnotation] != "Backup" {
		t.Fatalf("Lease %v after the grant, want one naming the Backup", l)
	}
	r := f.restoreOf(t, "r", running)
	_, cond = f.reconcile(t, r)
	porttest.WantCondition(t, "restore", cond, conditions.ReasonParked)

	// When the Backup completes and reconciles
	if err := env.APIReader.Get(context.Background(), client.ObjectKeyFromObject(b), b); err != nil {
		t.Fatal(err)
	}
	b.Status.Phase = portapi.PhaseCompleted
	if err := f.client.Status().Update(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t, b)

	// Then its Lease is gone and the Restore acquires the free cluster
	if _, ok := f.lease(t); ok {
		t.Fatal("the finished Backup's Lease survived its sweep")
	}
	_, cond = f.reconcile(t, r)
	porttest.WantCondition(t, "restore", cond, conditions.ReasonClaimed)
}
