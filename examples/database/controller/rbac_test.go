package controller_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTheExamplesLeaseRightsAreNamespaced: Lease rights are scoped to the
// claim namespace in the example markers (docs/multi-tenancy.md: "Bind the
// operator's Lease rights with a Role in the claim namespace only, not a
// ClusterRole: a ClusterRole that may delete Leases can delete node
// heartbeats and other controllers' leader-election Leases"). A
// +kubebuilder:rbac marker without namespace= generates a ClusterRole rule.
func TestTheExamplesLeaseRightsAreNamespaced(t *testing.T) {
	// Given every Go source of the examples a user copies from
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// (A port whose Leases live in each key's own namespace, as the
		// operator it replaces kept them, needs them cluster-wide.)
		if strings.Contains(string(data), "LeasesInKeyNamespace") {
			return nil
		}
		// When a marker grants rights on Leases
		for i, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "// +kubebuilder:rbac") && strings.Contains(line, "resources=leases") {
				// Then it is scoped to the claim namespace
				if !strings.Contains(line, "namespace=") {
					t.Errorf("%s:%d: cluster-wide Lease rights: %s", path, i+1, strings.TrimSpace(line))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
