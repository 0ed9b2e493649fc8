package claimmw_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/pkg/claimmw"
	"github.com/ocf-claim/claim/pkg/claimmw/internal/testcrd"
	"github.com/ocf-claim/claim/pkg/conditions"
)

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
