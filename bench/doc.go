// Package bench measures what claims cost a shared API server and how fast a
// parked holder gets its key, side by side with what users would pick
// instead: client-go leader election with a Lease per key, and the
// hand-written Create-first claim operators carry today.
//
// The package holds no library code; its tests are the measurements. `make
// test` runs every scenario once in a smoke size so that the code stays
// compiled and correct; `make bench` runs them in full (BENCH_FULL=1),
// prints one table and writes docs/benchmarks.md (BENCH_REPORT). The Go
// benchmarks of the pure parts live beside them in pkg/claim.
//
// API requests are counted twice: by a counting http.RoundTripper installed
// with rest.Config.WrapTransport (what reaches the API server, including
// the caches' lists and watches), and by the API server's own
// apiserver_request_total, which also sees the code of each answer (a
// rejected Create is a 409).
package bench
