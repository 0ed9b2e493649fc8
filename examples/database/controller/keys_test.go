package controller_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/examples/database/controller"
	"github.com/ocf-claim/claim/pkg/conditions"
)

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
