// Package doccheck holds the test that keeps the Go code in docs/ compiling:
// every ```go block of a Markdown document must be quoted verbatim (up to
// indentation) from a Go file of the repository, where the compiler and the
// tests see it.
package doccheck
