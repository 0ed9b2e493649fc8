package claimsctl

import (
	"testing"
)

// TestListGolden: Given the fixture's records in a cluster, When list runs
// with each output convention, Then it prints them as the golden files show,
// sorted by key, with ages from the injected clock.
func TestListGolden(t *testing.T) {
	f := setup(t)
	tests := []struct {
		name   string
		args   []string
		golden string
	}{
		{"Lease records in the claim namespace", []string{"list", "-n", "ops"}, "list.golden"},
		{"wide adds where each record lives, the holder UID and the detail", []string{"list", "-n", "ops", "-o", "wide"}, "list-wide.golden"},
		{"yaml", []string{"list", "-n", "ops", "-o", "yaml"}, "list.yaml.golden"},
		{"json", []string{"list", "-n", "ops", "-o", "json"}, "list.json.golden"},
		{"all namespaces with a selector and the annotation backend", []string{"list", "-A", "-l", fixtureLabel + "=widget-operator", "--annotation-backend", "storageconfigs", "-o", "wide"}, "list-all.golden"},
		{"annotation backend named with its group", []string{"list", "-n", "team-a", "--annotation-backend", "storageconfigs." + testGroup}, "list-annotation.golden"},
		{"a selector that matches nothing prints nothing", []string{"list", "-n", "ops", "-l", fixtureLabel + "=nobody"}, "list-empty.golden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, f.names, nil, tt.args...)
			if r.err != nil {
				t.Fatalf("list: %v\nstderr: %s", r.err, r.errOut)
			}
			golden(t, tt.golden, r.out+stderrSection(r.errOut))
		})
	}
}

// stderrSection appends what went to stderr, so golden files show it too.
func stderrSection(s string) string {
	if s == "" {
		return ""
	}
	return "--- stderr\n" + s
}
