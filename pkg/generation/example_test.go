package generation_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ocf-claim/claim/pkg/generation"
)

func exampleNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "example-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		panic(err)
	}
	return ns.Name
}

// Two generations of a payments service hand the claim "ledger-writer"
// over during a rollout: the old ReplicaSet's process (blue) prepares the
// transfer, drains while renewing, and commits; the new one (green) learns
// of its grant from a watch and works with the new fencing token, which
// the ledger uses to refuse blue's late writes.
func Example_handover() {
	ctx := context.Background()
	ns := exampleNamespace(ctx)
	blue, green := process(ns), process(ns)
	defer blue.Close()
	defer green.Close()
	const claim, ttl = "ledger-writer", 15 * time.Second

	// Blue is the running generation: it registers, acquires, and serves.
	check(blue.RegisterGeneration(ctx, generation.Generation{ID: "payments-7d9f", Service: "payments", Instance: "rs-7d9f"}))
	check(blue.UpdateGeneration(ctx, generation.Generation{ID: "payments-7d9f", State: generation.GenerationActive}))
	held, err := blue.AcquireClaim(ctx, generation.AcquireRequest{ClaimName: claim, GenerationID: "payments-7d9f", TTL: ttl, OperationID: "blue-acquire"})
	check(err)

	// Green starts beside it, registers, and watches the claim.
	check(green.RegisterGeneration(ctx, generation.Generation{ID: "payments-5c2b", Service: "payments", Instance: "rs-5c2b"}))
	events, err := green.WatchClaim(ctx, claim)
	check(err)
	_, err = green.AcquireClaim(ctx, generation.AcquireRequest{ClaimName: claim, GenerationID: "payments-5c2b", TTL: ttl, AllowEmptyOnly: true})
	fmt.Println("green acquires while blue holds:", errors.Is(err, generation.ErrClaimHeld))

	// Blue reserves the claim for green (the token does not move), drains
	// while it keeps renewing, and commits.
	_, err = blue.PrepareTransfer(ctx, generation.TransferRequest{ClaimName: claim, FromGeneration: "payments-7d9f", ToGeneration: "payments-5c2b", Token: held.FencingToken, TTL: ttl, OperationID: "blue-prepare"})
	check(err)
	check(blue.UpdateGeneration(ctx, generation.Generation{ID: "payments-7d9f", State: generation.GenerationDraining, Reason: "rollout to rs-5c2b"}))
	_, err = blue.RenewClaim(ctx, generation.RenewRequest{ClaimName: claim, GenerationID: "payments-7d9f", Token: held.FencingToken, TTL: ttl})
	check(err)
	// ... blue finishes its in-flight ledger writes here ...
	handed, err := blue.CommitTransfer(ctx, generation.CommitRequest{ClaimName: claim, FromGeneration: "payments-7d9f", ToGeneration: "payments-5c2b", ExpectedToken: held.FencingToken, TTL: ttl, OperationID: "blue-commit"})
	check(err)
	check(blue.UpdateGeneration(ctx, generation.Generation{ID: "payments-7d9f", State: generation.GenerationRetired}))

	// Green sees every step, in order, and starts once it owns the claim.
	for ev := range events {
		fmt.Printf("green sees %s: owner %s, phase %s\n", ev.Reason, ev.Claim.OwnerGeneration, ev.Claim.Phase)
		if ev.Reason == generation.ReasonTransferCommitted {
			break
		}
	}
	check(green.UpdateGeneration(ctx, generation.Generation{ID: "payments-5c2b", State: generation.GenerationActive}))
	fmt.Println("the token rose:", handed.FencingToken > held.FencingToken)

	// A late renewal by blue, with its old token, is refused.
	_, err = blue.RenewClaim(ctx, generation.RenewRequest{ClaimName: claim, GenerationID: "payments-7d9f", Token: held.FencingToken, TTL: ttl})
	fmt.Println("blue renews after the commit:", errors.Is(err, generation.ErrNotOwner), errors.Is(err, generation.ErrStaleToken))

	// Blue's commit, retried after a lost answer, returns the first
	// outcome and changes nothing.
	again, err := blue.CommitTransfer(ctx, generation.CommitRequest{ClaimName: claim, FromGeneration: "payments-7d9f", ToGeneration: "payments-5c2b", ExpectedToken: held.FencingToken, TTL: ttl, OperationID: "blue-commit"})
	check(err)
	fmt.Println("the retried commit returns the same grant:", again.OwnerGeneration == handed.OwnerGeneration && again.FencingToken == handed.FencingToken)

	// Output:
	// green acquires while blue holds: true
	// green sees Acquired: owner payments-7d9f, phase owned
	// green sees TransferPrepared: owner payments-7d9f, phase reserved
	// green sees Renewed: owner payments-7d9f, phase draining
	// green sees TransferCommitted: owner payments-5c2b, phase owned
	// the token rose: true
	// blue renews after the commit: true true
	// the retried commit returns the same grant: true
}

// check stops the example on an error; a program would handle it.
func check(err error) {
	if err != nil {
		panic(err)
	}
}
