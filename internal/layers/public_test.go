package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Public is the module's importable library packages (module-relative; ""
// is the root): every other package is a command or sits under an
// internal/ directory, where Go's rule keeps users out. Each is public on
// purpose, and its package documentation says so in a paragraph that
// begins "Import it to": what a user builds with it.
var Public = []string{
	"",
	"fusion",
	"gpu",
	"pipeline",
	"pipeline/chat",
	"pipeline/constrain",
	"pipeline/serve",
	"pipeline/tokenizer",
	"shaders",
	"tensors",
	"tensors/model",
}

// MaxPublic bounds the API's surface: a new public package replaces one or
// raises this on purpose.
const MaxPublic = 12

// TestPublicPackages lists the importable library packages (go list: not
// a command, no internal element in the path) and fails on one Public does
// not name, on a name in Public that is not one, and on a package whose
// documentation does not say what a user imports it for.
func TestPublicPackages(t *testing.T) {
	if len(Public) > MaxPublic {
		t.Errorf("%d public packages, at most %d", len(Public), MaxPublic)
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command lists the packages: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-e", "-json=ImportPath,Name,Dir,GoFiles", Module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var got []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var pkg struct {
			ImportPath, Name, Dir string
			GoFiles               []string
		}
		if err := dec.Decode(&pkg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rel, _ := relative(pkg.ImportPath)
		if pkg.Name == "main" || slices.Contains(strings.Split(rel, "/"), "internal") {
			continue
		}
		got = append(got, rel)
		if !slices.Contains(Public, rel) {
			t.Errorf("package %s is importable but not in layers.Public: move it under internal/, or add it with its reason", pkg.ImportPath)
		}
		if !saysWhy(t, pkg.Dir, pkg.GoFiles) {
			t.Errorf("package %s: its documentation does not say what a user imports it for (a paragraph beginning \"Import it to\")", pkg.ImportPath)
		}
	}
	for _, p := range Public {
		if !slices.Contains(got, p) {
			t.Errorf("layers.Public names %q, which is not an importable package", p)
		}
	}
}

// saysWhy reports whether a package comment among files has the "Import
// it to" paragraph.
func saysWhy(t *testing.T, dir string, files []string) bool {
	t.Helper()
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, dir+"/"+name, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc != nil && strings.Contains(strings.Join(strings.Fields(f.Doc.Text()), " "), "Import it to") {
			return true
		}
	}
	return false
}
