package generation_test

import (
	"strings"
	"testing"

	"github.com/ocf-claim/claim/pkg/generation"
)

// TestNewRefusesABadConfigurationNamingEveryProblem: New validates once,
// and one error names every problem.
func TestNewRefusesABadConfigurationNamingEveryProblem(t *testing.T) {
	c := env.TestClient(t)
	for _, tc := range []struct {
		name      string
		build     func() (*generation.KubeBackend, error)
		wantParts []string
	}{
		{"no client and no namespace", func() (*generation.KubeBackend, error) { return generation.New(nil, "") }, []string{"client is nil", "namespace is empty"}},
		{"a label that is not a label", func() (*generation.KubeBackend, error) {
			return generation.New(c, "ns", generation.WithLabels(map[string]string{"team": "a/b"}))
		}, []string{`label "team"="a/b"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.build()
			if err == nil {
				t.Fatal("New succeeded")
			}
			for _, part := range tc.wantParts {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not name %q", err, part)
				}
			}
		})
	}
	if _, err := generation.New(c, "ns", nil, generation.WithLabels(map[string]string{"team": "payments"}), generation.WithClock(nil)); err != nil {
		t.Errorf("valid options with a nil one: %v", err)
	}
}
