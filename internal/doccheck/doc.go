// Package doccheck holds the test that keeps the Go code in docs/ compiling:
// every ```go block of a Markdown document must be quoted verbatim (up to
// indentation) from a Go file of the repository, where the compiler and the
// tests see it. Its tests also keep the map of docs/testing.md, from each
// promise to the tests that pin it, naming only files and tests that exist.
//
// It also gives that test's tools to the example whose newcomer docs quote
// it: GoBlocks finds the blocks, QuotedIn tells whether one is quoted from a
// source up to indentation.
package doccheck

import "strings"

// Block is the body of a ```go fence of a Markdown text and the line its
// fence opens on (1-based).
type Block struct {
	Body string
	Line int
}

// GoBlocks returns the ```go fences of a Markdown text, in order.
func GoBlocks(md string) []Block {
	var out []Block
	var cur []string
	in, start := false, 0
	for i, line := range strings.Split(md, "\n") {
		switch {
		case !in && strings.TrimSpace(line) == "```go":
			in, cur, start = true, nil, i+1
		case in && strings.TrimSpace(line) == "```":
			in = false
			out = append(out, Block{Body: strings.Join(cur, "\n"), Line: start})
		case in:
			cur = append(cur, line)
		}
	}
	return out
}

// Normalize trims every line and drops empty ones, so that a block quoted
// with other indentation still matches: a block is quoted from a source when
// Normalize(source) contains Normalize(block).
func Normalize(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// QuotedIn reports whether block is quoted from one of sources, up to
// indentation: sources are Normalize'd texts of Go files.
func QuotedIn(sources []string, block string) bool {
	want := Normalize(block)
	for _, src := range sources {
		if strings.Contains(src, want) {
			return true
		}
	}
	return false
}
