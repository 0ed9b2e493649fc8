package envtest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// AssetsEnv names the environment variable that points at a directory
// holding kube-apiserver and etcd, as controller-runtime's envtest reads it
// too. When set it is the only place looked at: a module other than
// ocf-claim's sets it; inside ocf-claim's repository it overrides the
// pinned bin/k8s/<version> directory.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// toolsGoMod is the tools module that pins the control-plane version.
const toolsGoMod = "hack/envtest/go.mod"

// controlPlane are the binaries a control plane needs.
var controlPlane = []string{"kube-apiserver", "etcd"}

// BinaryDir returns the directory holding the control-plane binaries:
// $KUBEBUILDER_ASSETS when set; otherwise, when the working directory is
// inside ocf-claim's repository, bin/k8s/<version> under its root, with the
// version read from hack/envtest/go.mod. Its errors name KUBEBUILDER_ASSETS
// and say how to fill the directory: set the variable to any envtest assets
// directory, or, in ocf-claim's repository, run `make envtest`.
func BinaryDir() (string, error) {
	if dir := os.Getenv(AssetsEnv); dir != "" {
		if missing := missingBinaries(dir); len(missing) > 0 {
			return "", fmt.Errorf("finding the control plane: %s=%s has no %s: point %s at a directory holding kube-apiserver and etcd (in ocf-claim's repository, `make envtest` builds them into bin/k8s/<version>)",
				AssetsEnv, dir, strings.Join(missing, " and "), AssetsEnv)
		}
		return dir, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("finding the control plane: %s is not set and the working directory is not inside ocf-claim's repository (no %s above it): set %s to a directory holding kube-apiserver and etcd", AssetsEnv, toolsGoMod, AssetsEnv)
	}
	version, err := KubernetesVersion(root)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "bin", "k8s", strings.TrimPrefix(version, "v"))
	if missing := missingBinaries(dir); len(missing) > 0 {
		return "", fmt.Errorf("finding the control plane: %s missing in %s: run `make envtest` to build them (about 10 minutes the first time), or set %s to a directory holding them", strings.Join(missing, " and "), dir, AssetsEnv)
	}
	return dir, nil
}

// missingBinaries returns the control-plane binaries dir does not hold.
func missingBinaries(dir string) []string {
	var missing []string
	for _, bin := range controlPlane {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			missing = append(missing, bin)
		}
	}
	return missing
}

// KubernetesVersion returns the k8s.io/kubernetes version pinned by the tools
// module under root, such as "v1.37.2".
func KubernetesVersion(root string) (string, error) {
	path := filepath.Join(root, toolsGoMod)
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading the pinned control-plane version: %w", err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "k8s.io/kubernetes" && strings.HasPrefix(fields[1], "v") {
			return fields[1], nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return "", fmt.Errorf("reading %s: no k8s.io/kubernetes requirement", path)
}

// RepoRoot walks up from the working directory to the repository root: the
// directory holding the tools module (hack/envtest/go.mod). Tools run from
// the repository, such as the demo, find bin/ under it.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for {
		// This repository's root: its tools module, beside the go.mod of
		// this module. Another module with a hack/envtest of its own is not
		// it.
		if _, err := os.Stat(filepath.Join(dir, toolsGoMod)); err == nil && isThisModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the repository root: no " + toolsGoMod + " above the working directory; set " + AssetsEnv)
		}
		dir = parent
	}
}

// modulePath is the module path of this repository's root module.
const modulePath = "github.com/ocf-claim/claim"

// isThisModule reports whether the go.mod at path declares this repository's
// module.
func isThisModule(path string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return f[1] == modulePath
		}
	}
	return false
}
