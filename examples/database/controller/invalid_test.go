package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/examples/database/api/v1alpha1"
	"github.com/ocf-claim/claim/examples/database/controller"
	"github.com/ocf-claim/claim/pkg/conditions"
)

func TestADatabaseWithAnInvalidURLIsInvalidKeyAndItsComponentsWait(t *testing.T) {
	ns, c := startManager(t)
	// Given a Database whose URL names no database, with a password in it
	db := &v1alpha1.Database{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "typo"},
		Spec:       v1alpha1.DatabaseSpec{URL: "postgres://app:s3cret@pg.data.svc/"},
	}
	if err := c.Create(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	// Then it is InvalidKey, saying what is wrong without the password
	got := waitForClaim(t, c, ns, "typo", conditions.ReasonInvalidKey)
	claimed := meta.FindStatusCondition(got.Status.Conditions, string(conditions.Claimed))
	if !strings.Contains(claimed.Message, "want exactly one database name") || strings.Contains(claimed.Message, "s3cret") {
		t.Errorf("claim message = %q, want the path error without the password", claimed.Message)
	}
	// And Ready carries InvalidKey, which outranks the components' waiting
	eventually(t, func() (bool, string) {
		cur := &v1alpha1.Database{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(db), cur); err != nil {
			return false, err.Error()
		}
		ready := meta.FindStatusCondition(cur.Status.Conditions, string(conditions.Ready))
		schema := meta.FindStatusCondition(cur.Status.Conditions, string(controller.SchemaReady))
		ok := ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == string(conditions.ReasonInvalidKey) &&
			schema != nil && schema.Reason == string(controller.ReasonPrerequisiteNotMet)
		return ok, fmt.Sprintf("Ready %+v, SchemaReady %+v; want Ready False/InvalidKey, SchemaReady PrerequisiteNotMet", ready, schema)
	})
}

// eventually polls cond until it holds, for at most 20 s.
func eventually(t *testing.T, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20s: %s", msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
