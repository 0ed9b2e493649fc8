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

	"github.com/ocf-claim/claim/envtest"
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
	envtest.Eventually(t, 20*time.Second, func() (bool, string) {
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

// TestAnInvalidURLOfAnyLengthStillGetsItsReadyWritten: the middleware bounds
// the message of the condition it writes (conditions.MaxMessageLength, "so
// that no set of keys can make a status write fail"), and the State.Condition
// it hands the inner pass too, so that FoldReady's Ready and the example's
// one status write stay under the CRD's 32 KiB message limit however long the
// InvalidKey message of a spec.url would be: the components' conditions and
// Ready are written.
func TestAnInvalidURLOfAnyLengthStillGetsItsReadyWritten(t *testing.T) {
	ns, c := startManager(t)
	ctx := context.Background()
	// Given a Database whose url names a "database" with 20000 slashes: the
	// example's key function rejects it, quoting the path
	url := "postgres://pg.data.svc/" + strings.Repeat("a/", 20000) + "x"
	db := createDatabase(t, c, ns, "long", url, 0)
	// When the operator reconciles it
	// Then Claimed is InvalidKey, with a bounded message
	var claimed, ready *metav1.Condition
	envtest.EventuallyEvery(t, 15*time.Second, 100*time.Millisecond, func() (bool, string) {
		var got v1alpha1.Database
		if err := c.Get(ctx, client.ObjectKeyFromObject(db), &got); err != nil {
			t.Fatal(err)
		}
		claimed = meta.FindStatusCondition(got.Status.Conditions, string(conditions.Claimed))
		ready = meta.FindStatusCondition(got.Status.Conditions, string(conditions.Ready))
		if claimed != nil && ready != nil {
			return true, ""
		}
		var types []string
		for _, cond := range got.Status.Conditions {
			types = append(types, cond.Type+"="+cond.Reason+"("+itoa(len(cond.Message))+" bytes)")
		}
		return false, fmt.Sprintf("the Database has conditions %v: the inner pass never wrote its components and Ready "+
			"(its status write carries Ready's message, \"Claimed: \" + State.Condition.Message, unbounded)", types)
	})
	if claimed.Reason != string(conditions.ReasonInvalidKey) || ready.Reason != string(conditions.ReasonInvalidKey) {
		t.Errorf("Claimed %s, Ready %s: want InvalidKey on both", claimed.Reason, ready.Reason)
	}
	if len(ready.Message) > conditions.MaxMessageLength+len("Claimed: ") {
		t.Errorf("Ready message is %d bytes", len(ready.Message))
	}
}

func itoa(n int) string {
	var b []byte
	if n == 0 {
		return "0"
	}
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
