#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver, etcd, kubectl) from the
# versions pinned in hack/envtest/go.mod into $1 (default bin/k8s/<version>).
# A binary that already exists is never rebuilt: the kube-apiserver build
# takes about ten minutes on two cores.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# $1 is relative to the caller's directory (the Makefile passes
# bin/k8s/<version>), not to this script's, where the go commands run.
if [ -n "${1:-}" ]; then
  mkdir -p "$1"
  set -- "$(cd "$1" && pwd)"
fi
cd "$here"

k8s_version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)   # v1.37.2
etcd_version=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
out=${1:-"$here/../../bin/k8s/${k8s_version#v}"}
mkdir -p "$out"
out=$(cd "$out" && pwd)

minor=${k8s_version#v*.}; minor=${minor%%.*}
major=${k8s_version#v}; major=${major%%.*}
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X ${pkg}.gitVersion=${k8s_version} -X ${pkg}.gitMajor=${major} -X ${pkg}.gitMinor=${minor}"
  stamp+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
done

build() { # name package [ldflags]
  local name=$1 pkg=$2 ldflags=${3:-}
  if [ -x "$out/$name" ]; then
    echo "envtest: $name present in $out, not rebuilding"
    return
  fi
  echo "envtest: building $name from $pkg ($(date +%T)); kube-apiserver takes about 10 minutes on 2 cores"
  local start=$SECONDS
  # No -trimpath: with the same flags as the project's own builds, the
  # k8s.io and controller-runtime dependency packages compiled here (same
  # versions as the main module) are reused from the Go build cache by
  # `go vet` and `go test`, which saves minutes on a fresh machine.
  go build -ldflags "-s -w ${ldflags}" -o "$out/$name.tmp" "$pkg"
  mv "$out/$name.tmp" "$out/$name"
  echo "envtest: built $name in $((SECONDS - start))s"
}

# ENVTEST_BINARIES limits the build to what the caller needs: the test suites
# need only the API server and etcd; kubectl is for people poking at the demo.
want=" ${ENVTEST_BINARIES:-etcd kube-apiserver kubectl} "
if [[ $want == *" etcd "* ]]; then build etcd go.etcd.io/etcd/server/v3; fi
if [[ $want == *" kube-apiserver "* ]]; then build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$stamp"; fi
if [[ $want == *" kubectl "* ]]; then build kubectl k8s.io/kubernetes/cmd/kubectl "$stamp"; fi
echo "envtest: kube-apiserver ${k8s_version}, etcd ${etcd_version} in $out"
