package envtest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// AssetsEnv names the environment variable that, when set, points at a
// directory holding kube-apiserver and etcd; it takes precedence over the
// pinned bin/k8s/<version> directory.
const AssetsEnv = "KUBEBUILDER_ASSETS"

// toolsGoMod is the tools module that pins the control-plane version.
const toolsGoMod = "hack/envtest/go.mod"

// BinaryDir returns the directory holding the control-plane binaries:
// $KUBEBUILDER_ASSETS when set, otherwise bin/k8s/<version> under the
// repository root, with the version read from hack/envtest/go.mod. The error
// says to run `make envtest` when the binaries are missing.
func BinaryDir() (string, error) {
	dir := os.Getenv(AssetsEnv)
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", err
		}
		version, err := KubernetesVersion(root)
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "bin", "k8s", strings.TrimPrefix(version, "v"))
	}
	var missing []string
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			missing = append(missing, bin)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("control-plane binaries %s missing in %s: run `make envtest` to build them (about 10 minutes the first time)", strings.Join(missing, " and "), dir)
	}
	return dir, nil
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
		if _, err := os.Stat(filepath.Join(dir, toolsGoMod)); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("finding the repository root: no " + toolsGoMod + " above the working directory; set " + AssetsEnv)
		}
		dir = parent
	}
}
