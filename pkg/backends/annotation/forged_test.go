package annotation_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/claim"
)

// TestForgedRecordsOnTheClaimedObjectAreForeign: Given a tenant who can
// write the claimed object and annotates it with a record no Claimer could
// have written, When a holder claims the key on a real API server, Then the
// record is Foreign, with the reason named: it is reported, never believed
// (a forged token would outrank every real grant) and never silently held.
func TestForgedRecordsOnTheClaimedObjectAreForeign(t *testing.T) {
	ctx, ns := context.Background(), env.Namespace(t)
	complete := func(key string) map[string]string {
		return map[string]string{
			backends.DefaultKeyAnnotation:              key,
			backends.DefaultHolderAPIVersionAnnotation: "v1",
			backends.DefaultHolderKindAnnotation:       "ConfigMap",
			backends.DefaultHolderNamespaceAnnotation:  ns,
			backends.DefaultHolderNameAnnotation:       "tenant",
			backends.DefaultHolderUIDAnnotation:        "u-tenant",
		}
	}
	tests := []struct {
		name        string
		key         string
		annotations func(key string) map[string]string
		wantForeign string
	}{{
		name: "given a token annotation far beyond the object's resourceVersion then the record is foreign",
		key:  "forged-token",
		annotations: func(key string) map[string]string {
			a := complete(key)
			a[backends.DefaultTokenAnnotation] = "999999999999"
			return a
		},
		wantForeign: "token annotation 999999999999 is not older than the object's own resourceVersion",
	}, {
		name: "given a complete record without a kind then the record is foreign",
		key:  "no-kind",
		annotations: func(key string) map[string]string {
			a := complete(key)
			delete(a, backends.DefaultHolderAPIVersionAnnotation)
			delete(a, backends.DefaultHolderKindAnnotation)
			return a
		},
		wantForeign: "has no apiVersion or kind, so its liveness cannot be judged",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm := createTarget(t, env.Client, ns, tt.key, tt.annotations(tt.key))
			c := newClaimer(t, ns, configMapTargets(ns))
			self := claim.Holder{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: "self", UID: "u-self"}

			_, o, err := c.Acquire(ctx, tt.key, self)

			if err != nil || o.Reason != claim.ReasonForeign || !strings.Contains(o.Detail, tt.wantForeign) {
				t.Fatalf("Acquire() = %s (detail %q), %v; want Foreign because %q", o.Reason, o.Detail, err, tt.wantForeign)
			}
			var after corev1.ConfigMap
			if err := env.APIReader.Get(ctx, client.ObjectKeyFromObject(cm), &after); err != nil {
				t.Fatal(err)
			}
			if after.ResourceVersion != cm.ResourceVersion {
				t.Fatalf("the foreign record was written: resourceVersion %s, was %s", after.ResourceVersion, cm.ResourceVersion)
			}
		})
	}
}

// TestAHolderWithoutAKindIsRefusedOnTheAnnotationBackend: Given a holder
// without apiVersion and kind, When it acquires a free key on the annotation
// backend, Then it is refused with ErrInvalidHolder instead of writing a
// record its next pass would read as Foreign.
func TestAHolderWithoutAKindIsRefusedOnTheAnnotationBackend(t *testing.T) {
	ctx, ns := context.Background(), env.Namespace(t)
	createTarget(t, env.Client, ns, "k", nil)
	c := newClaimer(t, ns, configMapTargets(ns))

	_, o, err := c.Acquire(ctx, "k", claim.Holder{Namespace: ns, Name: "kindless", UID: "u-kindless"})

	if !errors.Is(err, claim.ErrInvalidHolder) || o.Granted() {
		t.Fatalf("Acquire() = %s, %v; want ErrInvalidHolder and no grant", o.Reason, err)
	}
}
