// Package claimhook lets pkg/expiry and pkg/claimmw reach parts of a
// claim.Claimer and an expiry.Keeper that are not in their APIs: the renew
// write (of a key as the caller has it, or already normalized), the clock,
// and a hold of a key already normalized. Go has no friend packages, and
// time-based claims are a layer of their own, so package claim and package
// expiry set these functions when they are initialized; only pkg/expiry and
// pkg/claimmw call them.
package claimhook

import (
	"context"

	"k8s.io/utils/clock"

	"github.com/ocf-claim/claim/pkg/backends"
)

var (
	// Renew is (*claim.Claimer).renew: it returns a claim.Outcome.
	Renew func(ctx context.Context, claimer any, key string, self backends.Holder) (outcome any, err error)
	// RenewNormalized is Renew of a key already normalized: the key of a
	// record as Holdings returned it, whose raw form the caller no longer
	// knows (a key it does not name any more).
	RenewNormalized func(ctx context.Context, claimer any, key string, self backends.Holder) (outcome any, err error)
	// Clock returns the claim.Claimer's clock.
	Clock func(claimer any) clock.PassiveClock
	// HoldNormalized is (*expiry.Keeper).Hold of a key already normalized:
	// it renews with RenewNormalized. granted is a claim.Outcome.
	HoldNormalized func(keeper any, ctx context.Context, key string, granted any) (held context.Context, stop func())
)
