package doccheck

import (
	"fmt"
	"os"
	pathpkg "path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// suiteMapHeader starts the table of docs/testing.md that maps each promise to
// the files and tests that pin it.
const suiteMapHeader = "| promise | where it is pinned |"

var (
	codeSpan   = regexp.MustCompile("`([^`]+)`")
	goTestName = regexp.MustCompile(`^(Test|Example|Benchmark|Fuzz)[A-Za-z0-9_]*$`)
)

// selfFile is this file: it spells out the names its row cases say do not
// exist, so it is no witness that a name exists.
const selfFile = "internal/doccheck/suitemap_test.go"

// checkSuiteMap returns what the promise map of doc names that does not
// exist in the repository at root: a path (a file, a folder, or a glob that
// matches a file; a bare file name is looked for anywhere), a test function
// not declared in the Go files named before it in its cell (the file, the
// files a glob or a bare file name matches, the Go files below a folder; with
// none named, any Go file), or any other name (a contract case, a checker
// rule, a model world) that no file of the repository contains.
func checkSuiteMap(root, doc string, files map[string]string) []error {
	start := strings.Index(doc, suiteMapHeader)
	if start < 0 {
		return []error{fmt.Errorf("no table starting %q", suiteMapHeader)}
	}
	var errs []error
	rows := 0
	for _, line := range strings.Split(doc[start:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		// A pipe escaped as \| belongs to its cell, as Markdown renders it.
		cells := strings.Split(strings.ReplaceAll(line, `\|`, "\x00"), "|")
		if len(cells) < 4 {
			errs = append(errs, fmt.Errorf("row %q: want two cells", line))
			continue
		}
		rows++
		unescape := func(cell string) string { return strings.ReplaceAll(cell, "\x00", "|") }
		promise, where := strings.TrimSpace(unescape(cells[1])), unescape(cells[2])
		var current []string // the Go files the last path of the cell named
		named := ""          // that path
		for _, m := range codeSpan.FindAllStringSubmatch(where, -1) {
			name := m[1]
			switch {
			case strings.Contains(name, "/") || strings.HasSuffix(name, ".go"):
				if !pathExists(root, name, files) {
					errs = append(errs, fmt.Errorf("%q: %s does not exist", promise, name))
				}
				current, named = goFilesOf(name, files), name
			case goTestName.MatchString(name):
				if !declares(current, named, name, files) {
					if named != "" {
						errs = append(errs, fmt.Errorf("%q: %s declares no %s", promise, named, name))
					} else {
						errs = append(errs, fmt.Errorf("%q: no Go file declares %s", promise, name))
					}
				}
			default:
				if !anyContains(files, name) {
					errs = append(errs, fmt.Errorf("%q: no file of the repository contains %s", promise, name))
				}
			}
		}
	}
	if rows == 0 {
		errs = append(errs, fmt.Errorf("the table starting %q has no rows", suiteMapHeader))
	}
	return errs
}

// goFilesOf returns the Go files the path name stands for: the file, the
// files a glob matches, the files below a folder, or the files of a bare
// file name wherever they are.
func goFilesOf(name string, files map[string]string) []string {
	var out []string
	for path := range files {
		var ok bool
		switch {
		case strings.Contains(name, "*"):
			ok, _ = pathpkg.Match(name, path)
		case !strings.Contains(name, "/"):
			ok = pathpkg.Base(path) == name
		default:
			dir := strings.TrimSuffix(name, "/") + "/"
			ok = path == name || strings.HasPrefix(path, dir)
		}
		if ok && strings.HasSuffix(path, ".go") {
			out = append(out, path)
		}
	}
	return out
}

// declares reports whether one of paths declares the function test; with no
// path named (named empty), whether any Go file but this one does.
func declares(paths []string, named, test string, files map[string]string) bool {
	decl := regexp.MustCompile(`(?m)^func ` + test + `\(`)
	if named == "" {
		for path, body := range files {
			if path != selfFile && strings.HasSuffix(path, ".go") && decl.MatchString(body) {
				return true
			}
		}
		return false
	}
	for _, path := range paths {
		if decl.MatchString(files[path]) {
			return true
		}
	}
	return false
}

func pathExists(root, name string, files map[string]string) bool {
	if strings.Contains(name, "*") {
		matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(name)))
		return err == nil && len(matches) > 0
	}
	if strings.Contains(name, "/") {
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(name, "/"))))
		return err == nil
	}
	for path := range files {
		if filepath.Base(path) == name {
			return true
		}
	}
	return false
}

// anyContains reports whether a file other than this one contains s.
func anyContains(files map[string]string, s string) bool {
	for path, body := range files {
		if path != selfFile && strings.Contains(body, s) {
			return true
		}
	}
	return false
}

// repoFiles reads the Go and Promela files below root, by slash path
// relative to root.
func repoFiles(t *testing.T, root string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "bin" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !(strings.HasSuffix(path, ".go") || strings.HasSuffix(path, ".pml")) {
			return nil
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(root, path)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestTheSuiteMapNamesOnlyFilesAndTestsThatExist fails when the map of
// docs/testing.md, from each promise to the tests that pin it, names a file
// that was moved or a test that was renamed: a reader following it would find
// nothing.
func TestTheSuiteMapNamesOnlyFilesAndTestsThatExist(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "testing.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range checkSuiteMap(root, string(doc), repoFiles(t, root)) {
		t.Error(err)
	}
}

// TestTheSuiteMapCheckFindsWhatDoesNotExist proves the check above can fail:
// each row that names one thing the repository does not have gets one error,
// and each row of things that exist none.
func TestTheSuiteMapCheckFindsWhatDoesNotExist(t *testing.T) {
	root := filepath.Join("..", "..")
	// The files the map check itself reads: this very file, which spells
	// out every name below, is no witness that any of them exists.
	files := repoFiles(t, root)
	tests := []struct {
		name, row string
		errs      int
	}{
		{"a moved file", "| p | `pkg/claim/no_such_test.go` |", 1},
		{"a glob that matches nothing", "| p | `pkg/claim/*_nosuch_test.go` |", 1},
		{"a bare file name found nowhere", "| p | the plugin's `no_such_test.go` |", 1},
		{"a renamed test", "| p | `pkg/claim/decide_test.go` (`TestNoSuchBehaviour`) |", 1},
		{"a test of another file", "| p | `pkg/claim/decide_test.go` (`TestGoBlocksInDocsAreQuotedFromCompiledCode`) |", 1},
		{"a contract case nobody declares", "| p | `pkg/backends/backendtest/cases.go` (`NoSuchContractCase`) |", 1},
		{"a checker rule nobody declares", "| p | the chaos rule `no-such-rule` |", 1},
		{"a test of another file after a bare file name", "| p | the plugin's `trust_test.go` (`TestGoBlocksInDocsAreQuotedFromCompiledCode`) |", 1},
		{"a test of another folder after a folder", "| p | `pkg/claim/` (`TestTokensRiseAcrossDeletionOfTheLease`) |", 1},
		{"a test name cut short", "| p | `pkg/backends/lease/` (`TestTwentyClaimants`) |", 1},
		{"a test name cut short, no file named", "| p | `TestTwentyClaimants` |", 1},
		{"a file after an escaped pipe in its cell", "| p | `pkg/claim/` \\| `pkg/claim/no_such_test.go` |", 1},
		{"a row of things that exist", "| p | `pkg/claim/` `pkg/generation/*_test.go` `internal/doccheck/doccheck_test.go` (`TestGoBlocksInDocsAreQuotedFromCompiledCode`), `doccheck_test.go`, the rule `no-leak` |", 0},
		{"a test of a file a glob matches", "| p | `pkg/generation/*_test.go` (`TestTokensRiseAcrossDeletionOfTheLease`) |", 0},
		{"a test of a folder", "| p | `pkg/backends/lease/` (`TestTwentyClaimantsRaceOneWinner`) |", 0},
		{"a test of a bare file name", "| p | the check's `doccheck_test.go` (`TestGoBlocksInDocsAreQuotedFromCompiledCode`) |", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := suiteMapHeader + "\n| --- | --- |\n" + tt.row + "\n"
			if errs := checkSuiteMap(root, doc, files); len(errs) != tt.errs {
				t.Errorf("got %d errors %v, want %d", len(errs), errs, tt.errs)
			}
		})
	}
}
