package conditions

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ocf-claim/claim/pkg/claim"
)

// claimReasons reads the claim.Reason constants from pkg/claim's source, so
// that a reason added there without a row here fails the test.
func claimReasons(t *testing.T) []claim.Reason {
	t.Helper()
	dir := filepath.Join("..", "claim")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []claim.Reason
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				if id, ok := v.Type.(*ast.Ident); !ok || id.Name != "Reason" {
					continue
				}
				for _, val := range v.Values {
					lit, ok := val.(*ast.BasicLit)
					if !ok {
						t.Fatalf("claim.Reason %v: not a string literal", v.Names)
					}
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, claim.Reason(s))
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no claim.Reason constants found")
	}
	return out
}

func TestEveryClaimReasonIsInTheTableExactlyOnce(t *testing.T) {
	// Given the claim.Reason constants
	all := claimReasons(t)
	known := map[claim.Reason]bool{}
	for _, r := range all {
		known[r] = true
	}
	// Then each is the outcome of exactly one row, and every outcome is one of them
	count := map[claim.Reason]int{}
	for _, row := range reasons {
		if row.outcome == "" {
			continue
		}
		count[row.outcome]++
		if !known[row.outcome] {
			t.Errorf("row %+v: %q is not a claim.Reason", row, row.outcome)
		}
	}
	for _, r := range all {
		if count[r] != 1 {
			t.Errorf("claim.Reason %q is in the table %d times, want 1", r, count[r])
		}
	}
	// And the rows of a failed call are one per condition reason
	seen := map[Reason]bool{}
	for _, row := range reasons {
		if row.outcome != "" {
			continue
		}
		if seen[row.condition] {
			t.Errorf("condition %q has two error rows", row.condition)
		}
		seen[row.condition] = true
	}
}

func TestDerivedReasonsAgreeWithTheTable(t *testing.T) {
	for _, row := range reasons {
		if row.outcome == "" {
			continue
		}
		// Given an Acquire that ended with the row's outcome
		o := claim.Outcome{Reason: row.outcome, Key: "k"}
		// Then the condition, the grant event and the metric label are the row's
		if got := ReasonFor(o); got != row.condition {
			t.Errorf("ReasonFor(%s) = %s, want %s", row.outcome, got, row.condition)
		}
		if got := GrantEvent(row.outcome); got != row.event {
			t.Errorf("GrantEvent(%s) = %q, want %q", row.outcome, got, row.event)
		}
		if got := MetricLabel(row.outcome, nil); got != row.metric {
			t.Errorf("MetricLabel(%s, nil) = %q, want %q", row.outcome, got, row.metric)
		}
		// And the metric label is the outcome's own value, as alerts match it
		if row.metric != string(row.outcome) {
			t.Errorf("metric label %q of %s is not the outcome's value", row.metric, row.outcome)
		}
		// And only a grant has a grant event, and only a grant reads Claimed
		if row.event != "" && !row.outcome.Granted() {
			t.Errorf("%s is not a grant but has the grant event %q", row.outcome, row.event)
		}
		if (row.condition == ReasonClaimed) != row.outcome.Granted() {
			t.Errorf("%s: condition %s, granted %v", row.outcome, row.condition, row.outcome.Granted())
		}
	}
	// Given failed calls, then their labels are the error rows'
	invalid := fmt.Errorf("wrapped: %w", claim.ErrInvalidKey)
	if got := MetricLabel(claim.ReasonAcquired, invalid); got != rowOfCondition(ReasonInvalidKey).metric || got != "InvalidKey" {
		t.Errorf("MetricLabel(invalid key) = %q", got)
	}
	if got := MetricLabel("", errors.New("boom")); got != rowOfCondition(ReasonClaimError).metric || got != "Error" {
		t.Errorf("MetricLabel(error) = %q", got)
	}
	// Given an outcome the table does not know, then it reads ClaimError
	if got := ReasonFor(claim.Outcome{Reason: "Unheard"}); got != ReasonClaimError {
		t.Errorf("ReasonFor(unknown) = %s, want ClaimError", got)
	}
	if got := GrantEvent("Unheard"); got != "" {
		t.Errorf("GrantEvent(unknown) = %q, want none", got)
	}
}
