package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/envtest"
	"github.com/ocf-claim/claim/examples/database/api/v1alpha1"
	"github.com/ocf-claim/claim/examples/database/controller"
	"github.com/ocf-claim/claim/pkg/conditions"
)

// The key of a Database is its normalized URL; a URL that names no database
// is an invalid key, shown as such, and its components wait.

func TestNormalizeURL(t *testing.T) {
	tests := []struct {
		name, url, want, wantErr string
	}{
		{name: "default port filled in", url: "postgres://pg.data.svc/orders", want: "postgres://pg.data.svc:5432/orders"},
		{name: "postgresql scheme, upper-case host, options", url: "postgresql://PG.Data.svc:5432/orders?sslmode=require", want: "postgres://pg.data.svc:5432/orders"},
		{name: "credentials dropped", url: "postgres://app:s3cret@pg.data.svc:6432/orders/", want: "postgres://pg.data.svc:6432/orders"},
		{name: "database name keeps its case", url: "postgres://pg/Orders", want: "postgres://pg:5432/Orders"},
		{name: "IPv6 host", url: "postgres://[::1]/orders", want: "postgres://[::1]:5432/orders"},
		{name: "other scheme", url: "mysql://db/orders", wantErr: `scheme "mysql": want postgres:// or postgresql://`},
		{name: "no host", url: "postgres:///orders", wantErr: "names no host"},
		{name: "no database", url: "postgres://pg.data.svc", wantErr: `path "": want exactly one database name, as in postgres://host/dbname`},
		{name: "two path segments", url: "postgres://pg/a/b", wantErr: `path "/a/b": want exactly one database name, as in postgres://host/dbname`},
		{name: "unparsable, password not echoed", url: "postgres://app:s3cret@pg:port/orders", wantErr: "not a URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// When the URL is normalized
			got, err := controller.NormalizeURL(tt.url)
			// Then it is the key, or the error says what is wrong
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("key (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantErr, gotErr); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAggregate(t *testing.T) {
	schema := func(ok bool, r conditions.Reason, msg string) metav1.Condition {
		return controller.Condition(controller.SchemaReady, ok, r, msg, 3)
	}
	conn := func(ok bool, r conditions.Reason, msg string) metav1.Condition {
		return controller.Condition(controller.ConnectionReady, ok, r, msg, 3)
	}
	tests := []struct {
		name       string
		components []metav1.Condition
		want       metav1.Condition
	}{{
		name:       "every component True: Ready",
		components: []metav1.Condition{schema(true, controller.ReasonOperational, "ok"), conn(true, controller.ReasonOperational, "ok")},
		want:       controller.Condition(conditions.Ready, true, controller.ReasonOperational, "Every component is operational.", 3),
	}, {
		name:       "the higher priority wins: Error over PrerequisiteNotMet",
		components: []metav1.Condition{schema(false, controller.ReasonPrerequisiteNotMet, "waits"), conn(false, controller.ReasonError, "boom")},
		want:       controller.Condition(conditions.Ready, false, controller.ReasonError, "ConnectionReady: boom", 3),
	}, {
		name:       "a tie goes to the first component",
		components: []metav1.Condition{schema(false, controller.ReasonPrerequisiteNotMet, "first"), conn(false, controller.ReasonPrerequisiteNotMet, "second")},
		want:       controller.Condition(conditions.Ready, false, controller.ReasonPrerequisiteNotMet, "SchemaReady: first", 3),
	}, {
		name: "truth by unanimity: a False with a low-priority reason still makes Ready False",
		components: []metav1.Condition{
			schema(true, controller.ReasonOperational, "ok"),
			controller.Condition(controller.ConnectionReady, false, "Unknown", "not reconciled yet", 3),
		},
		want: controller.Condition(conditions.Ready, false, "Unknown", "ConnectionReady: not reconciled yet", 3),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Given the staged component conditions, when they are aggregated
			got := controller.Aggregate(3, tt.components)
			// Then Ready is ocf's: truth by unanimity, reason by priority
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Ready (-want +got):\n%s", diff)
			}
		})
	}
}

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
	claimed := condition(got, conditions.Claimed)
	if !strings.Contains(claimed.Message, "want exactly one database name") || strings.Contains(claimed.Message, "s3cret") {
		t.Errorf("claim message = %q, want the path error without the password", claimed.Message)
	}
	// And Ready carries InvalidKey, which outranks the components' waiting
	eventuallyDatabase(t, c, ns, db.Name, 20*time.Second, 50*time.Millisecond, func(cur *v1alpha1.Database) (bool, string) {
		ready := condition(cur, conditions.Ready)
		schema := condition(cur, controller.SchemaReady)
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
		claimed = condition(&got, conditions.Claimed)
		ready = condition(&got, conditions.Ready)
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
