package claimmw_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// noteRecorder keeps the note of every event, by the name of the object it
// regards.
type noteRecorder struct {
	mu    sync.Mutex
	notes map[string][]string
}

func (r *noteRecorder) Eventf(regarding runtime.Object, _ runtime.Object, _, reason, _, note string, args ...interface{}) {
	obj, ok := regarding.(client.Object)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.notes == nil {
		r.notes = map[string][]string{}
	}
	r.notes[obj.GetName()] = append(r.notes[obj.GetName()], reason+": "+fmt.Sprintf(note, args...))
}

func (r *noteRecorder) of(name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.notes[name]...)
}

// TestHandoverEventsDoNotNameASuccessorInAnotherNamespace: under the
// default disclosure (DiscloseSameNamespace) the events of an object name
// another object only when it is in the object's own namespace. A holder
// that hands its key over to an object of another tenant learns from its
// conditions only that the key is held "outside this namespace"; its
// handover events must not tell it that tenant's namespace and name.
func TestHandoverEventsDoNotNameASuccessorInAnotherNamespace(t *testing.T) {
	rec := &noteRecorder{}
	var successorNS string
	// The operator decides to hand over only at the test's "When": a pass of
	// the holder woken by the successor's first write would otherwise hand
	// over before the successor is seen waiting.
	var handing atomic.Bool
	handToOther := func(_ context.Context, obj client.Object, _ string) (client.ObjectKey, bool, error) {
		if obj.GetName() != "holder" || !handing.Load() {
			return client.ObjectKey{}, false, nil
		}
		return client.ObjectKey{Namespace: successorNS, Name: "secret-project-successor"}, true, nil
	}
	r := startTenantRig(t, true, nil, claimmw.WithHandover(handToOther), claimmw.WithEventRecorder(rec))
	successorNS = r.b
	ctx := context.Background()
	dc := direct(t)
	// Given a holder in namespace a holds k. The rig watches Widgets in
	// every namespace, and other tests leave Widgets naming "k" behind
	// (envtest removes no namespace): the key is this test's own.
	const k = "handed-over-key"
	if err := dc.Create(ctx, &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: r.a, Name: "holder"}, Spec: testcrd.WidgetSpec{Keys: []string{k}}}); err != nil {
		t.Fatal(err)
	}
	r.waitReason(t, r.a, "holder", conditions.ReasonClaimed)
	// And an object of another tenant, in namespace b, waits for k
	if err := dc.Create(ctx, &testcrd.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: r.b, Name: "secret-project-successor"}, Spec: testcrd.WidgetSpec{Keys: []string{k}}}); err != nil {
		t.Fatal(err)
	}
	r.waitReason(t, r.b, "secret-project-successor", conditions.ReasonParked)
	// When the operator hands k over to it on the holder's next pass
	h := &testcrd.Widget{}
	if err := dc.Get(ctx, client.ObjectKey{Namespace: r.a, Name: "holder"}, h); err != nil {
		t.Fatal(err)
	}
	handing.Store(true)
	h.Labels = map[string]string{"touched": "1"}
	if err := dc.Update(ctx, h); err != nil {
		t.Fatal(err)
	}
	r.waitReason(t, r.b, "secret-project-successor", conditions.ReasonClaimed)
	eventually(t, 20*time.Second, func() (bool, string) {
		return len(rec.of("holder")) >= 2, fmt.Sprintf("holder's events: %q", rec.of("holder"))
	})
	// Then the holder's condition does not name the successor
	if c := r.claimedIn(t, r.a, "holder"); strings.Contains(c.Message, r.b) || strings.Contains(c.Message, "secret-project") {
		t.Errorf("holder's condition names the other tenant's object: %s", c.Message)
	}
	// And neither do its events
	for _, note := range rec.of("holder") {
		if strings.Contains(note, r.b) || strings.Contains(note, "secret-project") {
			t.Errorf("holder's event names the other tenant's object: %s", note)
		}
	}
}
