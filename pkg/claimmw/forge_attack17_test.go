package claimmw_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ocf-claim/claim/pkg/backends/annotation"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// Issue 17 item 1 / docs/middleware.md "No leak: after activity stops, no
// record remains whose holder is gone or no longer names its key". On the
// annotation backend a tenant who may write the storage object forges a
// complete record (apiVersion and kind included, no token) naming its own
// live object, which does not name the key. The real claimant must not be
// parked behind it for good.
func TestAttack17_ForgedRecordNamingALiveNonClaimantDoesNotBlockForever(t *testing.T) {
	var ns string
	target := func(key string) (types.NamespacedName, error) {
		return types.NamespacedName{Namespace: ns, Name: "storage-" + key}, nil
	}
	backend := annotation.Backend(annotation.Options{Object: &corev1.ConfigMap{}, Target: target})
	f := start(t, setup{claimOpts: []claim.Option{claim.WithBackend(backend)}})
	ns = f.ns
	ctx := context.Background()
	c := direct(t)
	// Given a squatter widget that names another key only
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storage-x"}}); err != nil {
		t.Fatal(err)
	}
	sq := f.createWidget(t, "squatter", "x")
	f.waitForReason(t, "squatter", conditions.ReasonClaimed, 10*time.Second)
	// And the storage object of k carrying a forged record that names the squatter
	a := map[string]string{
		claim.DefaultKeyAnnotation:              "k",
		claim.DefaultHolderAPIVersionAnnotation: testcrd.GroupVersion.String(),
		claim.DefaultHolderKindAnnotation:       "Widget",
		claim.DefaultHolderNamespaceAnnotation:  ns,
		claim.DefaultHolderNameAnnotation:       sq.Name,
		claim.DefaultHolderUIDAnnotation:        string(sq.UID),
	}
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "storage-k", Annotations: a}}); err != nil {
		t.Fatal(err)
	}
	// When the real claimant names k
	f.createWidget(t, "victim", "k")
	// Then it gets k (the squatter does not name it) or at least is not parked as if the squatter held it
	eventually(t, 15*time.Second, func() (bool, string) {
		cond := f.claimed(t, "victim")
		rec, err := f.mw.Claimer().Current(ctx, "k")
		return cond.Reason == string(conditions.ReasonClaimed) || cond.Reason == string(conditions.ReasonForeign),
			fmt.Sprintf("victim %s: %s (record %+v, %v)", cond.Reason, cond.Message, rec.Holder, err)
	})
}
