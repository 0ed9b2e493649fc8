package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/examples/database/api/v1alpha1"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// TestAnInvalidURLOfAnyLengthStillGetsItsReadyWritten attacks issue 15,
// items 2 and 4: the middleware bounds the message of the condition it
// writes (conditions.MaxMessageLength, "so that no set of keys can make a
// status write fail"), but hands the inner pass State.Condition with the
// message unbounded; FoldReady prefixes it into Ready unbounded, and the
// example's one status write carries it. A spec.url whose InvalidKey
// message is long enough makes that write exceed the CRD's 32 KiB message
// limit: the flush fails on every pass and the components' conditions and
// Ready are never written.
func TestAnInvalidURLOfAnyLengthStillGetsItsReadyWritten(t *testing.T) {
	ns, c := startManager(t)
	ctx := context.Background()
	// Given a Database whose url names a "database" with 20000 slashes: the
	// example's key function rejects it, quoting the path
	url := "postgres://pg.data.svc/" + strings.Repeat("a/", 20000) + "x"
	db := &v1alpha1.Database{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "long"}, Spec: v1alpha1.DatabaseSpec{URL: url}}
	if err := c.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	// When the operator reconciles it
	// Then Claimed is InvalidKey, with a bounded message
	deadline := time.Now().Add(15 * time.Second)
	var got v1alpha1.Database
	for {
		if err := c.Get(ctx, client.ObjectKeyFromObject(db), &got); err != nil {
			t.Fatal(err)
		}
		claimed := meta.FindStatusCondition(got.Status.Conditions, string(conditions.Claimed))
		ready := meta.FindStatusCondition(got.Status.Conditions, string(conditions.Ready))
		if claimed != nil && ready != nil {
			if claimed.Reason != string(conditions.ReasonInvalidKey) || ready.Reason != string(conditions.ReasonInvalidKey) {
				t.Errorf("Claimed %s, Ready %s: want InvalidKey on both", claimed.Reason, ready.Reason)
			}
			if len(ready.Message) > conditions.MaxMessageLength+len("Claimed: ") {
				t.Errorf("Ready message is %d bytes", len(ready.Message))
			}
			return
		}
		if time.Now().After(deadline) {
			var types []string
			for _, cond := range got.Status.Conditions {
				types = append(types, cond.Type+"="+cond.Reason+"("+itoa(len(cond.Message))+" bytes)")
			}
			t.Fatalf("after 15s the Database has conditions %v: the inner pass never wrote its components and Ready "+
				"(its status write carries Ready's message, \"Claimed: \" + State.Condition.Message, unbounded)", types)
		}
		time.Sleep(100 * time.Millisecond)
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
