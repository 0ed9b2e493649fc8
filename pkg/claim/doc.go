// Package claim is the single-holder claim primitive: at most one holder object
// (a custom resource, usually) holds a key at a time, where a key is any string
// an operator needs exclusive use of: a storage backend, a logical database, a
// Keycloak realm.
//
// A [Claimer] owns the protocol; a backend only stores records and compares
// and swaps them. [New] stores records as Leases unless [WithBackend] names
// another backend; the backend contract and the record codec are in
// pkg/backends, time-based claims (expiry, renewals) in pkg/expiry.
// Every decision about who may hold a key is made here, once, by pure
// functions that table tests drive, and every write the protocol makes is
// conditional on what the protocol read:
//
//   - A free key is granted by the backend's atomic create: the first create
//     wins, every later one conflicts and re-reads.
//   - A key held by self (judged by UID alone) is re-entered without a write.
//   - A record the claim did not write, or written for another key, is
//     [ReasonForeign]: it blocks, and is never taken over or released.
//   - A key held by another holder is taken over only when [Liveness] says the
//     holder is gone and the [HandoverGate] is open, with one write fenced on
//     the UID and version of the read that judged the holder gone.
//   - A holder that cannot be judged keeps what it holds.
//
// What is promised: among holders that check [Outcome.Granted] before acting,
// at most one acts for a key at a time, provided the reader given to [New] is
// uncached. What is not: a holder that is slow or partitioned may still act
// after it lost its key. Protected resources that must refuse such a holder
// check the fencing [Token] each grant carries; see docs/fencing.md.
package claim
