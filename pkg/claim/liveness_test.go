package claim_test

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/expiry"
)

// TestAnExpiryBehindByKindStillExpires: Given a Liveness that dispatches
// holders of kind Worker to an Expiry through ByKind, When a Worker holder
// is not renewed for the whole duration, Then a contender takes its key
// over: no wrapper hides what the Expiry needs to judge.
func TestAnExpiryBehindByKindStillExpires(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	exp, err := expiry.New(30*time.Second, clk)
	if err != nil {
		t.Fatal(err)
	}
	liveness := claim.ByKind(map[string]claim.Liveness{"Worker": exp}, nil)
	c := memClaimer(t, claim.WithLiveness(liveness), claim.WithClock(clk))
	worker := claim.Holder{Kind: "Worker", Namespace: "ns", Name: "w", UID: "uid-w"}
	contender := claim.Holder{Kind: "Worker", Namespace: "ns", Name: "v", UID: "uid-v"}
	const key = "queue/orders"
	wantAcquire(t, c, key, worker, claim.ReasonAcquired, "Acquire(worker)")
	wantAcquire(t, c, key, contender, claim.ReasonHeldElsewhere, "first Acquire(contender)")

	clk.Step(31 * time.Second)
	_, o, err := c.Acquire(ctx, key, contender)

	if err != nil || o.Reason != claim.ReasonTakenOver {
		t.Fatalf("Acquire(contender) after the duration = %s, %v; want TakenOver", o.Reason, err)
	}
}

// TestACachedHolderIsAliveWithoutARequestAndOnlyTheAPIServerJudgesOneGone:
// Given a key held by a ConfigMap and a contender, with WithCachedLiveness
// of ConfigMaps on a cached reader, Then a holder the cache shows with its
// recorded UID is alive without a read of the API server, and every other
// verdict is the API server's: a cache that lags a holder's deletion delays
// the takeover, a cache that lags a holder's creation or shows another
// object under its name never lets one happen early. And when the cache
// also shows the key's record held by a holder it shows alive, the
// contender waits without any request; every other cached record is read
// again from the API server.
func TestACachedHolderIsAliveWithoutARequestAndOnlyTheAPIServerJudgesOneGone(t *testing.T) {
	holder := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "holder", UID: "uid-holder"}}
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "holder", UID: "uid-other"}}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "holder", UID: "uid-holder"}}
	configMaps := []client.Object{&corev1.ConfigMap{}}
	for _, tc := range []struct {
		name   string
		holder client.Object // the holder's type, named in the record
		cached []client.Object
		server []client.Object
		kinds  []client.Object // WithCachedLiveness
		// cachedRecord: the cache shows the key's record as the holder
		// wrote it.
		cachedRecord bool
		// released: the holder's record is deleted from the API server
		// after the cache saw it.
		released bool
		want     claim.Reason
		// wantAPIReads counts reads of the holder and of the record
		// through the API server.
		wantAPIReads int
	}{
		{"given the cache shows the holder then it is alive without a request", holder, []client.Object{holder}, nil, configMaps, false, false, claim.ReasonHeldElsewhere, 1},
		{"given the cache shows another object under its name then the API server judges it gone", holder, []client.Object{other}, nil, configMaps, false, false, claim.ReasonTakenOver, 2},
		{"given the cache shows another object under its name and the API server the holder then it is alive", holder, []client.Object{other}, []client.Object{holder}, configMaps, false, false, claim.ReasonHeldElsewhere, 2},
		{"given the cache does not show the holder then the API server judges it alive", holder, nil, []client.Object{holder}, configMaps, false, false, claim.ReasonHeldElsewhere, 2},
		{"given neither shows the holder then it is gone", holder, nil, nil, configMaps, false, false, claim.ReasonTakenOver, 2},
		{"given a holder of a type not given then the cache is not asked", secret, []client.Object{secret}, nil, configMaps, false, false, claim.ReasonTakenOver, 2},
		{"given no type then the cache is not asked", holder, []client.Object{holder}, nil, nil, false, false, claim.ReasonTakenOver, 2},
		{"given the cache shows the record and its holder then the contender waits without a request", holder, []client.Object{holder}, nil, configMaps, true, false, claim.ReasonHeldElsewhere, 0},
		{"given the cache shows the record but not its holder then the API server decides", holder, nil, nil, configMaps, true, false, claim.ReasonTakenOver, 2},
		{"given the cache shows a record the API server no longer has then it still waits (until the deletion reaches the cache)", holder, []client.Object{holder}, []client.Object{holder}, configMaps, true, true, claim.ReasonHeldElsewhere, 0},
		{"given no type then a cached record is not trusted", holder, []client.Object{holder}, nil, nil, true, false, claim.ReasonTakenOver, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			reads := 0
			server := fake.NewClientBuilder().WithObjects(tc.server...).WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					reads++
					return c.Get(ctx, key, obj, opts...)
				},
			}).Build()
			cached := fake.NewClientBuilder().WithObjects(tc.cached...).Build()
			opts := []claim.Option{claim.WithCachedReader(cached)}
			if tc.kinds != nil {
				opts = append(opts, claim.WithCachedLiveness(tc.kinds...))
			}
			c, err := claim.New(server, server, claim.Config{Namespace: "ns"}, opts...)
			if err != nil {
				t.Fatal(err)
			}
			self, err := c.HolderOf(tc.holder)
			if err != nil {
				t.Fatal(err)
			}
			wantAcquire(t, c, "k", self, claim.ReasonAcquired, "Acquire(holder)")
			if tc.cachedRecord {
				rec := &coordinationv1.Lease{}
				if err := server.Get(ctx, client.ObjectKey{Namespace: "ns", Name: c.Config().NameFunc("k")}, rec); err != nil {
					t.Fatal(err)
				}
				rec.ResourceVersion = ""
				if err := cached.Create(ctx, rec); err != nil {
					t.Fatal(err)
				}
				if tc.released {
					if err := server.Delete(ctx, rec.DeepCopy()); err != nil {
						t.Fatal(err)
					}
				}
			}
			contender := claim.Holder{APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "contender", UID: "uid-contender"}
			reads = 0

			_, o, err := c.Acquire(ctx, "k", contender)

			if err != nil || o.Reason != tc.want {
				t.Fatalf("Acquire(contender) = %s, %v; want %s", o.Reason, err, tc.want)
			}
			if reads != tc.wantAPIReads {
				t.Errorf("the API server was read %d times; want %d", reads, tc.wantAPIReads)
			}
		})
	}
}
