package pipeline

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGenerationLoopLength: the generation loop (Session.decode) stays a
// loop that stops, streams and counts; how a token is obtained belongs to
// the steppers (step.go). It fails when the function passes 60 lines.
func TestGenerationLoopLength(t *testing.T) {
	const most = 60
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "session.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Recv == nil || fd.Name.Name != "decode" {
			continue
		}
		found = true
		lines := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
		t.Logf("Session.decode: %d lines", lines)
		if lines > most {
			t.Errorf("Session.decode is %d lines, more than %d: move the work into a stepper", lines, most)
		}
	}
	if !found {
		t.Fatal("no Session.decode in session.go")
	}
}

// TestOptionalInterfacesInOnePlace: the package's non-test files assert
// package gpu's interfaces only in programs.go, so that folding them into
// gpu's main interfaces changes one file.
func TestOptionalInterfacesInOnePlace(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "programs.go" {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ta, ok := n.(*ast.TypeAssertExpr)
			if !ok || ta.Type == nil {
				return true
			}
			if sel, ok := ta.Type.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "gpu" {
					t.Errorf("%s: type assertion to gpu.%s outside programs.go", fset.Position(ta.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
}
