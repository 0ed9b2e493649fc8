package chaos_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
)

// The hostile-input tables cover what pkg/claim (bad keys, holders without
// UID) and pkg/backends/lease (Leases created foreign) do not: Leases of
// ours edited by someone else, neighbours in the same namespace, a namespace
// we do not manage, names at their limits, and missing RBAC. Nothing may be
// taken over or released that the protocol does not allow.

const hostileKey = "elasticsearch|https://es.data.svc:9200"

type party struct {
	c    *claim.Claimer
	self claim.Holder
	cm   *corev1.ConfigMap
}

// defaulted returns the Config a Claimer in ns uses, every default filled.
func defaulted(ns string) backends.Config {
	return claim.Config{Namespace: ns}.Storage()
}

func admin(t *testing.T) client.Client {
	t.Helper()
	c, err := env.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newParty(t *testing.T, ns, name string) *party {
	t.Helper()
	c := admin(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Create(context.Background(), cm); err != nil {
		t.Fatalf("creating holder %s: %v", name, err)
	}
	cl, err := claim.New(c, c, claim.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	self, err := cl.HolderOf(cm)
	if err != nil {
		t.Fatal(err)
	}
	return &party{c: cl, self: self, cm: cm}
}

func (p *party) acquire(t *testing.T) claim.Outcome {
	t.Helper()
	_, o, err := p.c.Acquire(context.Background(), hostileKey, p.self)
	if err != nil {
		t.Fatalf("Acquire(%s) = %v", p.self, err)
	}
	return o
}

func getLease(t *testing.T, ns, name string) (*coordinationv1.Lease, bool) {
	t.Helper()
	var l coordinationv1.Lease
	err := env.APIReader.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &l)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return &l, true
}

func TestLeasesEditedBySomeoneElse(t *testing.T) {
	recordName := defaulted("unused").RecordName
	tests := []struct {
		name string
		edit func(l *coordinationv1.Lease, a, b claim.Holder)
		// What a (the holder the Lease was written for) and b (another live
		// holder) are told afterwards.
		wantA, wantB claim.Reason
		// Whether the Lease survives a's release sweep.
		survivesRelease bool
		// What b is told once a's object is deleted (liveness judges a gone).
		wantBAfterDelete claim.Reason
	}{
		{
			name:  "given every annotation removed then it is foreign to both, and survives the sweep and a's deletion",
			edit:  func(l *coordinationv1.Lease, _, _ claim.Holder) { l.Annotations = nil },
			wantA: claim.ReasonForeign, wantB: claim.ReasonForeign, survivesRelease: true, wantBAfterDelete: claim.ReasonForeign,
		},
		{
			name: "given the key annotation changed then it is foreign to both and survives",
			edit: func(l *coordinationv1.Lease, _, _ claim.Holder) {
				l.Annotations[backends.DefaultKeyAnnotation] = "rdbms|other:5432/db"
			},
			wantA: claim.ReasonForeign, wantB: claim.ReasonForeign, survivesRelease: true, wantBAfterDelete: claim.ReasonForeign,
		},
		{
			name:  "given the holder UID label removed then a still holds, its re-entry labels the Lease again, and its sweep finds it",
			edit:  func(l *coordinationv1.Lease, _, _ claim.Holder) { delete(l.Labels, backends.DefaultHolderUIDLabel) },
			wantA: claim.ReasonHeld, wantB: claim.ReasonHeldElsewhere, survivesRelease: false, wantBAfterDelete: claim.ReasonAcquired,
		},
		{
			name: "given holderIdentity rewritten to spell b then a still holds and b is not taken for the holder",
			edit: func(l *coordinationv1.Lease, _, b claim.Holder) {
				l.Spec.HolderIdentity = ptr.To(b.Identity(lease.HolderIdentityLimit))
			},
			wantA: claim.ReasonHeld, wantB: claim.ReasonHeldElsewhere, survivesRelease: false, wantBAfterDelete: claim.ReasonAcquired,
		},
		{
			name: "given client-go leader election wrote its spec fields then the annotations still decide",
			edit: func(l *coordinationv1.Lease, _, _ claim.Holder) {
				now := metav1.NewMicroTime(time.Now())
				l.Spec.HolderIdentity = ptr.To("operator-7d9f_0b6a3c1e-elector")
				l.Spec.LeaseDurationSeconds = ptr.To[int32](15)
				l.Spec.AcquireTime, l.Spec.RenewTime = &now, &now
				l.Spec.LeaseTransitions = ptr.To[int32](4)
			},
			wantA: claim.ReasonHeld, wantB: claim.ReasonHeldElsewhere, survivesRelease: false, wantBAfterDelete: claim.ReasonAcquired,
		},
		{
			name: "given the holder UID annotation emptied then it is foreign and survives",
			edit: func(l *coordinationv1.Lease, _, _ claim.Holder) {
				l.Annotations[backends.DefaultHolderUIDAnnotation] = ""
			},
			wantA: claim.ReasonForeign, wantB: claim.ReasonForeign, survivesRelease: true, wantBAfterDelete: claim.ReasonForeign,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			ns := env.Namespace(t)
			a, b := newParty(t, ns, "a"), newParty(t, ns, "b")
			// Given a holds the key and someone edits its Lease
			if o := a.acquire(t); o.Reason != claim.ReasonAcquired {
				t.Fatalf("a: %s, want Acquired", o.Reason)
			}
			l, _ := getLease(t, ns, recordName(hostileKey))
			tt.edit(l, a.self, b.self)
			if err := admin(t).Update(ctx, l); err != nil {
				t.Fatalf("editing the Lease: %v", err)
			}
			// When both acquire
			// Then each is told what the annotations say, never more
			if o := a.acquire(t); o.Reason != tt.wantA {
				t.Errorf("a: %s (%s), want %s", o.Reason, o.Message, tt.wantA)
			}
			ob := b.acquire(t)
			if ob.Reason != tt.wantB {
				t.Errorf("b: %s (%s), want %s", ob.Reason, ob.Message, tt.wantB)
			}
			if ob.Reason == claim.ReasonHeldElsewhere && !ob.Holder.Is(a.self) {
				t.Errorf("b was told %s holds the key, want a (%s)", ob.Holder, a.self)
			}
			// When b sweeps, nothing of a's is released
			if err := b.c.Release(ctx, b.self); err != nil {
				t.Fatalf("b's release: %v", err)
			}
			if _, ok := getLease(t, ns, recordName(hostileKey)); !ok {
				t.Fatal("b's release sweep deleted a Lease it did not hold")
			}
			// When a sweeps
			if err := a.c.Release(ctx, a.self); err != nil {
				t.Fatalf("a's release: %v", err)
			}
			if _, ok := getLease(t, ns, recordName(hostileKey)); ok != tt.survivesRelease {
				t.Errorf("after a's release the Lease exists = %v, want %v", ok, tt.survivesRelease)
			}
			// When a's object is deleted
			if err := admin(t).Delete(ctx, a.cm); err != nil {
				t.Fatal(err)
			}
			if o := b.acquire(t); o.Reason != tt.wantBAfterDelete {
				t.Errorf("b after a is gone: %s (%s), want %s", o.Reason, o.Message, tt.wantBAfterDelete)
			}
		})
	}
}

func TestNeighbourLeasesAreNeverTouched(t *testing.T) {
	ctx := context.Background()
	ns, other := env.Namespace(t), env.Namespace(t)
	a := newParty(t, ns, "a")
	c := admin(t)

	// Given a client-go leader-election Lease in the claim's namespace, a
	// Lease that carries a's sweep label but none of our annotations, and a
	// complete record of a's for the same key in a namespace this claimer
	// does not manage
	now := metav1.NewMicroTime(time.Now())
	elector := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-operator-leader"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("operator-7d9f_0b6a"), LeaseDurationSeconds: ptr.To[int32](15),
			AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To[int32](0)},
	}
	labelled := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "copied-labels",
		Labels: map[string]string{backends.DefaultHolderUIDLabel: string(a.self.UID)}}}
	elsewhere := lease.Encode(defaulted(other), claim.Record{Key: hostileKey, Holder: a.self})
	for _, l := range []*coordinationv1.Lease{elector, labelled, elsewhere} {
		if err := c.Create(ctx, l); err != nil {
			t.Fatal(err)
		}
	}

	// When a acquires the key, holds it, and releases everything
	if o := a.acquire(t); o.Reason != claim.ReasonAcquired {
		t.Fatalf("a: %s (%s), want Acquired: a record in another namespace must not count", o.Reason, o.Message)
	}
	if err := a.c.Release(ctx, a.self); err != nil {
		t.Fatalf("release: %v", err)
	}

	// Then a's own record is gone and every neighbour is untouched
	if _, ok := getLease(t, ns, a.c.Config().NameFunc(hostileKey)); ok {
		t.Error("a's own record survived its release")
	}
	for _, want := range []*coordinationv1.Lease{elector, labelled, elsewhere} {
		got, ok := getLease(t, want.Namespace, want.Name)
		switch {
		case !ok:
			t.Errorf("Lease %s/%s was deleted", want.Namespace, want.Name)
		case got.ResourceVersion != want.ResourceVersion:
			t.Errorf("Lease %s/%s was written (version %s -> %s)", want.Namespace, want.Name, want.ResourceVersion, got.ResourceVersion)
		}
	}
}

func TestAHolderNameAtItsLimitInANamespaceAtItsLimit(t *testing.T) {
	ctx := context.Background()
	c := admin(t)
	// Given a 63-character namespace and two holders with 253-character names
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t-" + strings.Repeat("n", validation.DNS1123LabelMaxLength-4) + "-x"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	long := func(s string) string { return strings.Repeat(s+".", 126)[:validation.DNS1123SubdomainMaxLength-1] + s }
	a, b := newParty(t, ns.Name, long("a")), newParty(t, ns.Name, long("b"))
	if len(a.self.Name) != 253 || len(ns.Name) != 63 {
		t.Fatalf("name %d, namespace %d characters", len(a.self.Name), len(ns.Name))
	}

	// When a acquires and b tries
	if o := a.acquire(t); o.Reason != claim.ReasonAcquired {
		t.Fatalf("a: %s (%s)", o.Reason, o.Message)
	}
	ob := b.acquire(t)

	// Then the Lease is valid, bounded where it must be and exact where it
	// decides, and b is told the full name of the holder
	l, _ := getLease(t, ns.Name, a.c.Config().NameFunc(hostileKey))
	if n := len(*l.Spec.HolderIdentity); n > lease.HolderIdentityLimit {
		t.Errorf("holderIdentity is %d bytes", n)
	}
	if got := l.Annotations[backends.DefaultHolderNameAnnotation]; got != a.self.Name {
		t.Errorf("holder-name annotation = %q, want the full name", got)
	}
	if ob.Reason != claim.ReasonHeldElsewhere || !strings.Contains(ob.Message, a.self.Name) {
		t.Errorf("b: %s %q, want HeldElsewhere naming %s", ob.Reason, ob.Message, a.self.Name)
	}
	// And liveness reads the long-named holder back: b takes over once a is gone
	if err := c.Delete(ctx, a.cm); err != nil {
		t.Fatal(err)
	}
	if o := b.acquire(t); o.Reason != claim.ReasonTakenOver {
		t.Errorf("b after a is gone: %s (%s), want TakenOver", o.Reason, o.Message)
	}
	if err := b.c.Release(ctx, b.self); err != nil {
		t.Fatal(err)
	}
	if _, ok := getLease(t, ns.Name, a.c.Config().NameFunc(hostileKey)); ok {
		t.Error("the sweep by a 253-character holder's label did not find its record")
	}
}

func TestMissingLeaseRBACIsAClearErrorAndNoWrite(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	c := admin(t)
	// Given a user that may read ConfigMaps (its holders) but not Leases
	cfg, err := env.AddUser("no-leases")
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holders"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holders"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "holders"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "no-leases"}}}
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	weak, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := claim.New(weak, weak, claim.Config{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	holder := newParty(t, ns, "a")

	calls := []struct {
		name string
		call func() error
	}{
		{"Acquire", func() error { _, _, err := cl.Acquire(ctx, hostileKey, holder.self); return err }},
		{"Holds", func() error { _, err := cl.Holds(ctx, hostileKey, holder.self); return err }},
		{"Release", func() error { return cl.Release(ctx, holder.self) }},
	}
	for _, tt := range calls {
		t.Run("given no lease RBAC when calling "+tt.name+" then the error says forbidden and names the Lease", func(t *testing.T) {
			// Repeated calls fail the same way: the caller's backoff, not a crash.
			for range 3 {
				err := tt.call()
				if err == nil || !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "leases") || !strings.Contains(err.Error(), "Lease") {
					t.Fatalf("%s = %v, want a forbidden error naming the Lease", tt.name, err)
				}
				if errors.Is(err, backends.ErrConflict) || errors.Is(err, claim.ErrRaced) {
					t.Fatalf("%s = %v: a missing permission must not read as contention", tt.name, err)
				}
			}
		})
	}
	// And nothing was written
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.InNamespace(ns)); err != nil || len(leases.Items) > 0 {
		t.Fatalf("Leases after forbidden calls: %d (%v)", len(leases.Items), err)
	}
}
