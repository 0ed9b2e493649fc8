package claimmw

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ocf-claim/claim/pkg/claim"
)

// The delay before a failed release is tried again doubles from 50 ms with
// each failure in a row, up to 5 s; a pass that acts for a key again keeps
// the count (it is no release that worked), a release that worked resets
// it. A key is remembered, whatever record of it the object holds (a token
// that rose since), until a pass acts for it again.
func TestAFailedReleaseIsTriedAgainAfterADelayThatDoublesUntilAReleaseWorks(t *testing.T) {
	x := types.NamespacedName{Namespace: "ns", Name: "x"}
	b := claim.Record{Key: "b", Token: "7"}
	c := claim.Record{Key: "c", Token: "9"}
	var f failedReleases
	var delays []time.Duration
	for range 8 {
		delays = append(delays, f.failed(x, []claim.Record{b, c}, nil))
		f.acted(x, []string{"b"})
	}
	want := []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond,
		800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 5 * time.Second}
	if diff := cmp.Diff(want, delays); diff != "" {
		t.Errorf("delays after failures in a row, each followed by a pass that acted for b again (-want +got):\n%s", diff)
	}
	risen := claim.Record{Key: "c", Token: "10"}
	if got := f.retried(x, []claim.Record{b, risen}); !cmp.Equal(got, []claim.Record{risen}) {
		t.Errorf("retried: %v, want c alone, whatever its token (b was acted for since)", got)
	}
	f.succeeded(x, []string{"c"})
	if got := f.retried(x, []claim.Record{b, c}); len(got) != 0 {
		t.Errorf("retried after the release worked: %v, want none", got)
	}
	if d := f.failed(x, []claim.Record{b}, nil); d != 50*time.Millisecond {
		t.Errorf("delay after a release that worked and a new failure: %s, want 50ms", d)
	}
	f.forget(x)
	if got := f.retried(x, []claim.Record{b}); len(got) != 0 {
		t.Errorf("retried after the object was forgotten: %v, want none", got)
	}
}
