// Package ports_test keeps docs/porting.md honest about the size of the
// ports: the consumer code of each port is counted again on every test run.
package ports_test

import (
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ports are the packages whose consumer code the guide counts.
var ports = []string{"databaseclaim", "clusterclaim", "realmclaim"}

// guideRow matches a row of the guide's count table: | `port` | N lines |
var guideRow = regexp.MustCompile("(?m)^\\| `([a-z]+)` \\| ([0-9]+) lines \\|")

// codeLines counts the lines of src that hold code: every line a token other
// than a comment starts on, so blank lines and comments do not count.
func codeLines(t *testing.T, path string) int {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var s scanner.Scanner
	s.Init(fset.AddFile(path, -1, len(src)), src, func(pos token.Position, msg string) { t.Fatalf("%s: %s", pos, msg) }, 0)
	lines := map[int]bool{}
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue // inserted at a line end, not written
		}
		lines[fset.Position(pos).Line] = true
	}
	return len(lines)
}

func TestCodeLinesSkipsBlankLinesAndComments(t *testing.T) {
	src := "// Package x.\npackage x\n\n/* a\nblock */\nfunc f() int { // trailing\n\treturn 1\n}\n"
	path := filepath.Join(t.TempDir(), "x.go")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := codeLines(t, path); got != 4 {
		t.Fatalf("codeLines = %d, want 4 (package, func, return, closing brace)", got)
	}
}

// TestTheGuideCountsTheConsumerCodeOfEachPort recomputes the non-blank,
// non-comment lines of each port's non-test Go files and compares them with
// the table in docs/porting.md.
func TestTheGuideCountsTheConsumerCodeOfEachPort(t *testing.T) {
	want := map[string]int{}
	for _, port := range ports {
		files, err := filepath.Glob(filepath.Join(port, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				want[port] += codeLines(t, f)
			}
		}
	}
	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", "porting.md"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, m := range guideRow.FindAllStringSubmatch(string(guide), -1) {
		n, _ := strconv.Atoi(m[2])
		got[m[1]] = n
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("docs/porting.md counts the ports' consumer code wrong; update its table (-counted +guide):\n%s", diff)
	}
}
