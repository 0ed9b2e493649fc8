package claimsctl

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// TestListGolden: Given the fixture's records in a cluster, When list runs
// with each output convention, Then it prints them as the golden files show,
// sorted by key, with ages from the injected clock.
func TestListGolden(t *testing.T) {
	f := setup(t)
	tests := []goldenRun{
		{"Lease records in the claim namespace", []string{"list", "-n", "ops"}, "list.golden"},
		{"wide adds where each record lives, the holder UID and the detail", []string{"list", "-n", "ops", "-o", "wide"}, "list-wide.golden"},
		{"yaml", []string{"list", "-n", "ops", "-o", "yaml"}, "list.yaml.golden"},
		{"json", []string{"list", "-n", "ops", "-o", "json"}, "list.json.golden"},
		{"all namespaces with a selector and the annotation backend", []string{"list", "-A", "-l", fixtureLabel + "=widget-operator", "--annotation-backend", "storageconfigs", "-o", "wide"}, "list-all.golden"},
		{"annotation backend named with its group", []string{"list", "-n", "team-a", "--annotation-backend", "storageconfigs." + testGroup}, "list-annotation.golden"},
		{"a selector that matches nothing prints nothing", []string{"list", "-n", "ops", "-l", fixtureLabel + "=nobody"}, "list-empty.golden"},
	}
	runGolden(t, f.names, tests)
}

// stderrSection appends what went to stderr, so golden files show it too.
// goldenRun is a run of the plugin whose output, stderr included, must be
// the golden file's.
type goldenRun struct {
	name   string
	args   []string
	golden string
}

// runGolden runs each of runs against the fixture n as a subtest: the run
// must succeed and print its golden file.
func runGolden(t *testing.T, n *names, runs []goldenRun) {
	t.Helper()
	for _, tt := range runs {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, n, nil, tt.args...)
			if r.err != nil {
				t.Fatalf("%s: %v\nstderr: %s", tt.args[0], r.err, r.errOut)
			}
			golden(t, tt.golden, r.out+stderrSection(r.errOut))
		})
	}
}

func stderrSection(s string) string {
	if s == "" {
		return ""
	}
	return "--- stderr\n" + s
}

// TestListFlagsKeysRecordedInSeveralNamespaces: Given two installs of an
// operator with different claim namespaces (dup-a and dup-b), each of which
// granted the same key to another Widget, When list -A runs, Then it warns
// that the key is recorded in both namespaces, naming each holder, before
// the table, and -o json marks both records with recordedIn; a key recorded
// once is not flagged.
func TestListFlagsKeysRecordedInSeveralNamespaces(t *testing.T) {
	const key = "queue|amqp://mq.svc:5672/orders"
	n := &names{}
	labels := map[string]string{fixtureLabel: "dup-operator"}
	namespace(t, "team-dup")
	alpha := widget(t, "team-dup", "alpha", conditions.ReasonClaimed, "")
	bravo := widget(t, "team-dup", "bravo", conditions.ReasonClaimed, "")
	n.add(string(alpha.GetUID()), "0a1b2c3d-1111-4000-8000-000000000001")
	n.add(string(bravo.GetUID()), "7e8f9a0b-2222-4000-8000-000000000002")
	for _, install := range []struct {
		ns     string
		holder *unstructured.Unstructured
		token  string
	}{{"dup-a", alpha, "5001"}, {"dup-b", bravo, "5002"}} {
		namespace(t, install.ns)
		acquire(t, n, claimer(t, claim.Config{Namespace: install.ns, Labels: labels}), key, install.holder, install.token)
	}
	acquire(t, n, claimer(t, claim.Config{Namespace: "dup-a", Labels: labels}), "queue|amqp://mq.svc:5672/billing", alpha, "5003")

	tests := []goldenRun{
		{"table", []string{"list", "-A", "-l", fixtureLabel + "=dup-operator"}, "list-split-key.golden"},
		{"json", []string{"list", "-A", "-l", fixtureLabel + "=dup-operator", "-o", "json"}, "list-split-key.json.golden"},
	}
	runGolden(t, n, tests)
}

// TestMarkSplitKeys: a key is flagged when its records lie in more than one
// namespace, whatever their backend or state; records of one namespace are
// not.
func TestMarkSplitKeys(t *testing.T) {
	rec := func(key, ns, holder string, state State) record {
		return record{rec: claim.Record{Key: key, Ref: types.NamespacedName{Namespace: ns, Name: "r"}, Holder: claim.Holder{Kind: "Widget", Namespace: "t", Name: holder}}, state: state}
	}
	named := func(r record, name string) record {
		r.rec.Ref.Name = name
		return r
	}
	tests := []struct {
		name         string
		recs         []record
		wantIn       [][]string
		wantWarnings int
	}{
		{"one record per key", []record{rec("a", "ops", "x", StateHeld), rec("b", "ops-b", "y", StateHeld)}, [][]string{nil, nil}, 0},
		{"one key in two namespaces", []record{rec("a", "ops", "x", StateHeld), rec("a", "ops-b", "y", StateHolderGone), rec("b", "ops", "z", StateHeld)},
			[][]string{{"ops", "ops-b"}, {"ops", "ops-b"}, nil}, 1},
		{"two records of one object", []record{rec("a", "ops", "x", StateHeld), rec("a", "ops", "y", StateForeign)}, [][]string{nil, nil}, 0},
		{"one key under two names in one namespace", []record{named(rec("a", "ops", "x", StateHeld), "claim-1"), named(rec("a", "ops", "y", StateForeign), "lock-1")}, [][]string{nil, nil}, 1},
		{"records without a key", []record{rec("", "ops", "x", StateForeign), named(rec("", "ops-b", "y", StateForeign), "other")}, [][]string{nil, nil}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			warnings := markSplitKeys(tt.recs)
			var in [][]string
			for _, r := range tt.recs {
				in = append(in, r.recordedIn)
			}
			if diff := cmp.Diff(tt.wantIn, in); diff != "" {
				t.Fatalf("recordedIn (-want +got):\n%s", diff)
			}
			if len(warnings) != tt.wantWarnings {
				t.Fatalf("want %d warnings, got %q", tt.wantWarnings, warnings)
			}
		})
	}
}

// TestListFlagsAKeyRecordedUnderTwoNamesInOneNamespace: two Claimers in one
// claim namespace, one with the default Prefix and one with Prefix "lock-",
// each grant the same key (the exclusion boundary is the namespace and the
// record naming together, see claim.Config). Given
// such two grants, When list -A runs, Then it warns that the key is recorded
// under two names in that namespace, naming both holders.
func TestListFlagsAKeyRecordedUnderTwoNamesInOneNamespace(t *testing.T) {
	const key = "queue|amqp://mq.svc:5672/prefixes"
	n := &names{}
	labels := map[string]string{fixtureLabel: "prefix-operator"}
	namespace(t, "team-prefix")
	namespace(t, "prefix-ops")
	alpha := widget(t, "team-prefix", "alpha", conditions.ReasonClaimed, "")
	bravo := widget(t, "team-prefix", "bravo", conditions.ReasonClaimed, "")
	n.add(string(alpha.GetUID()), "0a1b2c3d-3333-4000-8000-000000000001")
	n.add(string(bravo.GetUID()), "7e8f9a0b-4444-4000-8000-000000000002")
	acquire(t, n, claimer(t, claim.Config{Namespace: "prefix-ops", Labels: labels}), key, alpha, "6001")
	acquire(t, n, claimer(t, claim.Config{Namespace: "prefix-ops", Labels: labels, Prefix: "lock-"}), key, bravo, "6002")

	r := run(t, n, nil, "list", "-A", "-l", fixtureLabel+"=prefix-operator")
	if r.err != nil {
		t.Fatalf("list: %v\nstderr: %s", r.err, r.errOut)
	}
	want := fmt.Sprintf("key %q is recorded under 2 names in namespace prefix-ops", key)
	if !strings.Contains(r.errOut, want) || !strings.Contains(r.errOut, "team-prefix/alpha") || !strings.Contains(r.errOut, "team-prefix/bravo") {
		t.Fatalf("list -A stderr does not warn %q naming both holders:\n%s", want, r.errOut)
	}
}
