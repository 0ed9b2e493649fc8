package claimmw

import (
	"testing"

	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
)

// TestAnOcfOwnerRunsItsInnerReconcilerWhileParkedUnlessToldOtherwise: ocf
// components report a condition in every pass, so a GetStatusConditions
// owner defaults to RunInnerWhileParked; an explicit choice wins, and other
// types keep SkipInnerWhileParked.
func TestAnOcfOwnerRunsItsInnerReconcilerWhileParkedUnlessToldOtherwise(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
		want ParkedMode
	}{
		{"given an ocf owner and no choice then it runs while parked", []Option{For(&ocfOwner{})}, RunInnerWhileParked},
		{"given an ocf owner and an explicit skip then it skips", []Option{For(&ocfOwner{}), WhileParked(SkipInnerWhileParked)}, SkipInnerWhileParked},
		{"given a Status.Conditions type and no choice then it skips", []Option{For(&testcrd.Widget{})}, SkipInnerWhileParked},
		{"given a Status.Conditions type and an explicit run then it runs", []Option{For(&testcrd.Widget{}), WhileParked(RunInnerWhileParked)}, RunInnerWhileParked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c config
			for _, o := range tc.opts {
				o(&c)
			}
			_ = c.validate() // the missing client and keys are not this test's
			if c.parkedMode != tc.want {
				t.Errorf("parked mode %d, want %d", c.parkedMode, tc.want)
			}
		})
	}
}
