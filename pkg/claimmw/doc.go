// Package claimmw wraps an operator's reconcile.Reconciler so that it acts
// only while its object holds every claim key it names, and stops acting,
// then gives the keys back, when it may not.
//
// Every pass decides from what the API server says now: it reads the object,
// computes its keys (each normalized once), puts its finalizer on before the
// first claim write, and acquires the keys in sorted order, stopping at the
// first one not granted. When every key is granted the claim condition is
// True and the inner reconciler runs with the grants and their fencing
// tokens ([GrantsFrom]). When one is not, the condition says why in words a
// user reads on `kubectl get` (Parked, WaitingForHandover, Foreign,
// NotFirst, InvalidKey; see pkg/conditions), and the object keeps only the
// keys before the one it waits for: every other key it holds, and every key
// it no longer names, is given up ([State].Releasing). Given-up keys are
// released, each fenced on a fresh read, only after an inner pass that was
// told of them returned success, so a key is never freed while the
// object's workloads may still use it, and no two objects wait for each
// other whatever their key sets were before.
//
// [Middleware.SetupWithManager] registers the middleware with a controller
// builder and adds what its claims need: a field index of the objects by the
// keys they name, and watches through which every change of a claim record
// reconciles every object naming its key (holder and waiters alike) and the
// record's holder. A holder whose record was deleted, taken over or erased
// from outside therefore finds out in its next pass, which runs its inner
// reconciler parked (so it stops acting) and records a Lost event. The
// requeue intervals are only a safety net.
//
// An object being deleted never acquires: the inner reconciler runs with
// [State].Deleting and the keys the object still holds (none for an object
// that never held them), then one release sweep frees its records, then the
// finalizer comes off. A pass that fails keeps the finalizer.
//
// Writes that must not land after the object lost a key go through
// [FencedClient], which stamps the pass's fencing tokens on the objects it
// writes and refuses objects a newer holder already stamped (pkg/fence).
//
// [WithHandover] lets an object hand a key it holds to a named successor: the
// handover is prepared on the record, the successor waits
// (WaitingForHandover), and it is committed after the holder's inner pass
// that saw it succeeded. [WithRenewal] keeps time-based claims renewed
// between passes and cancels the inner reconciler's context when a renewal
// misses its deadline or finds the claim lost.
//
// Records carry the claim set of the middleware that wrote them (its name by
// default), so two middlewares for one kind never release each other's
// records. The status is written only when the claim condition changed, so
// a steady pass of a holder makes no write and one uncached read per key.
package claimmw
