package layers

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Capabilities are data: what a backend or device can do is its gpu.Caps,
// read once, not a type assertion on an optional interface, nor a
// comparison of its name. These tests hold the module's Go files to that.

// capsFile is the one file that may assert on optional gpu interfaces
// (gpu.Caps lives there; today it asserts on none).
const capsFile = "gpu/caps.go"

// mainInterfaces are the gpu interfaces everything implements; an
// interface package gpu declares beyond them is optional.
var mainInterfaces = []string{"Backend", "Device", "Program", "BatchProgram", "Weights", "KVCache", "Kernel", "Buffer", "Commands"}

// formerOptional are the optional interfaces gpu had before gpu.Caps
// (12): a file that declares or asserts on one again is caught even
// outside package gpu.
var formerOptional = []string{"BatchBackend", "KVCopier", "TokenMasker", "ContextWaiter", "TimestampReader", "StepRunner",
	"SamplingSetter", "Profiler", "LoRAHalf", "FusionBackend", "HostBufferDevice", "MemoryReporter"}

// backendNames are the backends' Info().Backend names.
var backendNames = []string{"cpu", "vulkan", "webgpu"}

// nameFreeDirs are the module folders whose non-test files compare no
// backend name (they branch on gpu.Caps).
var nameFreeDirs = []string{"pipeline", "internal/backend/compute"}

const gpuImport = Module + "/gpu"

// moduleRoot is the module's folder, two above this package's.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	return root
}

// gpuInterfaces returns the interfaces package gpu (the .go files of dir,
// tests aside) declares, with their methods.
func gpuInterfaces(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				it, ok := ts.Type.(*ast.InterfaceType)
				if !ok {
					continue
				}
				var methods []string
				for _, m := range it.Methods.List {
					for _, n := range m.Names {
						methods = append(methods, n.Name)
					}
				}
				out[ts.Name.Name] = methods
			}
		}
	}
	return out
}

// capsRules are what checkFile looks for.
type capsRules struct {
	optional map[string]bool // gpu's optional interfaces, by name
	methods  map[string]bool // methods of gpu's interfaces an anonymous interface must not name in an assertion
}

func newCapsRules(ifaces map[string][]string) capsRules {
	r := capsRules{optional: map[string]bool{}, methods: map[string]bool{}}
	for name, methods := range ifaces {
		if !slices.Contains(mainInterfaces, name) {
			r.optional[name] = true
		}
		for _, m := range methods {
			// Too common to say anything about gpu.
			if m != "Release" && m != "Close" && m != "Size" {
				r.methods[m] = true
			}
		}
	}
	for _, name := range formerOptional {
		r.optional[name] = true
	}
	return r
}

// checkFile returns a line for each type assertion, type switch case or
// declaration in the file src (at path rel, module-relative, of package
// pkg) on an optional gpu interface, and, where names is set, for each
// comparison of a backend name.
func checkFile(rules capsRules, rel string, src []byte, names bool) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	inGPU := filepath.ToSlash(filepath.Dir(rel)) == "gpu" && f.Name.Name == "gpu"
	gpuName := "" // the file's name for package gpu
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == gpuImport {
			gpuName = "gpu"
			if imp.Name != nil {
				gpuName = imp.Name.Name
			}
		}
	}
	var out []string
	report := func(n ast.Node, format string) {
		out = append(out, fset.Position(n.Pos()).String()+": "+format)
	}
	// optional names the optional gpu interface e denotes, "" if none.
	optional := func(e ast.Expr) string {
		switch e := ast.Unparen(e).(type) {
		case *ast.Ident:
			if inGPU && rules.optional[e.Name] {
				return "gpu." + e.Name
			}
		case *ast.SelectorExpr:
			if x, ok := e.X.(*ast.Ident); ok && gpuName != "" && x.Name == gpuName && rules.optional[e.Sel.Name] {
				return "gpu." + e.Sel.Name
			}
			if slices.Contains(formerOptional, e.Sel.Name) {
				return e.Sel.Name // an alias of a former one elsewhere
			}
		case *ast.InterfaceType:
			for _, m := range e.Methods.List {
				for _, n := range m.Names {
					if rules.methods[n.Name] {
						return "an interface with gpu's method " + n.Name
					}
				}
			}
		}
		return ""
	}
	isName := func(e ast.Expr) (string, bool) {
		lit, ok := ast.Unparen(e).(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(lit.Value)
		return s, err == nil && slices.Contains(backendNames, strings.ToLower(s))
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.TypeAssertExpr:
			if n.Type != nil { // nil: the x.(type) of a switch
				if name := optional(n.Type); name != "" {
					report(n, "type assertion to "+name)
				}
			}
		case *ast.TypeSwitchStmt:
			for _, c := range n.Body.List {
				for _, e := range c.(*ast.CaseClause).List {
					if name := optional(e); name != "" {
						report(e, "type switch case "+name)
					}
				}
			}
		case *ast.TypeSpec:
			if !inGPU && slices.Contains(formerOptional, n.Name.Name) && optional(n.Type) != "" {
				report(n, "declares "+n.Name.Name+" again")
			}
		case *ast.BinaryExpr:
			if names && (n.Op == token.EQL || n.Op == token.NEQ) {
				for _, side := range []ast.Expr{n.X, n.Y} {
					if s, ok := isName(side); ok {
						report(n, "compares a backend name ("+strconv.Quote(s)+")")
						break
					}
				}
			}
		case *ast.SwitchStmt:
			if names && n.Tag != nil {
				for _, c := range n.Body.List {
					for _, e := range c.(*ast.CaseClause).List {
						if s, ok := isName(e); ok {
							report(e, "switches on a backend name ("+strconv.Quote(s)+")")
						}
					}
				}
			}
		case *ast.CallExpr:
			// strings.EqualFold(info.Backend, "vulkan") and the like.
			if sel, ok := n.Fun.(*ast.SelectorExpr); names && ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "strings" {
					for _, a := range n.Args {
						if s, ok := isName(a); ok {
							report(n, "compares a backend name ("+strconv.Quote(s)+") with strings."+sel.Sel.Name)
						}
					}
				}
			}
		}
		return true
	})
	return out, nil
}

// TestCapsAreData: no Go file of the module (tests included), but
// gpu/caps.go, asserts on or switches over an optional gpu interface, and
// no non-test file of pipeline or the GPU backend compares a backend's
// name: they read gpu.Caps.
func TestCapsAreData(t *testing.T) {
	root := moduleRoot(t)
	ifaces := gpuInterfaces(t, filepath.Join(root, "gpu"))
	for _, name := range mainInterfaces {
		if _, ok := ifaces[name]; !ok {
			t.Fatalf("package gpu declares no interface %s: is the module at %s?", name, root)
		}
	}
	var optional []string
	for name := range ifaces {
		if !slices.Contains(mainInterfaces, name) {
			optional = append(optional, name)
		}
	}
	slices.Sort(optional)
	t.Logf("gpu declares %d optional interfaces %v (%d before gpu.Caps)", len(optional), optional, len(formerOptional))
	rules := newCapsRules(ifaces)
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == capsFile {
			return nil
		}
		names := false
		if !strings.HasSuffix(rel, "_test.go") {
			for _, dir := range nameFreeDirs {
				if strings.HasPrefix(rel, dir+"/") {
					names = true
				}
			}
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		found, err := checkFile(rules, rel, src, names)
		if err != nil {
			return err
		}
		files++
		for _, f := range found {
			t.Error(f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 300 {
		t.Fatalf("checked %d Go files: is the module at %s?", files, root)
	}
}

// TestCheckFile: the check finds each kind of use it forbids, under any
// name for package gpu, and passes the ones it allows.
func TestCheckFile(t *testing.T) {
	rules := newCapsRules(map[string][]string{
		"Backend": {"Info", "Caps", "Close"}, "Program": {"Run", "Release"}, "Device": {"Info"},
		"Weights": nil, "KVCache": nil, "Kernel": nil, "Buffer": {"Size"}, "Commands": nil, "BatchProgram": nil,
		"Stepper": {"RunSteps"},
	})
	const head = "package p\nimport \"" + gpuImport + "\"\n"
	for _, tc := range []struct {
		name, rel, src string
		names          bool
		want           []string
	}{
		{"assertion", "pipeline/a.go", head + "func f(p gpu.Program) { _, _ = p.(gpu.Stepper) }", true, []string{"type assertion to gpu.Stepper"}},
		{"former interface", "cmd/a.go", head + "func f(b gpu.Backend) { _, _ = b.(gpu.MemoryReporter) }", false, []string{"type assertion to gpu.MemoryReporter"}},
		{"renamed import", "pipeline/a_test.go", "package p\nimport g \"" + gpuImport + "\"\nfunc f(p g.Program) { _ = p.(g.Stepper) }", false, []string{"type assertion to gpu.Stepper"}},
		{"type switch", "internal/backend/compute/a.go", head + "func f(p any) { switch p.(type) { case gpu.Stepper: } }", true, []string{"type switch case gpu.Stepper"}},
		{"anonymous", "a.go", head + "func f(p gpu.Program) { _, _ = p.(interface{ RunSteps() }) }", false, []string{"gpu's method RunSteps"}},
		{"in package gpu", "gpu/x.go", "package gpu\nfunc f(p Program) { _, _ = p.(Stepper) }", false, []string{"type assertion to gpu.Stepper"}},
		{"alias elsewhere", "internal/backend/compute/a.go", head + "type Profiler = gpu.Profiler", false, []string{"declares Profiler again"}},
		{"name compared", "pipeline/a.go", head + "func f(b gpu.Backend) bool { return b.Info().Backend == \"cpu\" }", true, []string{`compares a backend name ("cpu")`}},
		{"name on the left", "pipeline/a.go", head + "func f(b gpu.Backend) bool { return \"Vulkan\" != b.Info().Backend }", true, []string{`("Vulkan")`}},
		{"name switch", "internal/backend/compute/a.go", head + "func f(i gpu.Info) { switch i.Backend { case \"webgpu\": } }", true, []string{`switches on a backend name ("webgpu")`}},
		{"name by strings", "pipeline/a.go", head + "import \"strings\"\nfunc f(i gpu.Info) bool { return strings.EqualFold(i.Backend, \"vulkan\") }", true, []string{"strings.EqualFold"}},
		// Allowed.
		{"main interface", "a.go", head + "func f(p gpu.BatchProgram) { _, _ = p.(gpu.Program) }", false, nil},
		{"concrete type", "a.go", head + "type d struct{}\nfunc f(x gpu.Device) { _, _ = x.(*d) }", false, nil},
		{"other package's interface", "a.go", "package p\nimport \"io\"\nfunc f(x any) { _, _ = x.(io.Closer) }", false, nil},
		{"release", "a.go", "package p\nfunc f(x any) { _, _ = x.(interface{ Release() }) }", false, nil},
		{"names outside the rule", "cmd/a.go", head + "func f(i gpu.Info) bool { return i.Backend == \"cpu\" }", false, nil},
		{"other strings", "pipeline/a.go", "package p\nfunc f(s string) bool { return s == \"auto\" }", true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := checkFile(rules, tc.rel, []byte(tc.src), tc.names)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("found %q, want %d", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("found %q, want %q", got[i], w)
				}
			}
		})
	}
}
