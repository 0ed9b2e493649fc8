package claimmw

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
)

// TestADeletedObjectWakesOnlyYieldersItGoesBefore pins the order a deletion
// wakes NotFirst objects by: the deleted object goes before an object, in
// any namespace, when it was created earlier, or at the same time with a
// smaller namespace/name; one without a creation time goes before nobody.
func TestADeletedObjectWakesOnlyYieldersItGoesBefore(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	widget := func(ns, name string, created time.Time) *testcrd.Widget {
		return &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: metav1.NewTime(created)}}
	}
	tests := []struct {
		name    string
		deleted *testcrd.Widget
		yielder *testcrd.Widget
		wakesIt bool
	}{
		{"older, another namespace", widget("a", "old", t0), widget("b", "young", t0.Add(time.Second)), true},
		{"younger, another namespace (a tenant's short-lived object)", widget("a", "noise", t0.Add(time.Second)), widget("b", "victim", t0), false},
		{"same time, smaller namespace/name", widget("a", "x", t0), widget("b", "x", t0), true},
		{"same time, larger namespace/name", widget("b", "x", t0), widget("a", "x", t0), false},
		{"no creation time", widget("a", "x", time.Time{}), widget("b", "x", t0), false},
		{"yielder without a creation time", widget("a", "x", t0), widget("b", "x", time.Time{}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := goesBefore(tt.deleted, tt.yielder); got != tt.wakesIt {
				t.Errorf("goesBefore(%s, %s) = %t, want %t", tt.deleted.Name, tt.yielder.Name, got, tt.wakesIt)
			}
		})
	}
}
