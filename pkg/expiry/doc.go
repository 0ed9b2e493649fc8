// Package expiry adds time to claims, for holders that are processes or that
// may hang without disappearing: a holder keeps its keys only while it
// renews its records, and contenders judge it dead once they have not seen a
// renewal for a lease duration.
//
// Contenders pass a [Liveness] to claim.WithLiveness (alone, or for some
// kinds through claim.ByKind). Holders renew with [Renew], or let a [Keeper]
// renew in the background and hand them a context that ends before a
// contender may judge them dead. Everything else is pkg/claim: this package
// adds no state to the record beyond the renew time every grant writes.
package expiry
