package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoBlocksInDocsAreQuotedFromCompiledCode fails when a Go block in a
// document is not found in any Go file of the repository: the document shows
// code that nothing compiles.
func TestGoBlocksInDocsAreQuotedFromCompiledCode(t *testing.T) {
	root := filepath.Join("..", "..")
	var sources []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bin" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		b, err := os.ReadFile(path)
		sources = append(sources, Normalize(string(b)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	total := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, block := range GoBlocks(string(b)) {
			total++
			if !QuotedIn(sources, block.Body) {
				t.Errorf("%s:%d: Go block %d is not quoted from any Go file:\n%s", filepath.Base(doc), block.Line, i+1, block.Body)
			}
		}
	}
	if total == 0 {
		t.Fatal("no Go blocks found in docs/: the test would prove nothing")
	}
}
