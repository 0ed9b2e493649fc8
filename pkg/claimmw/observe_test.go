package claimmw_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// metricValue reads one series of the middleware's metrics from
// controller-runtime's registry: the gauge or counter value, or a
// histogram's sample count.
func metricValue(t *testing.T, family, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if got["controller"] != name {
				continue
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			return value(m)
		}
	}
	return 0
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return 0
}

// hasEvent reports whether an event with reason regards the Widget name.
func (f *fixture) hasEvent(t *testing.T, name, reason string) bool {
	t.Helper()
	var list eventsv1.EventList
	if err := env.APIReader.List(context.Background(), &list, client.InNamespace(f.ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			return true
		}
	}
	return false
}

func TestEventsAndMetricsReportWhatHappened(t *testing.T) {
	const name = "observed"
	f := start(t, setup{opts: []claimmw.Option{claimmw.WithName(name)}})
	// Given a holds k and b is parked on it
	f.aHoldsKAndBWaits(t)
	// Then a has a Claimed event and b a Parked one
	for _, want := range []struct{ widget, reason string }{{"a", string(claimmw.EventClaimed)}, {"b", string(conditions.ReasonParked)}} {
		eventually(t, 5*time.Second, func() (bool, string) {
			return f.hasEvent(t, want.widget, want.reason), fmt.Sprintf("no %s event on %s", want.reason, want.widget)
		})
	}
	// And the metrics count one claim held, the outcomes by reason, and the latency
	if got := metricValue(t, claimmw.MetricClaimsHeld, name, nil); got != 1 {
		t.Errorf("%s = %v, want 1", claimmw.MetricClaimsHeld, got)
	}
	for _, reason := range []string{"Acquired", "HeldElsewhere"} {
		if got := metricValue(t, claimmw.MetricAcquireTotal, name, map[string]string{"reason": reason}); got < 1 {
			t.Errorf("%s{reason=%s} = %v, want at least 1", claimmw.MetricAcquireTotal, reason, got)
		}
	}
	if got := metricValue(t, claimmw.MetricAcquireDuration, name, nil); got < 2 {
		t.Errorf("%s has %v samples, want at least 2", claimmw.MetricAcquireDuration, got)
	}
	// When a is deleted
	f.deleteWidgetAsync(t, "a")
	f.waitForReason(t, "b", conditions.ReasonClaimed, wakeWithin)
	// Then a has a Released event, b a Claimed one, and still one claim is held
	for _, want := range []struct{ widget, reason string }{{"a", string(claimmw.EventReleased)}, {"b", string(claimmw.EventClaimed)}} {
		eventually(t, 5*time.Second, func() (bool, string) {
			return f.hasEvent(t, want.widget, want.reason), fmt.Sprintf("no %s event on %s", want.reason, want.widget)
		})
	}
	eventually(t, 5*time.Second, func() (bool, string) {
		got := metricValue(t, claimmw.MetricClaimsHeld, name, nil)
		return got == 1, fmt.Sprintf("%s = %v, want 1", claimmw.MetricClaimsHeld, got)
	})
}
