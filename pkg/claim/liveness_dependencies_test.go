package claim_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
)

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
