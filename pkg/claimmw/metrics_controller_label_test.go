package claimmw_test

import (
	"fmt"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/ocf-claim/claim/pkg/claimmw"
)

// controllerLabels returns the values of the controller label of family.
func controllerLabels(t *testing.T, family string) map[string]bool {
	t.Helper()
	fams, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" {
					out[l.GetValue()] = true
				}
			}
		}
	}
	return out
}

// TestMetricsCarryTheControllerNameAndAreOffWhenAskedTo: the controller
// label of the claim metrics is the name controller-runtime reports the
// controller under (even when the builder was Named otherwise), and
// WithMetrics(false) records nothing and does not panic.
func TestMetricsCarryTheControllerNameAndAreOffWhenAskedTo(t *testing.T) {
	// Given a middleware named metrics-on and one named metrics-off with
	// metrics off
	on := start(t, setup{opts: []claimmw.Option{claimmw.WithName("metrics-on")}})
	off := start(t, setup{opts: []claimmw.Option{claimmw.WithName("metrics-off"), claimmw.WithMetrics(false)}})
	// When each reconciles a holder and a parked object
	for _, f := range []*fixture{on, off} {
		f.aHoldsKAndBWaits(t)
	}
	// Then controller-runtime's own metrics and the claim's name the same
	// controller
	eventually(t, 5*time.Second, func() (bool, string) {
		cr := controllerLabels(t, "controller_runtime_reconcile_total")
		return cr["metrics-on"] && cr["metrics-off"], fmt.Sprintf("controller-runtime controllers: %v", cr)
	})
	for _, fam := range []string{claimmw.MetricClaimsHeld, claimmw.MetricAcquireTotal, claimmw.MetricAcquireDuration} {
		got := controllerLabels(t, fam)
		if !got["metrics-on"] {
			t.Errorf("%s has no series for controller metrics-on: %v", fam, got)
		}
		// And the one with metrics off has none
		if got["metrics-off"] {
			t.Errorf("%s has a series for metrics-off, whose metrics are off", fam)
		}
	}
}
