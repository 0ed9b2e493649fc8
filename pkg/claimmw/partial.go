package claimmw

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ocf-claim/claim/internal/mutant"
	"github.com/ocf-claim/claim/pkg/claim"
)

// WithPartialCache says that the manager's cache of the object type holds
// only some of its objects: a label selector in cache.Options.ByObject, as a
// label-sharded operator sets, or a field selector. An object this
// process's cache does not show (one another shard reconciles) may then
// still act for a key whose record was deleted or erased from outside.
//
// With it, before an object starts acting for a key (after its record is
// held and its condition says it may act), the middleware also lists the
// object type uncached, in namespaces, and waits while any listed object
// may still act for the key. Give the namespaces the manager's cache
// watches (cache.Options.DefaultNamespaces) when it watches only some:
// none means every namespace, and an object there that names the key
// counts, even one another installation of the operator reconciles. This
// costs one consistent List per key an object starts acting for, paged by
// [PartialCachePage] objects; the operator needs RBAC to list the type
// there.
//
// Without it, such an object is found only while this process remembers it
// from the key's record, which a restart of the process forgets: a waiter
// of a restarted shard may then act for a key while a holder of another
// shard still does (docs/middleware.md, Sharded operators).
func WithPartialCache(namespaces ...string) Option {
	return func(c *config) {
		for _, ns := range namespaces {
			if ns == "" {
				c.problems = append(c.problems, errors.New("WithPartialCache: an empty namespace; give none to list every namespace"))
			}
		}
		c.partial = &partialCache{namespaces: namespaces}
	}
}

// PartialCachePage is how many objects one page of [WithPartialCache]'s
// uncached List holds.
const PartialCachePage = 500

// unseenPredecessorPoll is how soon an object waiting for a predecessor
// that its process's cache does not show asks again: no event of that
// object reaches this process, so only asking again finds that it stopped.
const unseenPredecessorPoll = time.Second

// partialCache is the configuration of [WithPartialCache].
type partialCache struct {
	namespaces []string
}

// listedActingFor is [Middleware.actingFor] among every object of m's kind
// in the namespaces of [WithPartialCache], listed uncached: the first that
// may act for key, other than self and recorded.
func (m *Middleware) listedActingFor(ctx context.Context, key string, self, recorded claim.Holder) (claim.Holder, string, bool, error) {
	namespaces := m.cfg.partial.namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	for _, ns := range namespaces {
		var found client.Object
		cont := ""
		for {
			list, err := m.newList()
			if err != nil {
				return claim.Holder{}, "", false, err
			}
			if err := m.cfg.apiReader.List(ctx, list, client.InNamespace(ns), client.Limit(PartialCachePage), client.Continue(cont)); err != nil {
				return claim.Holder{}, "", false, fmt.Errorf("listing the objects that may act for claim key %q uncached: %w", claim.Redact(key), err)
			}
			_ = meta.EachListItem(list, func(o runtime.Object) error {
				obj, ok := o.(client.Object)
				if !ok || obj.GetUID() == self.UID || (recorded.UID != "" && obj.GetUID() == recorded.UID) {
					return nil
				}
				if m.mayActFor(ctx, obj, key) {
					found = obj
					return errStopListing
				}
				return nil
			})
			if found != nil {
				// Remembered, so that the checks of later passes (which do
				// not list) read it again too rather than let the waiter
				// say it may act in each of them before this check parks it.
				m.lastHolders.add(key, client.ObjectKeyFromObject(found), found.GetUID())
				h, err := m.claimer.HolderOf(found)
				if err != nil {
					return claim.Holder{}, "", false, err
				}
				return h, predecessorDetail, true, nil
			}
			if cont = list.GetContinue(); cont == "" {
				break
			}
		}
	}
	return claim.Holder{}, "", false, nil
}

// errStopListing ends a walk over a list once it found what it looked for.
var errStopListing = errors.New("found")

// listsUncached reports whether the predecessor check asked in ctx lists
// m's kind uncached ([WithPartialCache]): only the check that decides does.
func (m *Middleware) listsUncached(ctx context.Context) bool {
	if m.cfg.partial == nil || !confirming(ctx) {
		return false
	}
	listed := true
	mutant.Do(mutant.PartialCacheTrusted, func() { listed = false })
	return listed
}

// shows reports whether the manager's cache of the middleware that
// reconciles h's kind (m, or another set up on m's manager) holds h: if not,
// no event of h reaches this process.
func (m *Middleware) shows(ctx context.Context, h claim.Holder) bool {
	for _, mw := range append([]*Middleware{m}, others(m)...) {
		if mw.cfg.kind != h.Kind {
			continue
		}
		obj := newObject(mw.cfg.prototype)
		if err := mw.cfg.client.Get(ctx, client.ObjectKey{Namespace: h.Namespace, Name: h.Name}, obj); err == nil && obj.GetUID() == h.UID {
			return true
		}
	}
	return false
}
