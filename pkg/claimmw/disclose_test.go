package claimmw_test

// What a tenant is shown of others and of the operator, end to end: events
// and conditions name no object of another namespace, an API error of the
// keys function is shown only by its class, and no condition, event or log
// line echoes a key's credentials. The pure redaction rules are pinned in
// disclose_internal_test.go.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/claim"
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

// Under the default DiscloseSameNamespace a claim error is shown "only by
// the class of the API error", never the raw server error that names the
// operator's ServiceAccount and the claim namespace. A keys function takes a
// context because it may read the API (resolve a reference to a Secret, a
// Service); when that read fails, the tenant sees only the class of the API
// error, not the operator's ServiceAccount or its namespace, and a transient
// API error is not presented as the tenant's fault (InvalidKey, "fix the
// spec").
func TestAnAPIErrorOfTheKeysFunctionIsNotDisclosedRaw(t *testing.T) {
	const sa = "system:serviceaccount:operator-system:claims-operator"
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: sa}
	operator, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var claimNS string
	// Given a keys function that resolves each key through a ConfigMap in the
	// operator's namespace, read with the operator's identity
	keys := claimmw.WithKeys(func(ctx context.Context, obj client.Object) ([]string, error) {
		w := obj.(*testcrd.Widget)
		var out []string
		for _, k := range w.Spec.Keys {
			cm := &corev1.ConfigMap{}
			if err := operator.Get(ctx, client.ObjectKey{Namespace: claimNS, Name: "ref-" + k}, cm); err != nil {
				return nil, fmt.Errorf("resolving %q: %w", k, err)
			}
			out = append(out, cm.Data["key"])
		}
		return out, nil
	})
	f := start(t, setup{opts: []claimmw.Option{keys}})
	claimNS = f.ns
	// When the read is refused by the API server (a fault of the operator's
	// or the API server's, not of the spec: ClaimError, retried)
	f.createWidget(t, "w", "db")
	var cond = f.waitForReason(t, "w", conditions.ReasonClaimError, 20*time.Second)
	// Then the condition the tenant reads names neither the ServiceAccount nor the namespace of the operator
	if strings.Contains(cond.Message, "serviceaccount") || strings.Contains(cond.Message, "forbidden") {
		t.Errorf("condition %s discloses the raw API error: %q", cond.Reason, cond.Message)
	}
}

// "No condition/event/log line echoes a raw key with credentials". A
// Config.Normalize that refuses a key the ordinary Go way,
// fmt.Errorf("...%q", key), has its error wrapped by NormalizeKey and shown
// in the InvalidKey condition: the user info is redacted there too, not only
// in ValidateKey's own errors, so the key's password never reaches the
// tenant-readable status.
func TestANormalizerErrorDoesNotEchoCredentials(t *testing.T) {
	cfg := claim.Config{Normalize: func(key string) (string, error) {
		if strings.Contains(key, "@") {
			return "", fmt.Errorf("key %q names a backend this operator does not know", key)
		}
		return key, nil
	}}
	f := start(t, setup{claimCfg: &cfg})
	// Given a tenant whose spec names a reference with credentials the key normalizer refuses
	f.createWidget(t, "w", "postgres://app:hunter2@db.data.svc:5432/app")
	// When the middleware judges it
	cond := f.waitForReason(t, "w", conditions.ReasonInvalidKey, 20*time.Second)
	// Then the InvalidKey condition does not echo the password
	if strings.Contains(cond.Message, "hunter2") {
		t.Errorf("InvalidKey condition echoes the password: %q", cond.Message)
	}
}

// TestAPasswordWithASlashIsRefusedEndToEnd: a key normalizer that forgot to
// strip credentials is caught by ValidateKey, as the docs promise ("keys
// carrying URL user info are refused"), even when the password holds '/'
// (pkg/claim pins ValidateKey alone): the key is never granted, written in
// clear to the Lease, or quoted in the Claimed condition.
func TestAPasswordWithASlashIsRefusedEndToEnd(t *testing.T) {
	f := start(t, setup{})
	// Given a tenant whose spec names a URL with user info whose password holds '/'
	f.createWidget(t, "w", "postgres://app:hunter2/x@db.data.svc:5432/app")
	// When the middleware judges it
	// Then it is InvalidKey, and the condition does not echo the password
	cond := f.waitForReason(t, "w", conditions.ReasonInvalidKey, 20*time.Second)
	if strings.Contains(cond.Message, "hunter2") {
		t.Errorf("condition echoes the password: %q", cond.Message)
	}
}
