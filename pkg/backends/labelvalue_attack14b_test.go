package backends

import "testing"

// TestAttack14bLabelValueKeepsDistinctInputsDistinct: promise: LabelValue
// maps distinct inputs to distinct label values. A value made only of label
// characters but with a leading or trailing '-', '_' or '.' is not a valid
// label value, gets no hash (no character was replaced), and is trimmed into
// the very value another input is passed through as: two holders whose
// HolderLabels values are "-abc" and "abc" (or "abc." and "abc") select each
// other's records.
func TestAttack14bLabelValueKeepsDistinctInputsDistinct(t *testing.T) {
	for _, pair := range [][2]string{
		{"-abc", "abc"},
		{"abc.", "abc"},
		{"_team_", "team"},
		{"-abc", "abc-"},
	} {
		if a, b := LabelValue(pair[0]), LabelValue(pair[1]); a == b {
			t.Errorf("LabelValue(%q) = LabelValue(%q) = %q: distinct inputs became one label value", pair[0], pair[1], a)
		}
	}
}
