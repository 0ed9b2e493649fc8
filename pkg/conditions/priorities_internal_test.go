package conditions

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// goldenStatuses reads testdata/ocf-statuses.golden: ocf's status names with
// their priorities, checked in so that the tests do not depend on a file
// outside the repository.
func goldenStatuses(t *testing.T) map[string]Priority {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "ocf-statuses.golden"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]Priority{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, n, ok := strings.Cut(line, " ")
		p, err := strconv.Atoi(n)
		if !ok || err != nil {
			t.Fatalf("golden line %q: want \"Name Priority\"", line)
		}
		out[name] = Priority(p)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("golden list of ocf statuses is empty")
	}
	return out
}

func TestPriorityOfRanksEveryOCFStatusAsOCFDoes(t *testing.T) {
	golden := goldenStatuses(t)
	// Given every ocf status of the golden list, then PriorityOf ranks it at its ocf priority
	for name, want := range golden {
		if got := PriorityOf(name); got != want {
			t.Errorf("PriorityOf(%q) = %d, want %d", name, got, want)
		}
	}
	// And the table knows no status ocf does not have
	if diff := cmp.Diff(golden, ocfPriorities); diff != "" {
		t.Errorf("ocfPriorities differs from the golden ocf list (-golden +table):\n%s", diff)
	}
	// And a reason ocf does not know ranks 0
	if got := PriorityOf("SomethingElse"); got != PriorityUnknown {
		t.Errorf("PriorityOf(unrecognised) = %d, want 0", got)
	}
}

// docRow is one row of the status table in docs/ocf.md.
var docRow = regexp.MustCompile("^\\| `([A-Za-z]+)` \\| ([0-9]+) \\|")

func TestTheOCFStatusTableInTheDocsMatchesTheGoldenList(t *testing.T) {
	// Given the table under the "ocf status | Priority" header in docs/ocf.md
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "ocf.md"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Priority{}
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "| ocf status | Priority |") {
			in = true
			continue
		}
		if in && !strings.HasPrefix(line, "|") {
			break
		}
		if m := docRow.FindStringSubmatch(line); in && m != nil {
			p, _ := strconv.Atoi(m[2])
			if _, dup := got[m[1]]; dup {
				t.Errorf("docs/ocf.md lists %s twice", m[1])
			}
			got[m[1]] = Priority(p)
		}
	}
	// Then it lists every ocf status at its priority, and nothing else
	if diff := cmp.Diff(goldenStatuses(t), got); diff != "" {
		t.Errorf("docs/ocf.md status table differs from the golden ocf list (-golden +docs):\n%s", diff)
	}
}

// sharedReference is the project's record of ocf's code, beside the
// repository in a developer's checkout and in CI (../shared).
var sharedReference = filepath.Join("..", "..", "..", "shared", "reference", "ocf.md")

func TestTheGoldenListMatchesTheSharedReferenceWhenPresent(t *testing.T) {
	data, err := os.ReadFile(sharedReference)
	if os.IsNotExist(err) {
		// The golden copy is the contract; the reference is checked when a
		// checkout has it, so that an update there fails here.
		t.Logf("%s is not present; the golden list alone is checked", sharedReference)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	// Given the "Status priorities" sentence of the reference
	text := strings.Join(strings.Fields(string(data)), " ")
	const lead = "`Status.Priority()`, higher wins):"
	i := strings.Index(text, lead)
	if i < 0 {
		t.Fatalf("%s: no %q sentence", sharedReference, lead)
	}
	list, _, ok := strings.Cut(text[i+len(lead):], ". ")
	if !ok {
		t.Fatalf("%s: the status priority list does not end", sharedReference)
	}
	got := map[string]Priority{}
	for _, item := range strings.Split(list, ",") {
		words := strings.Fields(item)
		p, err := strconv.Atoi(words[len(words)-1])
		if len(words) < 2 || err != nil {
			t.Fatalf("%s: status item %q: want \"Name Priority\"", sharedReference, item)
		}
		// "Unknown and anything unrecognised 0": the name is the first word.
		got[words[0]] = Priority(p)
	}
	// Then the golden copy says the same
	if diff := cmp.Diff(got, goldenStatuses(t)); diff != "" {
		t.Errorf("golden ocf list differs from %s (-reference +golden):\n%s", sharedReference, diff)
	}
}
