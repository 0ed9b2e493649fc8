package claimsctl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOperationsDocQuotesGoldenFiles: every sample run in docs/operations.md
// (a code block starting with "$ kubectl claims") prints exactly what one of
// the golden files holds, so the page cannot drift from the plugin.
func TestOperationsDocQuotesGoldenFiles(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.golden"))
	if err != nil {
		t.Fatal(err)
	}
	goldens := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		goldens[strings.Replace(string(b), "--- stderr\n", "", 1)] = true
	}
	blocks := strings.Split(string(doc), "```")
	samples := 0
	for i := 1; i < len(blocks); i += 2 {
		block := strings.TrimPrefix(blocks[i], "\n")
		if !strings.HasPrefix(block, "$ kubectl claims") {
			continue
		}
		samples++
		_, out, _ := strings.Cut(block, "\n")
		if !goldens[out] {
			t.Errorf("docs/operations.md shows output that no golden file holds:\n%s", out)
		}
	}
	if samples == 0 {
		t.Fatal("docs/operations.md has no sample runs")
	}
}
