// Package claimhook lets pkg/expiry reach two parts of a claim.Claimer that
// are not in pkg/claim's API: its renew write and its clock. Go has no friend
// packages, and time-based claims are a layer of their own (issue 14), so
// package claim sets these functions when it is initialized and pkg/expiry
// calls them with a *claim.Claimer; no other package may.
package claimhook

import (
	"context"

	"k8s.io/utils/clock"

	"github.com/ocf-claim/claim/pkg/backends"
)

var (
	// Renew is (*claim.Claimer).renew: it returns a claim.Outcome.
	Renew func(ctx context.Context, claimer any, key string, self backends.Holder) (outcome any, err error)
	// Clock returns the claim.Claimer's clock.
	Clock func(claimer any) clock.PassiveClock
)
