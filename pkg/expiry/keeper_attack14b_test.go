package expiry_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
	"github.com/ocf-claim/claim/pkg/expiry"
)

// TestAttack14bKeeperCauseNeverEchoesTheRawKeysPassword: promise: errors
// never echo URL user info. Keeper.Hold takes the key as the caller has it,
// before Config.Normalize strips the credentials (claimmw's renewals pass
// exactly that raw key, and log the cause when a hold ends), and quotes it
// whole in the held context's cause: the database password ends up in the
// error and in the middleware's log line.
func TestAttack14bKeeperCauseNeverEchoesTheRawKeysPassword(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	stripUserinfo := func(key string) (string, error) {
		u, err := url.Parse(key)
		if err != nil {
			return "", err
		}
		u.User = nil
		return u.String(), nil
	}
	c, err := memory.NewClaimer(memory.New(), claim.Config{Namespace: "ns", Normalize: stripUserinfo}, claim.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	k, err := expiry.NewKeeper(c, expiry.KeeperConfig{Duration: 30 * time.Second, RenewEvery: 5 * time.Second, RenewDeadline: 20 * time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	const raw = "postgres://admin:hunter2@db.data.svc:5432/app"
	self := claim.Holder{Kind: "Worker", Namespace: "ns", Name: "w", UID: "uid-w"}
	_, granted, err := c.Acquire(ctx, raw, self)
	if err != nil || !granted.Granted() {
		t.Fatalf("Acquire() = %s, %v; want granted", granted.Reason, err)
	}
	if strings.Contains(granted.Key, "hunter2") {
		t.Fatalf("normalizer kept the password: %q", granted.Key)
	}

	t.Run("deadline passed before Hold", func(t *testing.T) {
		clk.Step(25 * time.Second) // the grant is older than RenewDeadline
		held, stop := k.Hold(ctx, raw, granted)
		defer stop()
		cause := context.Cause(held)
		if !errors.Is(cause, expiry.ErrRenewDeadline) {
			t.Fatalf("cause = %v, want ErrRenewDeadline", cause)
		}
		if strings.Contains(cause.Error(), "hunter2") {
			t.Errorf("hold's cause echoes the password: %v", cause)
		}
	})
	t.Run("outcome not granted", func(t *testing.T) {
		held, stop := k.Hold(ctx, raw, claim.Outcome{Reason: claim.ReasonHeldElsewhere})
		defer stop()
		if cause := context.Cause(held); cause == nil || strings.Contains(cause.Error(), "hunter2") {
			t.Errorf("hold's cause echoes the password: %v", cause)
		}
	})
}
