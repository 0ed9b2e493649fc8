package claimmw

import (
	"context"
	"slices"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/ocf-claim/claim/internal/claimhook"
)

// The bodies of the one-statement hooks of internal/mutant in this package:
// each puts a known bug back while its mutant is switched on (CHAOS_MUTANT),
// so that the randomized checkers prove they catch it. They are never
// called otherwise.

// withoutHolder is mutant.NotWokenByRecordEvents: the record's holder is
// dropped from the objects its event wakes.
func withoutHolder(reqs []reconcile.Request, holder string) []reconcile.Request {
	return slices.DeleteFunc(reqs, func(r reconcile.Request) bool { return r.Name == holder })
}

// seenBy is, per Middleware (one operator process), the objects it has
// reconciled: the memory mutant.MustTellInMemory keeps.
var seenBy sync.Map // *Middleware -> *sync.Map of reconcile.Request

// rememberedPrevious is mutant.MustTellInMemory: an object this process has
// not reconciled yet is taken never to have held anything, whatever its
// condition says.
func (m *Middleware) rememberedPrevious(req reconcile.Request, was previous) previous {
	seen, _ := seenBy.LoadOrStore(m, &sync.Map{})
	if _, known := seen.(*sync.Map).LoadOrStore(req, true); !known {
		return previous{}
	}
	return was
}

// rewrite is mutant.SteadyPassWrites: every record the pass was granted is
// renewed, a write whose event wakes the holder for another pass.
func (m *Middleware) rewrite(ctx context.Context, p *pass) {
	for _, h := range p.granted {
		_, _ = claimhook.RenewNormalized(ctx, m.claimer, h.o.Key, p.self)
	}
}

// namesRaw is mutant.RawKeyCompared: an object names key when a key its
// keys function gave, as given (not normalized), equals it.
func namesRaw(key string) func(namedKey) bool {
	return func(k namedKey) bool { return k.raw == key }
}

// forgetByName is mutant.UnseenHolderForgotten: a pass that finds its
// object missing from the cache forgets at once every holder remembered
// under its name, as forget does, without the uncached read that finds it
// gone: another shard's holder, which this process's cache never shows,
// is forgotten while it acts.
func (m *Middleware) forgetByName(_ context.Context, req reconcile.Request) {
	m.forget(req)
}
