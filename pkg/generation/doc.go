// Package generation is the generation-and-claim backend contract (process
// generations, claims with fencing tokens and TTLs, planned transfers, a
// watch and an injectable clock) and its Kubernetes implementation.
//
// A generation is one version of a service in a rollout: the Pods of a
// Deployment's new ReplicaSet, or the green side of a blue/green cutover.
// It registers ([Backend.RegisterGeneration]), acquires claims or is handed
// them by the generation before it ([Backend.PrepareTransfer],
// [Backend.CommitTransfer]), drains, and steps down. Every grant of a claim
// carries a [FencingToken] greater than every earlier grant's, so that the
// system the claim protects can refuse a former owner that has not noticed
// yet.
//
// [New] stores the state on the API server: one coordination.k8s.io/v1 Lease
// per claim and one ConfigMap per generation, in one namespace. Every
// mutation of a claim is a single write conditional on the Lease's
// resourceVersion; the outcomes of the last [RememberedOutcomes] mutations
// that carried an [OperationID] live on the Lease, so a retry after a lost
// response, a timeout or a restart of the caller returns the first outcome
// and changes nothing. Whether an owner has expired is judged from how long
// this process has observed its claim unchanged, on the [Clock] the backend
// was given, never by comparing a time another machine wrote with the local
// clock. [Backend.WatchClaim] streams the Lease through an API watch.
//
// Package memory is an in-memory Backend for unit tests, and package
// generationtest is the contract suite both pass. Both backends decide with
// [Decide], so what a request does is defined once, here, and table-tested
// without I/O. See docs/generations.md.
package generation
