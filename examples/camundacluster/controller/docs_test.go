package controller_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ocf-claim/claim/internal/doccheck"
)

// The Go blocks of the newcomer docs are quoted from the example's code, so
// that they compile and run. This test fails when a quoted block no longer
// appears verbatim (up to indentation) in a Go file of the example.
func TestGoBlocksInTheNewcomerDocsAreQuotedFromCompiledCode(t *testing.T) {
	var sources []string
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		b, err := os.ReadFile(path)
		sources = append(sources, doccheck.Normalize(string(b)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{"index.md", "getting-started.md"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", doc))
		if err != nil {
			t.Fatal(err)
		}
		blocks := doccheck.GoBlocks(string(b))
		if len(blocks) == 0 {
			t.Errorf("%s: no Go blocks found; the test would prove nothing", doc)
		}
		for i, block := range blocks {
			if !doccheck.QuotedIn(sources, block.Body) {
				t.Errorf("%s: Go block %d is not quoted from any Go file of examples/camundacluster:\n%s", doc, i+1, block.Body)
			}
		}
	}
}
