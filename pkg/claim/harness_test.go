package claim_test

import (
	"context"
	"testing"

	"github.com/ocf-claim/claim/pkg/backends/memory"
	"github.com/ocf-claim/claim/pkg/claim"
)

// memClaimer returns a claimer in namespace ns over a new memory store.
func memClaimer(t *testing.T, opts ...claim.Option) *claim.Claimer {
	t.Helper()
	c, err := memory.NewClaimer(memory.New(), claim.Config{Namespace: "ns"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// wantAcquire acquires key for self through c and fails t at once unless
// the outcome has reason; what names the call in the message.
func wantAcquire(t *testing.T, c *claim.Claimer, key string, self claim.Holder, reason claim.Reason, what string) {
	t.Helper()
	if _, o, err := c.Acquire(context.Background(), key, self); err != nil || o.Reason != reason {
		t.Fatalf("%s = %s, %v; want %s", what, o.Reason, err, reason)
	}
}
