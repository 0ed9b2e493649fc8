// Package envtest is ocf-claim's test harness for code that talks to a real
// API server: it starts kube-apiserver and etcd once per test binary and hands
// each test what a claim test needs: a manager-style cached client, an
// uncached reader, fresh namespaces, separate clients and caches for separate
// claimants, a cache that can be made to lag on purpose, and installation of
// CRDs written in Go ([CRD]) or read from manifests (Options.CRDPaths).
//
// Use it from TestMain, in this repository or in your own module:
//
//	var env *envtest.Env
//
//	func TestMain(m *testing.M) { envtest.Main(m, &env) }
//
// The binaries come from the directory the KUBEBUILDER_ASSETS environment
// variable names, whenever it is set: any envtest assets directory holding
// kube-apiserver and etcd (what setup-envtest downloads, or what this
// repository's tools module builds from source, see docs/testing.md). Only
// when it is not set, and the tests run inside ocf-claim's repository, does
// the harness fall back to bin/k8s/<version>, which `make envtest` fills.
// Anywhere else an unset KUBEBUILDER_ASSETS is an error that names it.
//
// Every package's suite starts its own control plane on free ports, so
// `go test ./...` may run several suites in parallel.
package envtest
