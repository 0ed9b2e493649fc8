// Package envtest is ocf-claim's test harness for code that talks to a real
// API server: it starts kube-apiserver and etcd (built from source by
// `make envtest`) once per test binary and hands each test what a claim test
// needs: a manager-style cached client, an uncached reader, fresh namespaces,
// separate clients and caches for separate claimants, a cache that can be
// made to lag on purpose, and installation of CRDs written in Go.
//
// Use it from TestMain:
//
//	var env *envtest.Env
//
//	func TestMain(m *testing.M) { envtest.Main(m, &env) }
//
// Every package's suite starts its own control plane on free ports, so
// `go test ./...` may run several suites in parallel.
package envtest
