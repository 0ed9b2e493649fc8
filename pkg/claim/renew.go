package claim

import (
	"context"
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/ocf-claim/claim/internal/claimhook"
)

func init() {
	claimhook.Renew = func(ctx context.Context, c any, key string, self Holder) (any, error) {
		return c.(*Claimer).renew(ctx, key, self)
	}
	claimhook.RenewNormalized = func(ctx context.Context, c any, key string, self Holder) (any, error) {
		return c.(*Claimer).renewNormalized(ctx, key, self)
	}
	claimhook.Clock = func(c any) clock.PassiveClock { return c.(*Claimer).clock }
}

// renew is expiry.Renew, reached through internal/claimhook: one write of a
// new renew marker that keeps the grant and its token.
func (c *Claimer) renew(ctx context.Context, key string, self Holder) (Outcome, error) {
	key, err := c.NormalizeKey(key)
	if err != nil {
		return Outcome{}, fmt.Errorf("renewing claim: %w", err)
	}
	return c.renewNormalized(ctx, key, self)
}

// renewNormalized is renew of a key already normalized.
func (c *Claimer) renewNormalized(ctx context.Context, key string, self Holder) (Outcome, error) {
	rec, err := c.readHeldNormalized(ctx, "renewing", key, self)
	if err != nil {
		return Outcome{}, err
	}
	sent := c.clock.Now()
	next := claimFields(rec)
	next.RenewTime = nextRenewTime(rec.RenewTime, sent)
	got, err := c.write(ctx, rec, next)
	if err != nil {
		return Outcome{}, fmt.Errorf("renewing claim %q: %w", key, err)
	}
	return c.outcome(Outcome{Reason: ReasonHeld, Key: key, Holder: self, Token: got.Token, Sent: sent, Record: got}), nil
}

// nextRenewTime is the RenewTime a renewal at now writes: now as stored (to
// the microsecond), but always after the previous one, so that every renewal
// changes the record even when the holder's clock has not moved (a coarse or
// frozen clock) and contenders see it. The API server does not even store an
// update that changes nothing.
func nextRenewTime(previous, now time.Time) time.Time {
	next := now.Round(0).UTC().Truncate(time.Microsecond)
	if !next.After(previous) {
		next = previous.Round(0).UTC().Truncate(time.Microsecond).Add(time.Microsecond)
	}
	return next
}
