package claimsctl

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/ocf-claim/claim/pkg/backends/lease"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// releaseCase is one namespace with one key held by Widget "holder"; the
// Widget is deleted unless keepHolder, as when a person releases a claim
// whose holder cannot.
type releaseCase struct {
	n      *names
	ns     string
	cfg    claim.Config
	ref    types.NamespacedName
	holder claim.Holder
	lease  *coordinationv1.Lease
}

const releaseKey = "rdbms|pg.db.svc:5432/release"

var releaseSeq atomic.Int32

func newReleaseCase(t *testing.T, keepHolder bool) *releaseCase {
	t.Helper()
	ns := fmt.Sprintf("rel-%d", releaseSeq.Add(1))
	namespace(t, ns)
	n := &names{}
	c := claimer(t, claim.Config{Namespace: ns})
	w := widget(t, ns, "holder", conditions.ReasonClaimed, "")
	n.add(string(w.GetUID()), "0a1b2c3d-1111-4000-8000-000000000001")
	o := acquire(t, n, c, releaseKey, w, "2001")
	if !keepHolder {
		if err := env.TestClient(t).Delete(context.Background(), w); err != nil {
			t.Fatal(err)
		}
	}
	rc := &releaseCase{n: n, ns: ns, cfg: c.Config(), ref: o.Record.Ref, holder: o.Holder}
	rc.lease = rc.get(t)
	return rc
}

func (rc *releaseCase) get(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	var l coordinationv1.Lease
	if err := env.APIReader.Get(context.Background(), rc.ref, &l); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return &l
}

// unchanged fails unless the Lease is still there as it was read.
func (rc *releaseCase) unchanged(t *testing.T, before *coordinationv1.Lease) {
	t.Helper()
	l := rc.get(t)
	if l == nil || l.UID != before.UID || l.ResourceVersion != before.ResourceVersion {
		t.Fatalf("the Lease changed or vanished: before %s/%s, now %+v", before.UID, before.ResourceVersion, l)
	}
}

// stable names the case's namespace as the golden files do: each case has
// its own, numbered in the order the cases run.
func (rc *releaseCase) stable(out string) string {
	return strings.ReplaceAll(out, " "+rc.ns+"/", " team-a/")
}

func (rc *releaseCase) args(extra ...string) []string {
	return append([]string{"release", releaseKey, "-n", rc.ns}, extra...)
}

// TestReleaseGolden: Given a key whose holder is gone, When release runs
// with the holder's UID, Then a dry run (server or client) leaves the Lease
// as it was and a real run deletes it, each saying so.
func TestReleaseGolden(t *testing.T) {
	tests := []struct {
		name    string
		extra   []string
		golden  string
		deleted bool
	}{
		{"server dry run leaves the Lease", []string{"--dry-run=server"}, "release-dry-run-server.golden", false},
		{"client dry run sends nothing", []string{"--dry-run", "client"}, "release-dry-run-client.golden", false},
		{"release deletes the Lease", nil, "release.golden", true},
		{"release fenced on the token too", []string{"--token", "@token"}, "release.golden", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := newReleaseCase(t, false)
			extra := append([]string{"--holder-uid", string(rc.holder.UID)}, tt.extra...)
			for i, a := range extra {
				if a == "@token" {
					extra[i] = rc.lease.Annotations[rc.cfg.Annotations.Token]
					if extra[i] == "" {
						extra[i] = rc.lease.ResourceVersion
					}
				}
			}
			r := run(t, rc.n, nil, rc.args(extra...)...)
			if r.err != nil {
				t.Fatalf("release: %v\nstderr: %s", r.err, r.errOut)
			}
			golden(t, tt.golden, rc.stable(r.out+stderrSection(r.errOut)))
			if tt.deleted {
				if l := rc.get(t); l != nil {
					t.Fatalf("the Lease is still there: %+v", l.ObjectMeta)
				}
				return
			}
			rc.unchanged(t, rc.lease)
		})
	}
}

// TestReleaseWhileHolderExists: Given a key whose holder object still
// exists, When release runs without --force, Then it refuses with
// ErrRefused, names who would get the key next (the prepared successor, the
// objects whose condition says they wait for the key, the holder itself),
// sends no Delete and leaves the Lease as it was, dry run or not. With
// --force it releases (for real, or as a server dry run) and warns with the
// same names.
func TestReleaseWhileHolderExists(t *testing.T) {
	tests := []struct {
		name string
		// waiting adds a planned successor and a parked object that wait
		// for the key, and one that waits for another key.
		waiting bool
		extra   []string
		golden  string
		refused bool
		deleted bool
	}{
		{name: "refused, nobody waiting", golden: "release-refused-holder-exists.golden", refused: true},
		{name: "refused, naming the successor and the objects waiting", waiting: true, golden: "release-refused-waiting.golden", refused: true},
		{name: "refused as a server dry run too", extra: []string{"--dry-run=server"}, golden: "release-refused-holder-exists.golden", refused: true},
		{name: "refused as a client dry run too", extra: []string{"--dry-run=client"}, golden: "release-refused-holder-exists.golden", refused: true},
		{name: "forced as a server dry run", waiting: true, extra: []string{"--force", "--dry-run=server"}, golden: "release-force-dry-run-server.golden"},
		{name: "forced", extra: []string{"--force"}, golden: "release-force.golden", deleted: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := newReleaseCase(t, true)
			if tt.waiting {
				rc.addWaiting(t)
			}
			before := rc.get(t)
			var deletes atomic.Int32
			r := run(t, rc.n, countDeletes(&deletes), rc.args(append([]string{"--holder-uid", string(rc.holder.UID)}, tt.extra...)...)...)
			got := r.out + stderrSection(r.errOut)
			if tt.refused {
				if !errors.Is(r.err, ErrRefused) {
					t.Fatalf("release: want ErrRefused, got %v", r.err)
				}
				if r.out != "" || deletes.Load() != 0 {
					t.Fatalf("a refused release printed %q and sent %d Deletes", r.out, deletes.Load())
				}
				got += stderrSection("error: " + ErrorText(r.err) + "\n")
			} else if r.err != nil {
				t.Fatalf("release: %v\nstderr: %s", r.err, r.errOut)
			}
			golden(t, tt.golden, rc.stable(got))
			if tt.deleted {
				if l := rc.get(t); l != nil {
					t.Fatalf("the Lease is still there: %+v", l.ObjectMeta)
				}
				return
			}
			rc.unchanged(t, before)
		})
	}
}

// addWaiting prepares a planned handover of the key to Widget "next" and
// adds Widget "waiter", parked behind the holder, with the conditions their
// operator writes, and Widget "elsewhere", parked on another key.
func (rc *releaseCase) addWaiting(t *testing.T) {
	t.Helper()
	holder := fmt.Sprintf("Widget %s/holder", rc.ns)
	next := widget(t, rc.ns, "next", conditions.ReasonWaitingForHandover, fmt.Sprintf("Key %q waits for %s to hand over: a planned handover to it is prepared and waits for the commit.", releaseKey, holder))
	widget(t, rc.ns, "waiter", conditions.ReasonParked, fmt.Sprintf("Key %q is held by %s.", releaseKey, holder))
	widget(t, rc.ns, "elsewhere", conditions.ReasonParked, fmt.Sprintf("Key %q is held by %s.", releaseKey+"-other", holder))
	if _, err := claimer(t, rc.cfg).Prepare(context.Background(), releaseKey, rc.holder, claim.HolderOf(next)); err != nil {
		t.Fatalf("preparing the handover to next: %v", err)
	}
}

// countDeletes counts the Delete requests the plugin sends.
func countDeletes(n *atomic.Int32) func(*rest.Config) *rest.Config {
	return func(c *rest.Config) *rest.Config {
		c.Wrap(func(next http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				if req.Method == http.MethodDelete {
					n.Add(1)
				}
				return next.RoundTrip(req)
			})
		})
		return c
	}
}

// TestReleaseRefuses: Given a record that is not what the caller saw, When
// release runs, Then it refuses with ErrRefused, names why, and leaves the
// Lease as it was.
func TestReleaseRefuses(t *testing.T) {
	tests := []struct {
		name string
		// prepare changes the cluster after the caller looked and returns
		// the extra arguments.
		prepare func(t *testing.T, rc *releaseCase) []string
		want    string
	}{
		{
			name: "wrong holder UID",
			prepare: func(t *testing.T, rc *releaseCase) []string {
				return []string{"--holder-uid", "5c6d7e8f-3333-4000-8000-000000000003"}
			},
			want: "not by uid 5c6d7e8f-3333-4000-8000-000000000003",
		},
		{
			name: "the holder changed since the caller looked",
			prepare: func(t *testing.T, rc *releaseCase) []string {
				rc.takeOver(t, "a-new-holder")
				return []string{"--holder-uid", string(rc.holder.UID)}
			},
			want: "the holder changed since you looked",
		},
		{
			name: "the token changed since the caller looked",
			prepare: func(t *testing.T, rc *releaseCase) []string {
				return []string{"--holder-uid", string(rc.holder.UID), "--token", "1"}
			},
			want: "it was granted again since you looked",
		},
		{
			name: "a foreign record",
			prepare: func(t *testing.T, rc *releaseCase) []string {
				l := rc.get(t)
				delete(l.Annotations, rc.cfg.Annotations.HolderUID)
				if err := env.TestClient(t).Update(context.Background(), l); err != nil {
					t.Fatal(err)
				}
				return []string{"--holder-uid", string(rc.holder.UID)}
			},
			want: "was not written by a claim for this key (missing annotations claim.ocf.io/holder-uid)",
		},
		{
			name: "no record",
			prepare: func(t *testing.T, rc *releaseCase) []string {
				if err := env.TestClient(t).Delete(context.Background(), rc.get(t)); err != nil {
					t.Fatal(err)
				}
				return []string{"--holder-uid", string(rc.holder.UID)}
			},
			want: "no record",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := newReleaseCase(t, false)
			extra := tt.prepare(t, rc)
			before := rc.get(t)
			r := run(t, rc.n, nil, rc.args(extra...)...)
			if !errors.Is(r.err, ErrRefused) || !strings.Contains(r.err.Error(), tt.want) {
				t.Fatalf("release: want ErrRefused saying %q, got %v", tt.want, r.err)
			}
			if r.out != "" {
				t.Fatalf("a refused release printed %q", r.out)
			}
			if before != nil {
				rc.unchanged(t, before)
			}
		})
	}
}

// takeOver replaces the record with one held by another holder, as a
// takeover does.
func (rc *releaseCase) takeOver(t *testing.T, name string) {
	t.Helper()
	other := widget(t, rc.ns, name, conditions.ReasonClaimed, "")
	l := rc.get(t)
	next := lease.Encode(rc.cfg.Storage(), claim.Record{Key: releaseKey, Holder: claim.HolderOf(other), Token: claim.Token(l.ResourceVersion)})
	next.UID, next.ResourceVersion = l.UID, l.ResourceVersion
	if err := env.TestClient(t).Update(context.Background(), next); err != nil {
		t.Fatal(err)
	}
}

// TestReleaseRefusesWhenTheRecordChangesBeforeTheDelete: Given a release
// that checked the holder, When the record is taken over between that read
// and the Delete, Then the API server refuses the Delete on its UID and
// resourceVersion preconditions, the plugin reports ErrRefused, and the new
// holder keeps the key. The takeover is made by a real write from inside
// the plugin's own Delete request, so nothing but the preconditions can
// stop it.
func TestReleaseRefusesWhenTheRecordChangesBeforeTheDelete(t *testing.T) {
	tests := []struct {
		name   string
		dryRun string
		// force releases a holder that still exists: the preconditions
		// fence that Delete just the same.
		force bool
	}{
		{"dry-run=none", dryRunNone, false},
		{"dry-run=server", dryRunServer, false},
		{"dry-run=none, forced while the holder exists", dryRunNone, true},
		{"dry-run=server, forced while the holder exists", dryRunServer, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := newReleaseCase(t, tt.force)
			var stepped atomic.Bool
			wrap := func(c *rest.Config) *rest.Config {
				c.Wrap(func(next http.RoundTripper) http.RoundTripper {
					return roundTripFunc(func(req *http.Request) (*http.Response, error) {
						if req.Method == http.MethodDelete && strings.Contains(req.URL.Path, "/leases/") && stepped.CompareAndSwap(false, true) {
							rc.takeOver(t, "racer")
						}
						return next.RoundTrip(req)
					})
				})
				return c
			}
			args := rc.args("--holder-uid", string(rc.holder.UID), "--dry-run", tt.dryRun)
			if tt.force {
				args = append(args, "--force")
			}
			r := run(t, rc.n, wrap, args...)
			if !stepped.Load() {
				t.Fatal("the plugin sent no Delete")
			}
			if !errors.Is(r.err, ErrRefused) || !strings.Contains(r.err.Error(), "changed after it was checked") {
				t.Fatalf("release: want ErrRefused for a changed record, got %v", r.err)
			}
			l := rc.get(t)
			if l == nil || l.Annotations[rc.cfg.Annotations.HolderName] != "racer" {
				t.Fatalf("the new holder lost the key: %+v", l)
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestReleaseBadFlags: flags that cannot describe a fenced release are
// refused before anything is read.
func TestReleaseBadFlags(t *testing.T) {
	n := &names{}
	tests := []struct {
		name string
		args []string
	}{
		{"no holder UID", []string{"release", "k"}},
		{"empty holder UID", []string{"release", "k", "--holder-uid", ""}},
		{"unknown dry-run", []string{"release", "k", "--holder-uid", "u", "--dry-run", "maybe"}},
		{"invalid key", []string{"release", "a\x00b", "--holder-uid", "u"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := run(t, n, nil, tt.args...); r.err == nil {
				t.Fatalf("release %q: want an error", tt.args)
			}
		})
	}
}

// TestWaitsBehind: an object waits behind a holder when its claim condition
// is the claim's default message for being parked behind that holder on
// that key, or for waiting for that holder's handover of it.
func TestWaitsBehind(t *testing.T) {
	holder := claim.Holder{APIVersion: "claims.test.ocf.io/v1", Kind: "Widget", Namespace: "team-a", Name: "holder", UID: "u1"}
	const key = "rdbms|pg.db.svc:5432/release"
	cond := func(status metav1.ConditionStatus, message string) *metav1.Condition {
		return &metav1.Condition{Type: "Claimed", Status: status, Message: message}
	}
	sameNS := claim.Holder{Kind: "Widget", Namespace: "team-a", Name: "waiter", UID: "u2"}
	otherNS := claim.Holder{Kind: "Widget", Namespace: "team-b", Name: "waiter", UID: "u3"}
	tests := []struct {
		name string
		self claim.Holder
		cond *metav1.Condition
		want bool
	}{
		{"parked behind the holder, in another namespace (the default disclosure names no holder there)", otherNS,
			cond(metav1.ConditionFalse, `Key "rdbms|pg.db.svc:5432/release" is held by another object, outside this namespace.`), true},
		{"waiting for its handover, in another namespace", otherNS,
			cond(metav1.ConditionFalse, `Key "rdbms|pg.db.svc:5432/release" waits for its previous holder, outside this namespace, to hand over.`), true},
		{"parked on another key, in another namespace", otherNS,
			cond(metav1.ConditionFalse, `Key "rdbms|pg.db.svc:5432/other" is held by another object, outside this namespace.`), false},
		{"parked behind the holder", sameNS, cond(metav1.ConditionFalse, `Key "rdbms|pg.db.svc:5432/release" is held by Widget team-a/holder.`), true},
		{"waiting for its handover", sameNS, cond(metav1.ConditionFalse, `Key "rdbms|pg.db.svc:5432/release" waits for Widget team-a/holder to hand over.`), true},
		{"waiting for its handover, with the gate's detail", sameNS, cond(metav1.ConditionFalse, `Key "rdbms|pg.db.svc:5432/release" waits for Widget team-a/holder to hand over: pods still run.`), true},
		{"parked behind another holder of the key (another install)", sameNS, cond(metav1.ConditionFalse, `Key "rdbms|pg.db.svc:5432/release" is held by Widget team-b/holder.`), false},
		{"parked behind a holder whose name only starts the same", sameNS, cond(metav1.ConditionFalse, `Key "rdbms|pg.db.svc:5432/release" is held by Widget team-a/holder.v2.`), false},
		{"parked on another key", sameNS, cond(metav1.ConditionFalse, `Key "rdbms|pg.db.svc:5432/other" is held by Widget team-a/holder.`), false},
		{"granted", sameNS, cond(metav1.ConditionTrue, `Key "rdbms|pg.db.svc:5432/release" is held by Widget team-a/holder.`), false},
		{"a message the operator words itself", sameNS, cond(metav1.ConditionFalse, "Storage already attached to team-a/holder."), false},
		{"no condition", sameNS, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := waitsBehind(tt.cond, key, holder, tt.self); got != tt.want {
				t.Fatalf("waitsBehind(%q) = %v, want %v", tt.cond, got, tt.want)
			}
		})
	}
}

// TestReleaseNamesAWaiterInAnotherNamespace: `release` refuses while the
// holder lives and says who would get the key, a waiter if any. Keys are
// cluster-wide, so contenders are often in other namespaces than the holder;
// claimmw's default disclosure (DiscloseSameNamespace) then words the
// waiter's condition "Key %q is held by another object, outside this
// namespace." (pkg/claimmw/disclose.go). The plugin recognises that wording
// too, and names the parked object in the other namespace as the one that
// gets the key.
func TestReleaseNamesAWaiterInAnotherNamespace(t *testing.T) {
	rc := newReleaseCase(t, true)
	other := rc.ns + "-b"
	namespace(t, other)
	// The condition claimmw writes by default on a Widget parked behind a
	// holder in another namespace.
	w := widget(t, other, "waiter", conditions.ReasonParked, fmt.Sprintf("Key %q is held by another object, outside this namespace.", releaseKey))
	// The other release cases share releaseKey and list Widgets of every
	// namespace: this waiter must not outlive the case.
	t.Cleanup(func() {
		if err := env.TestClient(t).Delete(context.Background(), w); err != nil {
			t.Errorf("deleting the waiter: %v", err)
		}
	})

	r := run(t, rc.n, nil, rc.args("--holder-uid", string(rc.holder.UID))...)
	if !errors.Is(r.err, ErrRefused) {
		t.Fatalf("release while the holder exists: want ErrRefused, got %v", r.err)
	}
	msg := ErrorText(r.err)
	if !strings.Contains(msg, other+"/waiter") {
		t.Errorf("refusal does not name the waiter %s/waiter, which gets the key once the record is gone:\n%s", other, msg)
	}
}
