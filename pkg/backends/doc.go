// Package backends is the contract between the claim protocol (pkg/claim)
// and the places claim records are stored, for backend authors: the
// [Backend] interface and its [Factory], the [Record] a backend stores and
// returns, the [Holder] and fencing [Token] a record carries, and the codec
// and naming rules every backend shares ([Config], [Annotations],
// [Config.DecodeStored], [LabelValue]), so that records written by different
// backends read the same.
//
// Operators do not need this package to claim keys: pkg/claim re-exports
// Holder, Record and Token, and its zero Config uses the defaults defined
// here. The backends themselves live in the subpackages (lease, annotation,
// memory), and backendtest is the contract suite each of them passes.
package backends
