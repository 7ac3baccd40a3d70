package main

import (
	"go/parser"
	"go/token"
	"io"
	"strings"
	"testing"
)

// TestPackageDocListsEveryCommand keeps `go doc ./cmd/trajring` whole: its
// usage block names every command the tool has.
func TestPackageDocListsEveryCommand(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	root := newRootCmd(io.Discard, io.Discard)
	n := 0
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" {
			continue
		}
		n++
		if !strings.Contains(doc, "\ttrajring "+c.Name()+" ") {
			t.Errorf("the package doc does not list %q", c.Name())
		}
	}
	if n < 9 {
		t.Errorf("%d commands, want at least 9", n)
	}
}
