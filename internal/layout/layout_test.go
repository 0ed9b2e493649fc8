// Package layout holds tests that keep the architecture the layout shows:
// which package may import which, and how large pkg/claim's API may grow.
package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/ocf-claim/claim/"

// root is the repository root, two levels above this package.
func root(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(wd, "..", "..")
}

// parseDir parses the non-test Go files of dir.
func parseDir(t *testing.T, dir string, mode parser.Mode) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, mode)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// TestNothingImportsUpward: Given the layers backends < claim < expiry <
// claimmw, and the generation backend beside claim on top of backends, Then no package imports a layer above it: a backend never
// depends on the protocol (so claim.New can default to the Lease backend),
// and the protocol never depends on time-based claims or the middleware.
func TestNothingImportsUpward(t *testing.T) {
	forbidden := map[string][]string{
		"pkg/backends":            {"pkg/claim", "pkg/expiry", "pkg/claimmw"},
		"pkg/backends/lease":      {"pkg/claim", "pkg/expiry", "pkg/claimmw"},
		"pkg/backends/annotation": {"pkg/claim", "pkg/expiry", "pkg/claimmw"},
		"pkg/claim":               {"pkg/expiry", "pkg/claimmw", "pkg/conditions", "pkg/finalizer"},
		"pkg/expiry":              {"pkg/claimmw"},
		"pkg/conditions":          {"pkg/claimmw"},
		"pkg/finalizer":           {"pkg/claim", "pkg/claimmw"},
		// The generation backend builds on the storage layer only: it is a
		// contract of its own beside the claim protocol, not on top of it.
		"pkg/generation":                {"pkg/claim", "pkg/expiry", "pkg/claimmw", "pkg/conditions", "pkg/finalizer"},
		"pkg/generation/memory":         {"pkg/claim", "pkg/expiry", "pkg/claimmw", "pkg/conditions", "pkg/finalizer", "pkg/backends"},
		"pkg/generation/generationtest": {"pkg/claim", "pkg/expiry", "pkg/claimmw", "pkg/conditions", "pkg/finalizer"},
	}
	for pkg, banned := range forbidden {
		for _, f := range parseDir(t, filepath.Join(root(t), pkg), parser.ImportsOnly) {
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, b := range banned {
					if path == module+b {
						t.Errorf("%s imports %s, a layer above it", pkg, b)
					}
				}
			}
		}
	}
}

// maxClaimAPI bounds pkg/claim's exported top-level names plus the exported
// methods of its exported types (at most 80).
const maxClaimAPI = 80

// TestTheClaimAPIFitsInAReadersHead: Given pkg/claim's non-test files, Then
// its exported top-level names plus exported methods are at most
// maxClaimAPI; what only backend authors need lives in pkg/backends, and
// time-based claims in pkg/expiry.
func TestTheClaimAPIFitsInAReadersHead(t *testing.T) {
	var names []string
	for _, f := range parseDir(t, filepath.Join(root(t), "pkg/claim"), 0) {
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					names = append(names, d.Name.Name)
					continue
				}
				typ := d.Recv.List[0].Type
				if star, ok := typ.(*ast.StarExpr); ok {
					typ = star.X
				}
				if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
					names = append(names, id.Name+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch spec := spec.(type) {
					case *ast.ValueSpec:
						for _, n := range spec.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					case *ast.TypeSpec:
						if spec.Name.IsExported() {
							names = append(names, spec.Name.Name)
						}
					}
				}
			}
		}
	}
	sort.Strings(names)
	if len(names) > maxClaimAPI {
		t.Errorf("pkg/claim exports %d names and methods, more than %d:\n%s", len(names), maxClaimAPI, strings.Join(names, "\n"))
	}
	if len(names) < 20 {
		t.Errorf("pkg/claim exports only %d names; the parser missed the package: %v", len(names), names)
	}
	t.Logf("pkg/claim exports %d names and methods", len(names))
}
