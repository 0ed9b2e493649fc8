package claimsctl

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestWhyGolden: Given the fixture's Widgets, When why runs for each, Then it
// prints the claim condition in words and the records the Widget holds,
// waits for, or is the planned successor of.
func TestWhyGolden(t *testing.T) {
	f := setup(t)
	tests := []goldenRun{
		{"a parked Widget waits for the holder and is the successor of another key", []string{"why", "widget/orders-v2", "-n", "team-a", "--claim-namespace", "ops"}, "why-parked.golden"},
		{"a holder, records read in every namespace, with the annotation backend", []string{"why", "widgets", "orders", "-n", "team-a", "--annotation-backend", "storageconfigs", "-o", "wide"}, "why-holder.golden"},
		{"an object without a claim condition", []string{"why", "widget/reports", "-n", "team-a"}, "why-no-condition.golden"},
		{"json", []string{"why", "widget.claims.test.ocf.io/orders-v2", "-n", "team-a", "-o", "json"}, "why-parked.json.golden"},
	}
	runGolden(t, f.names, tests)
}

// TestWhyRefuses: Given bad arguments or a missing object, When why runs,
// Then it fails with an error naming the problem and prints nothing.
func TestWhyRefuses(t *testing.T) {
	f := setup(t)
	tests := []struct {
		name string
		args []string
	}{
		{"no name", []string{"why", "widget"}},
		{"unknown kind", []string{"why", "gizmo/orders", "-n", "team-a"}},
		{"missing object", []string{"why", "widget/nobody", "-n", "team-a"}},
		{"bad output", []string{"why", "widget/orders", "-n", "team-a", "-o", "name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, f.names, nil, tt.args...)
			if r.err == nil || r.out != "" {
				t.Fatalf("why %v: want an error and no output, got %v and %q", tt.args, r.err, r.out)
			}
		})
	}
}

// TestKeyOfCondition: the key a not-granted condition waits for is read
// from the claim's default message; anything else names no key.
func TestKeyOfCondition(t *testing.T) {
	tests := []struct {
		name    string
		cond    *metav1.Condition
		wantKey string
		wantOK  bool
	}{
		{"parked", &metav1.Condition{Status: metav1.ConditionFalse, Message: `Key "a|b \"c\"" is held by Widget x/y.`}, `a|b "c"`, true},
		{"granted names no wait", &metav1.Condition{Status: metav1.ConditionTrue, Message: `Key "a" acquired by x.`}, "", false},
		{"custom message", &metav1.Condition{Status: metav1.ConditionFalse, Message: "Storage already attached."}, "", false},
		{"unterminated quote", &metav1.Condition{Status: metav1.ConditionFalse, Message: `Key "a`}, "", false},
		{"no condition", nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, ok := keyOfCondition(tt.cond)
			if diff := cmp.Diff([]any{tt.wantKey, tt.wantOK}, []any{key, ok}); diff != "" {
				t.Fatalf("keyOfCondition (-want +got):\n%s", diff)
			}
		})
	}
}
