package controller_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		sources = append(sources, normalize(string(b)))
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
		blocks := goBlocks(string(b))
		if len(blocks) == 0 {
			t.Errorf("%s: no Go blocks found; the test would prove nothing", doc)
		}
		for i, block := range blocks {
			want := normalize(block)
			found := false
			for _, src := range sources {
				if strings.Contains(src, want) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s: Go block %d is not quoted from any Go file of examples/camundacluster:\n%s", doc, i+1, block)
			}
		}
	}
}

// goBlocks returns the bodies of the ```go fences of a Markdown text.
func goBlocks(md string) []string {
	var out []string
	var cur []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```go":
			in, cur = true, nil
		case in && strings.TrimSpace(line) == "```":
			in = false
			out = append(out, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, line)
		}
	}
	return out
}

// normalize trims every line and drops empty ones, so that a block quoted
// with other indentation still matches.
func normalize(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
