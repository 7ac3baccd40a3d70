package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// goBlocks returns the ```go blocks of a Markdown page, each as its lines
// with trailing spaces trimmed, keyed by the line the block starts on.
func goBlocks(t *testing.T, path string) map[int]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[int]string{}
	var cur []string
	start := -1
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case start < 0 && strings.TrimSpace(line) == "```go":
			start, cur = i+1, nil
		case start >= 0 && strings.TrimSpace(line) == "```":
			blocks[start] = strings.Join(cur, "\n")
			start = -1
		case start >= 0:
			cur = append(cur, strings.TrimRight(line, " \t"))
		}
	}
	if start >= 0 {
		t.Fatalf("%s:%d: unterminated code block", path, start)
	}
	return blocks
}

// testBodies returns the bodies of every function declared in a _test.go
// file under root, one indentation level removed, as they would appear in
// a page, mapped to where they are declared.
func testBodies(t *testing.T, root string) map[string]string {
	t.Helper()
	bodies := map[string]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			open := fset.Position(fn.Body.Lbrace).Offset + 1
			end := fset.Position(fn.Body.Rbrace).Offset
			var lines []string
			for _, l := range strings.Split(strings.Trim(string(src[open:end]), "\n"), "\n") {
				if strings.HasPrefix(strings.TrimSpace(l), "// Output:") {
					break // an example's expected output is not part of the snippet
				}
				lines = append(lines, strings.TrimRight(strings.TrimPrefix(l, "\t"), " \t"))
			}
			bodies[strings.Join(lines, "\n")] = fset.Position(fn.Pos()).String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bodies
}

// TestGoSnippetsAreCompiled checks that every Go snippet of the README and
// of docs/*.md is the body of a function in a test file, so a snippet
// cannot drift from the API.
func TestGoSnippetsAreCompiled(t *testing.T) {
	bodies := testBodies(t, "..")
	pages, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join("..", "README.md"))
	n := 0
	for _, page := range pages {
		for line, block := range goBlocks(t, page) {
			n++
			if strings.HasPrefix(block, "package ") {
				// A whole file (a main package to build): it must be one
				// of the repository's Go files, from its package clause on.
				if !isRepoFile(t, block) {
					t.Errorf("%s:%d: this Go file is not a file of the repository (from its package clause on); "+
						"copy it from the file it shows", page, line)
				}
				continue
			}
			if _, ok := bodies[block]; !ok {
				t.Errorf("%s:%d: this Go snippet is not the body of any function in a _test.go file; "+
					"write it as one (an example, or a function an example calls) and paste its body here", page, line)
			}
		}
	}
	if n == 0 {
		t.Fatal("no Go snippets found: the README should have at least one")
	}
}

// isRepoFile reports whether block is a non-test Go file of the
// repository from its package clause to its end.
func isRepoFile(t *testing.T, block string) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil || found {
			return err
		}
		if d.IsDir() && (d.Name() == "build" || strings.HasPrefix(d.Name(), ".")) && path != ".." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text := string(src)
		if i := strings.Index(text, "\npackage "); i >= 0 {
			text = text[i+1:]
		}
		found = strings.TrimSpace(text) == block
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// TestGoBlocks checks the Markdown scan on a page of known blocks.
func TestGoBlocks(t *testing.T) {
	page := filepath.Join(t.TempDir(), "p.md")
	text := "# t\n```go\na := 1\n\tb := 2  \n```\n```sh\nls\n```\n```go\nc()\n```\n"
	if err := os.WriteFile(page, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got := goBlocks(t, page)
	want := map[int]string{2: "a := 1\n\tb := 2", 9: "c()"}
	if len(got) != len(want) {
		t.Fatalf("blocks %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("block at line %d = %q, want %q", k, got[k], v)
		}
	}
}
