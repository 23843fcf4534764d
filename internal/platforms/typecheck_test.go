package platforms

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// Module is the module whose packages are checked.
const Module = "github.com/gpurun/gpurun"

// target is one platform the module is checked for.
type target struct {
	goos, goarch string
	// cgo: the build with cgo enabled (as `go install` on a machine with
	// a C compiler gets it). Its C side is faked: import "C" declares an
	// empty package (types.Config.FakeImportC), so the Go code of every
	// cgo package is checked without a C toolchain for the target.
	cgo bool
}

func (t target) String() string {
	s := t.goos + "/" + t.goarch
	if !t.cgo {
		s += " (CGO_ENABLED=0)"
	}
	return s
}

// targets are the platforms users build gpurun for.
var targets = []target{
	{"linux", "amd64", true},
	{"linux", "arm64", true},
	{"darwin", "arm64", true},
	{"darwin", "amd64", true},
	{"windows", "amd64", true},
	{"js", "wasm", false},
	// Without cgo (a Mac without Xcode's command line tools, Windows
	// without MinGW: Go then builds with cgo off): the Vulkan and native
	// WebGPU backends are stubs that say so.
	{"darwin", "arm64", false},
	{"windows", "amd64", false},
}

// notInBrowser are the module's packages that js/wasm does not build, and
// why; everything else, the root package included, must.
var notInBrowser = map[string]string{
	"cmd/gpurun":       "the command-line tool (the browser's is cmd/gpurun-web); it drives Chromium through chromedp, which has no js/wasm build",
	"internal/browser": "drives a headless Chromium from the host through chromedp",
}

// listed is one package as go list -deps -test reports it.
type listed struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	ImportMap  map[string]string
	Standard   bool
	ForTest    string
	Module     *struct{ Path, GoVersion string }
	Error      *struct{ Err string }

	once  sync.Once
	types *types.Package
	errs  []error
}

// checker type-checks one target's packages from source.
type checker struct {
	module string // the module whose packages are the roots
	target target
	fset   *token.FileSet
	pkgs   map[string]*listed
	sizes  types.Sizes
}

// list runs go list in dir for module's packages, their tests and
// everything they import, as tg builds them.
func list(t *testing.T, tg target, dir, module string) map[string]*listed {
	t.Helper()
	cgo := "0"
	if tg.cgo {
		cgo = "1"
	}
	cmd := exec.Command("go", "list", "-e", "-deps", "-test",
		"-json=ImportPath,Name,Dir,GoFiles,CgoFiles,ImportMap,Standard,ForTest,Module,Error", module+"/...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS="+tg.goos, "GOARCH="+tg.goarch, "CGO_ENABLED="+cgo, "GOFLAGS=-mod=readonly")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list for %s: %v\n%s", tg, err, stderr.Bytes())
	}
	pkgs := map[string]*listed{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		p := new(listed)
		if err := dec.Decode(p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list for %s: %v", tg, err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

func (c *checker) check(p *listed) (*types.Package, []error) {
	p.once.Do(func() {
		ours := p.Module != nil && p.Module.Path == c.module
		if p.Error != nil {
			p.errs = append(p.errs, errors.New(p.Error.Err))
			return
		}
		var files []*ast.File
		mode := parser.SkipObjectResolution
		if ours {
			mode |= parser.ParseComments
		}
		for _, name := range append(append([]string(nil), p.GoFiles...), p.CgoFiles...) {
			f, err := parser.ParseFile(c.fset, filepath.Join(p.Dir, name), nil, mode)
			if err != nil {
				p.errs = append(p.errs, err)
				continue
			}
			files = append(files, f)
		}
		conf := types.Config{
			Importer:         importerFunc(func(path string) (*types.Package, error) { return c.importFor(p, path) }),
			FakeImportC:      true,
			Sizes:            c.sizes,
			IgnoreFuncBodies: p.Standard,
			Error: func(err error) {
				te, _ := err.(types.Error)
				if te.Soft && !ours {
					return // unused imports and variables in other modules
				}
				if c.target.cgo && strings.Contains(te.Msg, "invalid type") {
					// A follow-on of the faked C package: its
					// declarations are invalid, and what uses them
					// too. An error that makes a Go type invalid
					// is reported where it happens.
					return
				}
				p.errs = append(p.errs, err)
			},
		}
		if p.Module != nil && p.Module.GoVersion != "" {
			conf.GoVersion = "go" + p.Module.GoVersion
		}
		p.types, _ = conf.Check(strings.TrimSuffix(p.ImportPath, " ["+p.ForTest+".test]"), c.fset, files, nil)
	})
	return p.types, p.errs
}

type importerFunc func(string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

func (c *checker) importFor(from *listed, path string) (*types.Package, error) {
	if path == "unsafe" {
		return types.Unsafe, nil
	}
	if m, ok := from.ImportMap[path]; ok {
		path = m
	}
	p, ok := c.pkgs[path]
	if !ok {
		return nil, fmt.Errorf("%s: go list gave no package %s", from.ImportPath, path)
	}
	pkg, errs := c.check(p)
	if pkg == nil || (len(errs) > 0 && !pkg.Complete()) {
		return nil, fmt.Errorf("%s does not type-check", path)
	}
	return pkg, nil
}

// root reports whether p, a package go list gave for tg, is one the test
// checks (with everything it imports): the module's packages and their
// tests, but for those a target does not build.
func root(tg target, module string, p *listed) bool {
	if p.Module == nil || p.Module.Path != module || strings.HasSuffix(p.ImportPath, ".test") {
		return false // another module's, or a generated test main
	}
	if tg.goos == "js" {
		path, _, _ := strings.Cut(p.ImportPath, " ")
		rel := strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
		for pkg := range notInBrowser {
			if rel == pkg || strings.HasPrefix(rel, pkg+"/") {
				return false
			}
		}
	}
	return true
}

// result is what typeCheck found for one target.
type result struct {
	roots, all int                // module packages and tests; packages in all
	errs       map[string][]error // by package, for every package with errors
	list       time.Duration      // go list's share of the time
}

// typeCheck type-checks module (in dir) for tg: every root (see root)
// and everything it imports.
func typeCheck(t *testing.T, tg target, dir, module string) result {
	t.Helper()
	start := time.Now()
	c := &checker{module: module, target: tg, fset: token.NewFileSet(), pkgs: list(t, tg, dir, module), sizes: types.SizesFor("gc", tg.goarch)}
	r := result{errs: map[string][]error{}, list: time.Since(start)}
	for _, p := range c.pkgs {
		if root(tg, module, p) {
			c.check(p)
			r.roots++
		}
	}
	// Every package checked, roots and what they import: an error in a
	// dependency on this target is a build failure too.
	for _, p := range c.pkgs {
		if p.types != nil || len(p.errs) > 0 {
			r.all++
		}
		if len(p.errs) > 0 {
			r.errs[p.ImportPath] = p.errs
		}
	}
	return r
}

// TestTypeCheck type-checks every package of the module, its tests and
// everything they import, from source, for each of targets: what `go vet`
// with GOOS, GOARCH and CGO_ENABLED set would say of the Go code, without
// a C toolchain for the target (cgo's C side is faked) and without
// compiling (this runs in CI beside the tests; compiling the module six
// more times would take minutes). Standard library function bodies are not
// checked (Go's own CI builds them for every port).
func TestTypeCheck(t *testing.T) {
	t.Parallel()
	dir := testmodels.Root(t)
	for _, tg := range targets {
		start := time.Now()
		r := typeCheck(t, tg, dir, Module)
		for pkg, errs := range r.errs {
			for i, err := range errs {
				if i == 10 {
					t.Errorf("%s: %s: ... %d more", tg, pkg, len(errs)-i)
					break
				}
				t.Errorf("%s: %s: %v", tg, pkg, err)
			}
		}
		t.Logf("%-32s %3d module packages and tests, %4d packages in all, %d with errors (go list %v, in all %v)",
			tg, r.roots, r.all, len(r.errs), r.list.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	}
}

// TestTypeCheckFails: typeCheck finds what only one target gets wrong (a
// Windows file calling a unix-only function), passes a cgo file whose C
// side exists only for the faked "C", and finds a wrong call in a file the
// cgo build alone compiles.
func TestTypeCheckFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, src := range map[string]string{
		"go.mod":       "module example.com/m\n\ngo 1.26\n",
		"m.go":         "package m\n\nfunc F() int { return 1 }\n",
		"m_windows.go": "package m\n\nimport \"syscall\"\n\nfunc G() error { return syscall.Mkfifo(\"x\", 0) }\n",
		"c.go":         "package m\n\n// int twice(int x) { return 2 * x; }\nimport \"C\"\n\nfunc H() int { return int(C.twice(2)) + F(1) }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	errText := func(r result) string {
		var b strings.Builder
		for _, errs := range r.errs {
			for _, err := range errs {
				b.WriteString(err.Error() + "\n")
			}
		}
		return b.String()
	}
	for _, tc := range []struct {
		tg   target
		want []string // substrings of the errors, none when empty
	}{
		{target{"linux", "amd64", false}, nil},
		{target{"linux", "amd64", true}, []string{"c.go", "too many arguments"}},
		{target{"windows", "amd64", false}, []string{"m_windows.go", "Mkfifo"}},
	} {
		got := errText(typeCheck(t, tc.tg, dir, "example.com/m"))
		if len(tc.want) == 0 && got != "" {
			t.Errorf("%s: errors %s, want none", tc.tg, got)
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: errors %q, want one with %q", tc.tg, got, w)
			}
		}
	}
}
