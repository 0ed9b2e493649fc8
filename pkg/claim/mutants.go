package claim

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The bodies of the one-statement hooks of internal/mutant in this package:
// each puts a known bug back while its mutant is switched on (CHAOS_MUTANT),
// so that the randomized checkers prove they catch it. They are never
// called otherwise.

// trustCachedHeld is mutant.CachedHeldTrusted: when the cache says self
// holds key, its record replaces the uncached read.
func (c *Claimer) trustCachedHeld(ctx context.Context, key string, self Holder, rec *Record) {
	if r, err := c.cached.Get(ctx, key); err == nil && judge(r, self, c.cfg.sets()...) == verdictHeld {
		*rec = r
	}
}

// deletingAsGone is mutant.DeletingHolderJudgedGone: a holder being deleted
// reads as another incarnation, so liveness judges it gone.
func deletingAsGone(obj client.Object) {
	if obj.GetDeletionTimestamp() != nil {
		obj.SetUID("")
	}
}
