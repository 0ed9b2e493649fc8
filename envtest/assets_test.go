package envtest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocf-claim/claim/envtest"
)

// The envtest template works in the user's module with KUBEBUILDER_ASSETS,
// and every error of BinaryDir names KUBEBUILDER_ASSETS and says how to fill
// the directory (envtest/doc.go: "Anywhere else an unset KUBEBUILDER_ASSETS
// is an error that names it").

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestAnAssetsDirMissingABinaryIsAnErrorNamingIt: KUBEBUILDER_ASSETS naming a
// directory without etcd is an error that names the variable and the missing
// binary, and does not fall back to the repository's bin/.
func TestAnAssetsDirMissingABinaryIsAnErrorNamingIt(t *testing.T) {
	// Given KUBEBUILDER_ASSETS names a directory holding only kube-apiserver
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "kube-apiserver"), "#!/bin/sh\n")
	t.Setenv(envtest.AssetsEnv, dir)
	// When the harness looks for the control plane
	got, err := envtest.BinaryDir()
	// Then it fails, naming the variable, the directory and etcd
	if err == nil {
		t.Fatalf("BinaryDir() = %q, nil; want an error", got)
	}
	for _, want := range []string{envtest.AssetsEnv, dir, "etcd"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "kube-apiserver and etcd"+" missing") {
		t.Errorf("error %q claims kube-apiserver is missing", err)
	}
}

// TestUnsetAssetsOutsideTheRepositoryIsAnErrorNamingTheVariable: outside
// ocf-claim's repository an unset KUBEBUILDER_ASSETS is
// an error that names it.
func TestUnsetAssetsOutsideTheRepositoryIsAnErrorNamingTheVariable(t *testing.T) {
	// Given a user's module elsewhere and no KUBEBUILDER_ASSETS
	mod := t.TempDir()
	writeFile(t, filepath.Join(mod, "go.mod"), "module example.com/op\n\ngo 1.26\n")
	t.Setenv(envtest.AssetsEnv, "")
	t.Chdir(mod)
	// When the harness looks for the control plane
	_, err := envtest.BinaryDir()
	// Then the error names KUBEBUILDER_ASSETS
	if err == nil || !strings.Contains(err.Error(), envtest.AssetsEnv) {
		t.Errorf("BinaryDir() error = %v, want one naming %s", err, envtest.AssetsEnv)
	}
}

// TestUnsetAssetsInAModuleWithItsOwnToolsModuleIsAnErrorNamingTheVariable:
// a user's module that keeps its own tools module at hack/envtest/go.mod
// (this repository's layout, which docs/testing.md points users at for
// building the binaries) is not taken for ocf-claim's repository: with
// KUBEBUILDER_ASSETS unset, the error names KUBEBUILDER_ASSETS, not only
// that go.mod.
func TestUnsetAssetsInAModuleWithItsOwnToolsModuleIsAnErrorNamingTheVariable(t *testing.T) {
	// Given a user's module with a tools module at hack/envtest/go.mod that
	// does not pin k8s.io/kubernetes, and no KUBEBUILDER_ASSETS
	mod := t.TempDir()
	writeFile(t, filepath.Join(mod, "go.mod"), "module example.com/op\n\ngo 1.26\n")
	writeFile(t, filepath.Join(mod, "hack", "envtest", "go.mod"),
		"module example.com/op/hack/envtest\n\ngo 1.26\n\nrequire sigs.k8s.io/controller-runtime/tools/setup-envtest v0.0.0-20250101000000-000000000000\n")
	t.Setenv(envtest.AssetsEnv, "")
	t.Chdir(mod)
	// When the harness looks for the control plane
	got, err := envtest.BinaryDir()
	// Then the error names KUBEBUILDER_ASSETS
	if err == nil {
		t.Fatalf("BinaryDir() = %q, nil; want an error", got)
	}
	if !strings.Contains(err.Error(), envtest.AssetsEnv) {
		t.Errorf("BinaryDir() error = %q: it does not name %s, the one thing the user must set", err, envtest.AssetsEnv)
	}
}
