package doccheck

import (
	"fmt"
	"os"
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

// checkSuiteMap returns what the promise map of doc names that does not
// exist in the repository at root: a path (a file, a folder, or a glob that
// matches a file; a bare file name is looked for anywhere), a test function not declared in the Go file named
// before it in its cell, or any other name (a contract case, a checker rule,
// a model world) that no file of the repository contains.
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
		cells := strings.Split(line, "|")
		if len(cells) < 4 {
			errs = append(errs, fmt.Errorf("row %q: want two cells", line))
			continue
		}
		rows++
		promise, where := strings.TrimSpace(cells[1]), cells[2]
		current := "" // the last Go file the cell named
		for _, m := range codeSpan.FindAllStringSubmatch(where, -1) {
			name := m[1]
			switch {
			case strings.Contains(name, "/") || strings.HasSuffix(name, ".go"):
				if !pathExists(root, name, files) {
					errs = append(errs, fmt.Errorf("%q: %s does not exist", promise, name))
				}
				current = ""
				if strings.HasSuffix(name, ".go") && strings.Contains(name, "/") {
					current = name
				}
			case goTestName.MatchString(name) && current != "":
				if !regexp.MustCompile(`(?m)^func ` + name + `\(`).MatchString(files[current]) {
					errs = append(errs, fmt.Errorf("%q: %s declares no %s", promise, current, name))
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

func anyContains(files map[string]string, s string) bool {
	for _, body := range files {
		if strings.Contains(body, s) {
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
// each row below names one thing the repository does not have.
func TestTheSuiteMapCheckFindsWhatDoesNotExist(t *testing.T) {
	root := filepath.Join("..", "..")
	files := repoFiles(t, root)
	// The names below would otherwise be found in this very file.
	delete(files, "internal/doccheck/suitemap_test.go")
	tests := []struct {
		name, row string
	}{
		{"a moved file", "| p | `pkg/claim/no_such_test.go` |"},
		{"a glob that matches nothing", "| p | `pkg/claim/*_nosuch_test.go` |"},
		{"a bare file name found nowhere", "| p | the plugin's `no_such_test.go` |"},
		{"a renamed test", "| p | `pkg/claim/decide_test.go` (`TestNoSuchBehaviour`) |"},
		{"a test of another file", "| p | `pkg/claim/decide_test.go` (`TestGoBlocksInDocsAreQuotedFromCompiledCode`) |"},
		{"a contract case nobody declares", "| p | `pkg/backends/backendtest/cases.go` (`NoSuchContractCase`) |"},
		{"a checker rule nobody declares", "| p | the chaos rule `no-such-rule` |"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := suiteMapHeader + "\n| --- | --- |\n" + tt.row + "\n"
			if errs := checkSuiteMap(root, doc, files); len(errs) != 1 {
				t.Errorf("got %d errors %v, want one", len(errs), errs)
			}
		})
	}
	t.Run("a row of things that exist", func(t *testing.T) {
		doc := suiteMapHeader + "\n| --- | --- |\n| p | `pkg/claim/` `pkg/generation/*_test.go` `internal/doccheck/doccheck_test.go` (`TestGoBlocksInDocsAreQuotedFromCompiledCode`), `doccheck_test.go`, the rule `no-leak` |\n"
		if errs := checkSuiteMap(root, doc, files); len(errs) != 0 {
			t.Errorf("got %v, want none", errs)
		}
	})
}
