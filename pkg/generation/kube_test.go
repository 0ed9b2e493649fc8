package generation_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/ocf-claim/claim/pkg/backends"
	"github.com/ocf-claim/claim/pkg/generation"
	"github.com/ocf-claim/claim/pkg/generation/generationtest"
	"github.com/ocf-claim/claim/pkg/generation/memory"
)

// kubeHarness gives each case a fresh namespace; every backend of a case is
// a process of its own, with its own client and connection.
func kubeHarness(t *testing.T) generationtest.Env {
	ns := env.Namespace(t)
	return generationtest.Env{New: func(t *testing.T, clk generation.Clock) generation.Backend {
		c := env.TestClient(t)
		b, err := generation.New(c, ns, generation.WithClock(clk))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}}
}

// process starts one process of a generation: its own client, its own
// backend object.
func process(namespace string) *generation.KubeBackend {
	c, err := env.NewClient()
	if err != nil {
		panic(err)
	}
	b, err := generation.New(c, namespace)
	if err != nil {
		panic(err)
	}
	return b
}

// onEveryBackend runs test as a subtest on each backend: a memory backend
// and a Kubernetes one in a namespace of its own.
func onEveryBackend(t *testing.T, test func(t *testing.T, b generation.Backend)) {
	backends := map[string]func(t *testing.T) generation.Backend{
		"memory":     func(*testing.T) generation.Backend { return memory.New() },
		"kubernetes": func(t *testing.T) generation.Backend { return process(env.Namespace(t)) },
	}
	for name, newBackend := range backends {
		t.Run(name, func(t *testing.T) { test(t, newBackend(t)) })
	}
}

func TestKubernetesBackendHonoursTheContract(t *testing.T) {
	generationtest.Run(t, kubeHarness)
}

// loseAnswers applies every write and then, while lose is set, answers with
// a timeout, as a connection dropped after the API server applied it would.
func loseAnswers(c client.WithWatch, lose *atomic.Bool) client.WithWatch {
	lost := func(err error) error {
		if err == nil && lose.Load() {
			return apierrors.NewTimeoutError("the answer was lost after the write was applied", 1)
		}
		return err
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return lost(c.Create(ctx, obj, opts...))
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			return lost(c.Update(ctx, obj, opts...))
		},
	})
}

// TestALostAnswerIsAmbiguousAndARestartedRetryReplaysIt: a write whose
// answer is lost is reported ErrAmbiguousOutcome, not as a refusal; the
// same OperationID sent by a restarted process returns the first outcome
// without a second write.
func TestALostAnswerIsAmbiguousAndARestartedRetryReplaysIt(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	raw := env.TestClient(t)
	var lose atomic.Bool
	first, err := generation.New(loseAnswers(raw, &lose), ns)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if err := first.RegisterGeneration(ctx, generation.Generation{ID: "a", Service: "s"}); err != nil {
		t.Fatal(err)
	}
	req := generation.AcquireRequest{ClaimName: "c", GenerationID: "a", TTL: time.Minute, OperationID: "acquire-1"}
	lose.Store(true)
	if _, err := first.AcquireClaim(ctx, req); !errors.Is(err, generation.ErrAmbiguousOutcome) {
		t.Fatalf("acquire with its answer lost: %v, want ErrAmbiguousOutcome", err)
	}
	lose.Store(false)
	restarted := process(ns)
	defer restarted.Close()
	stored, err := restarted.GetClaim(ctx, "c")
	if err != nil {
		t.Fatalf("the lost acquire was applied, but: %v", err)
	}
	again, err := restarted.AcquireClaim(ctx, req)
	if err != nil {
		t.Fatalf("replaying the acquire: %v", err)
	}
	if again.OwnerGeneration != "a" || again.FencingToken != stored.FencingToken {
		t.Fatalf("replay returned owner %q token %d; the lost acquire stored %q %d", again.OwnerGeneration, again.FencingToken, stored.OwnerGeneration, stored.FencingToken)
	}
	after, err := restarted.GetClaim(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != stored.Version {
		t.Fatalf("the replay wrote: version %d, was %d", after.Version, stored.Version)
	}
}

// TestTokensRiseAcrossDeletionOfTheLease: a claim Lease deleted out of band
// and created again by the next grant carries a token above every earlier
// one, because the first token is the creating write's resourceVersion.
func TestTokensRiseAcrossDeletionOfTheLease(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	b := process(ns)
	defer b.Close()
	for _, id := range []string{"a", "b"} {
		if err := b.RegisterGeneration(ctx, generation.Generation{ID: id, Service: "s"}); err != nil {
			t.Fatal(err)
		}
	}
	var last generation.FencingToken
	for i, id := range []string{"a", "b", "a"} {
		rec, err := b.AcquireClaim(ctx, generation.AcquireRequest{ClaimName: "c", GenerationID: id, TTL: time.Minute})
		if err != nil {
			t.Fatalf("grant %d: %v", i, err)
		}
		if rec.FencingToken <= last {
			t.Fatalf("grant %d after the Lease was deleted: token %d, earlier %d", i, rec.FencingToken, last)
		}
		last = rec.FencingToken
		// Someone renews it a few times, then deletes the Lease.
		for range 3 {
			if _, err := b.RenewClaim(ctx, generation.RenewRequest{ClaimName: "c", GenerationID: id, Token: last, TTL: time.Minute}); err != nil {
				t.Fatal(err)
			}
		}
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: backends.HashName(generation.ClaimPrefix, "c")}}
		if err := env.Client.Delete(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
}

// TestClaimsWithNamesOfTheAcceptedLengthStayWritable: names the requests
// accept (valid UTF-8, up to 253 bytes) and the remembered outcomes the
// record keeps (RememberedOutcomes) fit on the Lease: a claim whose owner
// renews with an OperationID each time stays renewable. The annotation that
// holds the record is bounded by the API server to 256 KiB in all; JSON
// writes '<' as six bytes. A longer name is refused before anything is
// written, not by the API server half-way through a claim's life.
func TestClaimsWithNamesOfTheAcceptedLengthStayWritable(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	b := process(ns)
	defer b.Close()
	const accepted = 253
	longName := func(prefix string) string { return prefix + strings.Repeat("<", accepted-len(prefix)) }
	claim, gen := longName("claim"), longName("gen")
	if err := b.RegisterGeneration(ctx, generation.Generation{ID: gen + "<", Service: "s"}); !errors.Is(err, generation.ErrInvalidRequest) {
		t.Fatalf("registering a generation ID one byte over the accepted length: %.200v, want ErrInvalidRequest", err)
	}
	if err := b.RegisterGeneration(ctx, generation.Generation{ID: gen, Service: "s"}); err != nil {
		t.Fatal(err)
	}
	held, err := b.AcquireClaim(ctx, generation.AcquireRequest{ClaimName: claim, GenerationID: gen, TTL: time.Minute, OperationID: generation.OperationID(longName("acquire"))})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 * generation.RememberedOutcomes {
		op := generation.OperationID(longName(fmt.Sprintf("renew-%d", i)))
		if _, err := b.RenewClaim(ctx, generation.RenewRequest{ClaimName: claim, GenerationID: gen, Token: held.FencingToken, TTL: time.Minute, OperationID: op}); err != nil {
			msg := err.Error()
			t.Fatalf("renewal %d of a claim with names of the accepted length: ...%s", i, msg[max(0, len(msg)-300):])
		}
	}
}

// TestClaimsOfTheLongestAcceptedNamesStayWritable: names, generation IDs
// and OperationIDs at the accepted limit, of characters JSON escapes
// six-fold, fill every remembered outcome, and the Lease stays under the
// API server's 256 KiB bound on annotations: every write succeeds.
func TestClaimsOfTheLongestAcceptedNamesStayWritable(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	b := process(ns)
	defer b.Close()
	long := func(c string, suffix string) string { return strings.Repeat(c, 253-len(suffix)) + suffix }
	claim := long("<", "")
	a, z := long("\x01", "a"), long("\x01", "z")
	for _, id := range []string{a, z} {
		g := generation.Generation{ID: id, Service: long("\x02", ""), Instance: long("&", "")}
		if err := b.RegisterGeneration(ctx, g); err != nil {
			t.Fatalf("registering: %v", err)
		}
		if err := b.UpdateGeneration(ctx, generation.Generation{ID: id, State: generation.GenerationActive, Reason: strings.Repeat(">", 1024)}); err != nil {
			t.Fatalf("updating: %v", err)
		}
	}
	op := func(i int) generation.OperationID { return generation.OperationID(long("<", fmt.Sprintf("%03d", i))) }
	rec, err := b.AcquireClaim(ctx, generation.AcquireRequest{ClaimName: claim, GenerationID: a, TTL: time.Minute, OperationID: op(0)})
	if err != nil {
		t.Fatalf("acquiring: %v", err)
	}
	from, to := a, z
	for i := 1; i <= 2*generation.RememberedOutcomes; i++ {
		if _, err := b.PrepareTransfer(ctx, generation.TransferRequest{ClaimName: claim, FromGeneration: from, ToGeneration: to, Token: rec.FencingToken, TTL: time.Minute, OperationID: op(2 * i)}); err != nil {
			t.Fatalf("preparing %d: %v", i, err)
		}
		if rec, err = b.CommitTransfer(ctx, generation.CommitRequest{ClaimName: claim, FromGeneration: from, ToGeneration: to, ExpectedToken: rec.FencingToken, TTL: time.Minute, OperationID: op(2*i + 1)}); err != nil {
			t.Fatalf("committing %d: %v", i, err)
		}
		from, to = to, from
	}
	var l coordinationv1.Lease
	if err := env.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: backends.HashName(generation.ClaimPrefix, claim)}, &l); err != nil {
		t.Fatal(err)
	}
	size := 0
	for k, v := range l.Annotations {
		size += len(k) + len(v)
	}
	if size > 160<<10 {
		t.Errorf("the annotations hold %d bytes, too close to the API server's 256 KiB", size)
	}
	t.Logf("annotations of a full record of worst-case names: %d bytes", size)
	_, err = b.AcquireClaim(ctx, generation.AcquireRequest{ClaimName: long("<", "!"), GenerationID: a, TTL: time.Minute, OperationID: generation.OperationID(long("<", "!!"))})
	if err != nil {
		t.Fatalf("acquiring another claim: %v", err)
	}
	_, err = b.AcquireClaim(ctx, generation.AcquireRequest{ClaimName: claim + "<", GenerationID: a, TTL: time.Minute})
	if !errors.Is(err, generation.ErrInvalidRequest) {
		t.Fatalf("a claim name one byte over the limit: %v, want ErrInvalidRequest", err)
	}
}
