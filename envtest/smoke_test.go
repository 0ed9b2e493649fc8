package envtest_test

// The smoke suite pins the API-server semantics the claim protocol relies on.
// Each test runs against the real kube-apiserver and etcd; several of these
// facts (UID preconditions, resourceVersion order across delete and
// recreate, cache lag) do not hold for controller-runtime's fake client.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/envtest"
)

// createdLease creates newLease(ns, name) through env.Client and returns it
// as the server answered.
func createdLease(t *testing.T, ns, name string) *coordinationv1.Lease {
	t.Helper()
	l := newLease(ns, name)
	if err := env.Client.Create(context.Background(), l); err != nil {
		t.Fatal(err)
	}
	return l
}

func newLease(ns, name string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("smoke")},
	}
}

func TestServerReportsThePinnedVersion(t *testing.T) {
	// Given the binaries built by make envtest with a stamped version
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	// When we ask the server its version
	info, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	// Then it is the version pinned in hack/envtest/go.mod, not v0.0.0-master
	root, _ := filepath.Abs("..")
	want, err := envtest.KubernetesVersion(root)
	if err != nil {
		t.Fatal(err)
	}
	if info.GitVersion != want {
		t.Fatalf("server version = %q, want %q", info.GitVersion, want)
	}
}

func TestSecondCreateOfALeaseAnswersAlreadyExists(t *testing.T) {
	ctx, ns := context.Background(), env.Namespace(t)
	// Given a Lease created by one client
	createdLease(t, ns, "l")
	// When another client creates the same name
	other, err := env.NewClient()
	if err != nil {
		t.Fatal(err)
	}
	err = other.Create(ctx, newLease(ns, "l"))
	// Then the server answers AlreadyExists: the first Create wins
	if !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second Create: got %v, want AlreadyExists", err)
	}
}

func TestUpdateWithStaleResourceVersionAnswersConflict(t *testing.T) {
	ctx, ns := context.Background(), env.Namespace(t)
	// Given a Lease read once and then changed by someone else
	l := createdLease(t, ns, "l")
	stale := l.DeepCopy()
	l.Spec.HolderIdentity = ptr.To("someone-else")
	if err := env.Client.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	// When the stale copy is written
	stale.Spec.HolderIdentity = ptr.To("me")
	err := env.Client.Update(ctx, stale)
	// Then the server answers Conflict
	if !apierrors.IsConflict(err) {
		t.Fatalf("stale Update: got %v, want Conflict", err)
	}
}

func TestDeleteWithMismatchedUIDPreconditionAnswersConflict(t *testing.T) {
	ctx, ns := context.Background(), env.Namespace(t)
	// Given a Lease
	l := createdLease(t, ns, "l")
	// When it is deleted with a UID precondition of another object
	err := env.Client.Delete(ctx, l, client.Preconditions{UID: ptr.To(types.UID("not-" + string(l.UID)))})
	// Then the server refuses with Conflict (the fake client ignores UID
	// preconditions and deletes) and the Lease is still there
	if !apierrors.IsConflict(err) {
		t.Fatalf("Delete with wrong UID: got %v, want Conflict", err)
	}
	if err := env.APIReader.Get(ctx, client.ObjectKeyFromObject(l), &coordinationv1.Lease{}); err != nil {
		t.Fatalf("Lease after refused Delete: %v", err)
	}
	// And a Delete with a stale resourceVersion is refused the same way
	rv := l.ResourceVersion
	l.Spec.HolderIdentity = ptr.To("changed")
	if err := env.Client.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	err = env.Client.Delete(ctx, l, client.Preconditions{UID: ptr.To(l.UID), ResourceVersion: ptr.To(rv)})
	if !apierrors.IsConflict(err) {
		t.Fatalf("Delete with stale resourceVersion: got %v, want Conflict", err)
	}
}

func TestUpdateCarryingTheUIDOfADeletedLeaseAnswersConflict(t *testing.T) {
	ctx, ns := context.Background(), env.Namespace(t)
	// Given a Lease read, then deleted and recreated under the same name
	old := newLease(ns, "l")
	if err := env.Client.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, old.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	recreated := newLease(ns, "l")
	if err := env.Client.Create(ctx, recreated); err != nil {
		t.Fatal(err)
	}
	// Then the recreated Lease has a new UID
	if recreated.UID == old.UID {
		t.Fatalf("recreated Lease kept UID %s", old.UID)
	}
	// And an Update carrying the old UID with the new resourceVersion is
	// refused: the UID in the body is a precondition
	stale := old.DeepCopy()
	stale.ResourceVersion = recreated.ResourceVersion
	err := env.Client.Update(ctx, stale)
	if !apierrors.IsConflict(err) {
		t.Fatalf("Update with the old UID: got %v, want Conflict", err)
	}
}

func TestLeaseResourceVersionsCompareInWriteOrder(t *testing.T) {
	ctx, ns := context.Background(), env.Namespace(t)
	// Given a sequence of writes to Leases: create, update, delete and
	// recreate under the same name, and a write to another Lease
	var versions []string
	l := createdLease(t, ns, "a")
	versions = append(versions, l.ResourceVersion)
	l.Spec.HolderIdentity = ptr.To("x")
	if err := env.Client.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	versions = append(versions, l.ResourceVersion)
	b := newLease(ns, "b")
	if err := env.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	versions = append(versions, b.ResourceVersion)
	if err := env.Client.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	again := newLease(ns, "a")
	if err := env.Client.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	versions = append(versions, again.ResourceVersion)
	// Then every later write compares greater with CompareResourceVersion
	for i := 1; i < len(versions); i++ {
		c, err := resourceversion.CompareResourceVersion(versions[i-1], versions[i])
		if err != nil {
			t.Fatalf("comparing %q and %q: %v", versions[i-1], versions[i], err)
		}
		if c >= 0 {
			t.Fatalf("write %d has version %q, not greater than %q of write %d", i, versions[i], versions[i-1], i-1)
		}
	}
}

func TestCachedReaderLagsTheAPIReaderAfterAWrite(t *testing.T) {
	ctx, ns := context.Background(), env.Namespace(t)
	// Given a real informer cache that has synced Leases and then lags (as
	// it does under load; Freeze makes the lag deterministic)
	lagging, err := env.NewLaggingCache(ctx, &coordinationv1.LeaseList{})
	if err != nil {
		t.Fatal(err)
	}
	lagging.Freeze()
	// When a Lease is created
	l := createdLease(t, ns, "fresh")
	// Then the uncached reader sees it at once and the lagging cache does not
	key := client.ObjectKeyFromObject(l)
	if err := env.APIReader.Get(ctx, key, &coordinationv1.Lease{}); err != nil {
		t.Fatalf("API reader: %v", err)
	}
	err = lagging.Get(ctx, key, &coordinationv1.Lease{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("lagging cache: got %v, want NotFound", err)
	}
}

func TestMissingBinariesSayToRunMakeEnvtest(t *testing.T) {
	// Given KUBEBUILDER_ASSETS pointing at an empty directory
	t.Setenv(envtest.AssetsEnv, t.TempDir())
	// When the harness looks for the binaries
	_, err := envtest.BinaryDir()
	// Then it fails with the hint to run make envtest
	if err == nil || !strings.Contains(err.Error(), "make envtest") {
		t.Fatalf("BinaryDir() error = %v, want a hint to run make envtest", err)
	}
}

func TestBinaryDirFindsTheControlPlaneAndNamesKubebuilderAssetsWhenItCannot(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares the environment and returns KUBEBUILDER_ASSETS.
		setup   func(t *testing.T) string
		wantDir bool     // BinaryDir returns the KUBEBUILDER_ASSETS directory
		wantErr []string // fragments the error must contain
	}{{
		name: "KUBEBUILDER_ASSETS holding both binaries is used, from any directory",
		setup: func(t *testing.T) string {
			dir := t.TempDir()
			for _, bin := range []string{"kube-apiserver", "etcd"} {
				if err := os.WriteFile(filepath.Join(dir, bin), nil, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			t.Chdir(t.TempDir()) // another module: no hack/envtest above
			return dir
		},
		wantDir: true,
	}, {
		name: "KUBEBUILDER_ASSETS without etcd names the variable and the missing binary",
		setup: func(t *testing.T) string {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "kube-apiserver"), nil, 0o755); err != nil {
				t.Fatal(err)
			}
			return dir
		},
		wantErr: []string{"KUBEBUILDER_ASSETS=", "has no etcd", "point KUBEBUILDER_ASSETS at"},
	}, {
		name: "unset outside the repository: the error says to set KUBEBUILDER_ASSETS",
		setup: func(t *testing.T) string {
			t.Chdir(t.TempDir())
			return ""
		},
		wantErr: []string{"KUBEBUILDER_ASSETS is not set", "set KUBEBUILDER_ASSETS to a directory holding kube-apiserver and etcd"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given the environment of the case
			assets := tt.setup(t)
			t.Setenv(envtest.AssetsEnv, assets)
			// When the harness looks for the binaries
			dir, err := envtest.BinaryDir()
			// Then it finds them, or says how to provide them
			if tt.wantDir {
				if err != nil || dir != assets {
					t.Fatalf("BinaryDir() = %q, %v; want %q", dir, err, assets)
				}
				return
			}
			if err == nil {
				t.Fatalf("BinaryDir() = %q, want an error", dir)
			}
			for _, frag := range tt.wantErr {
				if !strings.Contains(err.Error(), frag) {
					t.Errorf("BinaryDir() error = %q, want it to contain %q", err, frag)
				}
			}
		})
	}
}
