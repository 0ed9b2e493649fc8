package claim_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/expiry"
)

// TestNewWithANilOptionReturnsAnErrorNotAPanic: New validates its
// configuration once and never panics. Given an option list that holds a nil
// Option (an option built conditionally, left nil), When New is called, Then
// it returns (an error or a Claimer) instead of panicking with a nil function
// call.
func TestNewWithANilOptionReturnsAnErrorNotAPanic(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	var conditional claim.Option // e.g. only set when a flag is on
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("claim.New(..., nil Option) panicked: %v", r)
		}
	}()
	_, _ = claim.New(c, c, claim.Config{Namespace: "ns"}, conditional)
}

// TestNewNeverPanicsOnANameFuncThatOnlyKnowsNormalizedKeys: New never panics
// on an odd NameFunc, HolderLabels or Normalize. A NameFunc is documented to
// name "the record object of a normalized key", and a Claimer only ever hands
// it keys Normalize made. Given a Normalize that puts every key in the form
// "db#<key>" and a NameFunc that relies on the '#', When New is built (and
// probes NameFunc) and a key acquired, Then nothing panics.
func TestNewNeverPanicsOnANameFuncThatOnlyKnowsNormalizedKeys(t *testing.T) {
	cfg := claim.Config{
		Namespace: "ns",
		Normalize: func(key string) (string, error) { return "db#" + strings.ToLower(key), nil },
		NameFunc: func(key string) string {
			return backends.HashName("db-", strings.SplitN(key, "#", 2)[1])
		},
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("claim.New panicked on a NameFunc that is valid for every normalized key: %v", r)
		}
	}()
	c, err := memory.NewClaimer(memory.New(), cfg)
	if err != nil {
		t.Logf("New: %v", err)
		return
	}
	self := claim.Holder{Kind: "Worker", Namespace: "ns", Name: "w", UID: "uid-w"}
	if _, _, err := c.Acquire(context.Background(), "Orders", self); err != nil {
		t.Fatalf("Acquire: %v", err)
	}
}

// TestNewRefusesANilLiveness: New validates everything once and never panics.
// Given the nil *Liveness that expiry.New returns with its error, passed on
// through claim.WithLiveness, When New is called and a second holder acquires
// a held key, Then New refuses it, or at least Acquire does not panic in
// Liveness.Alive.
func TestNewRefusesANilLiveness(t *testing.T) {
	l, lerr := expiry.New(0, nil) // a misconfigured duration: l is nil
	if lerr == nil || l != nil {
		t.Fatalf("expiry.New(0) = %v, %v; the case needs a nil Liveness", l, lerr)
	}
	store := memory.New()
	c, err := memory.NewClaimer(store, claim.Config{Namespace: "ns"}, claim.WithLiveness(l))
	if err != nil {
		return // refused at construction: fine
	}
	a := claim.Holder{Kind: "Worker", Namespace: "ns", Name: "a", UID: "uid-a"}
	b := claim.Holder{Kind: "Worker", Namespace: "ns", Name: "b", UID: "uid-b"}
	ctx := context.Background()
	if _, _, err := c.Acquire(ctx, "k", a); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("New accepted a nil *expiry.Liveness and Acquire panicked: %v", r)
		}
	}()
	_, _, _ = c.Acquire(ctx, "k", b)
}

// TestNewRefusesALivenessBuiltOnANilDependencyByName: a liveness built on a
// nil reader (a reader assigned after the claim was configured, or a nil
// *T) panics in every waiter's pass; New names it instead.
func TestNewRefusesALivenessBuiltOnANilDependencyByName(t *testing.T) {
	var typedNilReader *nilReader
	for _, tc := range []struct {
		name     string
		liveness claim.Liveness
		want     []string
	}{
		{"given HolderExistsAs on a nil reader then it is named", claim.HolderExistsAs(nil, &corev1.ConfigMap{}), []string{"WithLiveness", "HolderExistsAs", "reader is nil"}},
		{"given HolderExistsAs on a typed-nil reader then it is named", claim.HolderExistsAs(typedNilReader, &corev1.ConfigMap{}), []string{"HolderExistsAs", "reader is nil"}},
		{"given HolderExistsAs with a nil prototype then it is named", claim.HolderExistsAs(fakeReader(), nil), []string{"HolderExistsAs", "prototype is nil"}},
		{"given HolderExists on a nil reader then it is named", claim.HolderExists(nil), []string{"HolderExists", "reader is nil"}},
		{
			"given ByKind over a nil reader's liveness then the kind is named",
			claim.ByKind(map[string]claim.Liveness{"Database": claim.HolderExistsAs(nil, &corev1.ConfigMap{})}, nil),
			[]string{"ByKind", `kind "Database"`, "reader is nil"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := memory.NewClaimer(memory.New(), claim.Config{Namespace: "ns"}, claim.WithLiveness(tc.liveness))
			if err == nil {
				t.Fatal("New accepted a liveness built on a nil dependency")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
	// And a liveness on a real reader is accepted
	if _, err := memory.NewClaimer(memory.New(), claim.Config{Namespace: "ns"}, claim.WithLiveness(claim.HolderExistsAs(fakeReader(), &corev1.ConfigMap{}))); err != nil {
		t.Errorf("New refused HolderExistsAs on a reader: %v", err)
	}
}

type nilReader struct{ client.Reader }

func fakeReader() client.Reader { return &nilReader{} }
