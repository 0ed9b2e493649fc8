package claimmw_test

import (
	"context"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// TestMissingLeaseRBACIsAClearConditionNotACrash runs the operator as a user
// that may manage its Widgets and watch Leases (for the wake-up) but may not
// read or write them, as happens when an operator's RBAC is not updated along
// with its code. (Without list and watch on Leases the controller's Lease
// source never syncs and controller-runtime refuses to start the controller:
// a start-up error, not a reconcile loop.)
func TestMissingLeaseRBACIsAClearConditionNotACrash(t *testing.T) {
	ctx := context.Background()
	// Given an operator identity that may list and watch Leases but not get,
	// create, update or delete them
	user := "operator-without-leases"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{testcrd.GroupVersion.Group}, Resources: []string{"widgets", "widgets/status", "gadgets", "gadgets/status"}, Verbs: []string{"get", "list", "watch", "update", "patch"}},
			{APIGroups: []string{""}, Resources: []string{"pods", "events"}, Verbs: []string{"get", "list", "watch", "create", "patch"}},
			{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"list", "watch"}},
		},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := env.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Delete(ctx, binding)
		_ = env.Client.Delete(ctx, role)
	})
	cfg, err := env.AddUser(user)
	if err != nil {
		t.Fatal(err)
	}
	f := start(t, setup{config: cfg, workers: 1})

	// When a Widget names a key
	f.createWidget(t, "w", "storage-a")

	// Then its condition says the claim could not be judged, naming the
	// refusal, and no Lease was written
	cond := f.waitForReason(t, "w", conditions.ReasonClaimError, 20*time.Second)
	if !strings.Contains(strings.ToLower(cond.Message), "forbidden") || cond.Status != metav1.ConditionFalse {
		t.Fatalf("condition %s=%s %q, want False (never Unknown) naming the forbidden read", cond.Reason, cond.Status, cond.Message)
	}
	// And it does not show the tenant the operator's identity or claim
	// namespace (the operator's log has the whole error)
	if strings.Contains(cond.Message, "operator-without-leases") || strings.Contains(cond.Message, f.ns) {
		t.Errorf("condition message %q reveals the operator's identity or claim namespace", cond.Message)
	}
	if f.leaseExists(t, "storage-a") {
		t.Fatal("a Lease was written without RBAC for Leases")
	}
	// And the inner reconciler never ran for an object that holds nothing
	if calls := f.inner.callsOf("w"); len(calls) != 0 {
		t.Fatalf("inner reconciler ran %d times without a claim", len(calls))
	}
}
