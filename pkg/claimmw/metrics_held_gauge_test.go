package claimmw_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// TestHeldGaugeDropsByTheDeletedObjectsKeysOnly: "no series outlives a
// deleted object (the held gauge drops by the object's keys)", even when two
// middlewares share a controller name (two managers in one process, a
// multi-cluster operator, or any test binary; controller-runtime sums its own
// metrics of such controllers): the gauge series is keyed by the controller
// label only, so neither middleware may overwrite it with its own private
// total, and deleting one object drops the gauge by that object's keys only.
func TestHeldGaugeDropsByTheDeletedObjectsKeysOnly(t *testing.T) {
	const name = "held-gauge"
	// Given two managers, each with a middleware named name
	first := start(t, setup{opts: []claimmw.Option{claimmw.WithName(name)}})
	second := start(t, setup{opts: []claimmw.Option{claimmw.WithName(name)}})
	// And b, of the first, holds one key
	first.createAndWait(t, "b", conditions.ReasonClaimed, "k-b")
	// And a, of the second, holds two
	second.createAndWait(t, "a", conditions.ReasonClaimed, "k-a1", "k-a2")
	time.Sleep(200 * time.Millisecond)
	before := metricValue(t, claimmw.MetricClaimsHeld, name, nil)

	// When b, holding one key, is deleted
	first.deleteWidgetAsync(t, "b")
	eventually(t, 10*time.Second, func() (bool, string) {
		_, err := first.widget(t, "b")
		return err != nil, fmt.Sprintf("b still exists (%v)", err)
	})
	time.Sleep(300 * time.Millisecond)
	after := metricValue(t, claimmw.MetricClaimsHeld, name, nil)

	// Then the gauge dropped by b's one key: a still holds two
	t.Logf("%s{controller=%q}: %v before, %v after deleting a one-key holder; 3 keys were held, 2 still are",
		claimmw.MetricClaimsHeld, name, before, after)
	if before-after != 1 {
		t.Errorf("deleting an object that held 1 key moved %s from %v to %v (by %v); want a drop of 1",
			claimmw.MetricClaimsHeld, before, after, before-after)
	}
	if after != 2 {
		t.Errorf("%s = %v after the deletion while a holds 2 keys under controller %q", claimmw.MetricClaimsHeld, after, name)
	}
}
