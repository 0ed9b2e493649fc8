package envtest

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestALogRingKeepsItsLastLinesOldestFirstAndNoneOnceClosed(t *testing.T) {
	for _, n := range []int{0, 1, testLogLines - 1, testLogLines, testLogLines + 1, 2*testLogLines + 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			r := &logRing{}
			var want []string
			for i := range n {
				line := fmt.Sprintf("line %d", i)
				r.add("", line)
				want = append(want, line)
			}
			if len(want) > testLogLines {
				want = want[len(want)-testLogLines:]
			}
			got := r.close()
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("kept lines (-want +got):\n%s", diff)
			}
			r.add("", "after close")
			if again := r.close(); len(again) != len(got) {
				t.Errorf("%d lines after a line logged once closed, want %d", len(again), len(got))
			}
		})
	}
}
