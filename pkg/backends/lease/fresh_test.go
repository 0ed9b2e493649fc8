package lease_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/claim"
)

// keysOf returns the keys of recs.
func keysOf(recs []claim.Record) []string {
	out := []string{}
	for _, r := range recs {
		out = append(out, r.Key)
	}
	return out
}

func TestHoldingsNotOlderThanAResourceVersionListEveryRecordWrittenBeforeIt(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	c := newClaimer(t, ns, nil, nil)
	h := holder(t, ns, "h")
	// stamp writes an object of another resource and returns its
	// resourceVersion: a revision after every write before it.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stamp"}}
	if err := env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	stamp := func() string {
		t.Helper()
		if err := env.Client.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		return cm.ResourceVersion
	}
	for _, tc := range []struct {
		name string
		do   func()
		want []string
	}{
		{"after two acquires", func() {
			wantReason(t, acquire(t, c, "k1", h), claim.ReasonAcquired)
			wantReason(t, acquire(t, c, "k2", h), claim.ReasonAcquired)
		}, []string{"k1", "k2"}},
		{"after a release", func() {
			if _, err := c.ReleaseRecords(ctx, h, claim.Record{Key: "k1"}); err != nil {
				t.Fatal(err)
			}
		}, []string{"k2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.do()
			got, err := c.HoldingsNotOlderThan(ctx, h, stamp())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, keysOf(got)); diff != "" {
				t.Errorf("holdings (-want +got):\n%s", diff)
			}
		})
	}
}
