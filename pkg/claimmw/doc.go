// Package claimmw wraps an operator's reconcile.Reconciler so that it acts
// only while its object holds every claim key it names.
//
// Per reconcile, [Middleware] reads the object, computes its keys, puts its
// finalizer on before the first claim write, and acquires the keys in sorted
// order (a fixed order, so two objects that want the same two keys cannot
// each hold one and wait for the other). When every key is granted it sets
// the claim condition True, hands the grants to the inner reconciler in the
// context ([GrantsFrom]) and runs it; after a successful inner pass it
// releases every claim the object no longer names. The inner pass comes
// first because it moves the workloads off the old key; releasing before
// would free a key the old workloads still use.
//
// When a key is not granted the condition says why in words a user reads on
// `kubectl get` (Parked, WaitingForHandover, Foreign, NotFirst, InvalidKey;
// see pkg/conditions), the inner reconciler is skipped (or run with the
// parked [State], see [RunInnerWhileParked]), and the object is requeued.
// The requeue is the safety net: a parked object is reconciled as soon as the
// record it waits on changes, through the handler [Middleware.ClaimEvents]
// returns.
//
// An object being deleted never acquires: the inner reconciler's deletion
// path runs, then one release sweep, then the finalizer comes off. A sweep
// that fails keeps the finalizer and returns the error.
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
// The status is written only when the claim condition changed, so a steady
// pass of a holder makes no status write and no claim write (one uncached
// read per key, which the claim protocol needs to know it still holds).
package claimmw
