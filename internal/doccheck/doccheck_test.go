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
		sources = append(sources, normalize(string(b)))
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
		for i, block := range goBlocks(string(b)) {
			total++
			want := normalize(block.body)
			found := false
			for _, src := range sources {
				if strings.Contains(src, want) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s:%d: Go block %d is not quoted from any Go file:\n%s", filepath.Base(doc), block.line, i+1, block.body)
			}
		}
	}
	if total == 0 {
		t.Fatal("no Go blocks found in docs/: the test would prove nothing")
	}
}

// goBlock is the body of a ```go fence and the line of the Markdown text
// its fence opens on (1-based).
type goBlock struct {
	body string
	line int
}

// goBlocks returns the ```go fences of a Markdown text.
func goBlocks(md string) []goBlock {
	var out []goBlock
	var cur []string
	in, start := false, 0
	for i, line := range strings.Split(md, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```go":
			in, cur, start = true, nil, i+1
		case in && strings.TrimSpace(line) == "```":
			in = false
			out = append(out, goBlock{body: strings.Join(cur, "\n"), line: start})
		case in:
			cur = append(cur, line)
		}
	}
	return out
}

// normalize trims every line and drops empty ones, so a block quoted with
// other indentation still matches.
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
