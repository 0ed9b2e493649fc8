package backends_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/ocf-claim/claim/pkg/backends"
)

// TestAttack14cLabelValueOfAValidValueEqualsAnotherInputsLabel: promise 4:
// distinct inputs give distinct outputs, up to 40-bit hash collisions, and
// valid values come out unchanged. The two cannot both hold: the label of an
// invalid value is itself a valid value, which LabelValue returns
// unchanged. No hash collision is needed: anyone who can read a holder's
// label (it is on every record) can name a second holder so that both get
// the same selector label. Shown for "/" (namespace/name), a value only
// trimming changes, and a value only too long.
func TestAttack14cLabelValueOfAValidValueEqualsAnotherInputsLabel(t *testing.T) {
	for _, v := range []string{
		"team-a/alpha",
		"-alpha",
		strings.Repeat("a", 100),
	} {
		out := backends.LabelValue(v)
		if errs := validation.IsValidLabelValue(out); len(errs) > 0 {
			t.Fatalf("LabelValue(%q) = %q is not a valid label value: %v", v, out, errs)
		}
		if out == v {
			t.Fatalf("LabelValue(%q) unchanged; the case needs an invalid input", v)
		}
		if again := backends.LabelValue(out); again == out {
			t.Errorf("distinct inputs %q and %q both give the label %q", v, out, out)
		}
	}
}
