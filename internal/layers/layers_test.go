package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// platforms are the targets whose files the import test reads: build tags
// select different files (the browser build, SIMD kernels, the Vulkan
// loader per system).
var platforms = []struct{ goos, goarch string }{
	{"linux", "amd64"},
	{"linux", "arm64"},
	{"darwin", "arm64"},
	{"windows", "amd64"},
	{"js", "wasm"},
}

// moduleEdges lists every import of every package in the module on each
// platform, as go list reports it.
func moduleEdges(t *testing.T) []Edge {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command lists the imports: %v", err)
	}
	seen := map[Edge]bool{}
	var edges []Edge
	for _, p := range platforms {
		cmd := exec.Command(goTool, "list", "-e", "-json=ImportPath,Imports,TestImports,XTestImports", Module+"/...")
		cmd.Env = append(os.Environ(), "GOOS="+p.goos, "GOARCH="+p.goarch, "CGO_ENABLED=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go list on %s/%s: %v\n%s", p.goos, p.goarch, err, stderr.Bytes())
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var pkg struct {
				ImportPath                         string
				Imports, TestImports, XTestImports []string
			}
			if err := dec.Decode(&pkg); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("go list on %s/%s: %v", p.goos, p.goarch, err)
			}
			add := func(imports []string, test bool) {
				for _, to := range imports {
					e := Edge{From: pkg.ImportPath, To: to, Test: test}
					if !seen[e] {
						seen[e] = true
						edges = append(edges, e)
					}
				}
			}
			add(pkg.Imports, false)
			add(pkg.TestImports, true)
			add(pkg.XTestImports, true)
		}
	}
	return edges
}

// TestModuleLayers: every import in the module points the way Table allows.
func TestModuleLayers(t *testing.T) {
	edges := moduleEdges(t)
	if len(edges) < 100 {
		t.Fatalf("go list found only %d imports: is the module listed?", len(edges))
	}
	for _, err := range Check(Table, edges) {
		t.Error(err)
	}
}

// TestCheck: Check allows the edges the table allows and reports the ones it
// does not, with the layers named.
func TestCheck(t *testing.T) {
	m := func(rel string) string {
		if rel == "" {
			return Module
		}
		return Module + "/" + rel
	}
	tests := []struct {
		name  string
		edges []Edge
		want  []string // a substring of each error, in order
	}{
		{"pipeline on gpu", []Edge{{From: m("pipeline"), To: m("gpu")}}, nil},
		{"pipeline on the sampler", []Edge{{From: m("internal/arch"), To: m("internal/sampler")}}, nil},
		{"within a layer", []Edge{{From: m("pipeline/serve"), To: m("pipeline/chat")}}, nil},
		{"root on a backend", []Edge{{From: m(""), To: m("internal/backend/cpu")}}, nil},
		{"cmd on a device", []Edge{{From: m("cmd/gpurun"), To: m("internal/vulkan")}}, nil},
		{"standard library", []Edge{{From: m("shaders"), To: "strings"}}, nil},
		{"another module", []Edge{{From: m("internal/vulkan"), To: "github.com/vulkan-go/vulkan"}}, nil},
		{"a test on anything", []Edge{{From: m("internal/backend/compute"), To: m("internal/arch"), Test: true}}, nil},
		{"a test on test support", []Edge{{From: m("internal/vulkan"), To: m("internal/gputest"), Test: true}}, nil},
		{"pipeline on a backend", []Edge{{From: m("pipeline"), To: m("internal/backend/cpu")}},
			[]string{"(layer pipeline) imports github.com/gpurun/gpurun/internal/backend/cpu (layer backend/cpu)"}},
		{"pipeline on a device", []Edge{{From: m("pipeline"), To: m("internal/vulkan")}}, []string{"(layer devices)"}},
		{"gpu on the pipeline", []Edge{{From: m("internal/backend/compute"), To: m("internal/arch")}}, []string{"(layer backend/compute) imports"}},
		{"shaders on gpu", []Edge{{From: m("shaders"), To: m("gpu")}}, []string{"(layer shaders) imports"}},
		{"sampler on gpu", []Edge{{From: m("internal/sampler"), To: m("gpu")}}, []string{"(layer sampler) imports"}},
		{"a device on a backend", []Edge{{From: m("internal/webgpu"), To: m("internal/backend/compute")}}, []string{"(layer devices) imports"}},
		{"one backend on the other", []Edge{{From: m("internal/backend/compute"), To: m("internal/backend/cpu")}}, []string{"(layer backend/cpu)"}},
		{"conformance on the pipeline", []Edge{{From: m("internal/conformance"), To: m("internal/arch")}}, []string{"(layer conformance) imports"}},
		{"the browser driver on a command", []Edge{{From: m("internal/browser"), To: m("cmd/gpurun")}}, []string{"(layer browser) imports"}},
		{"code on test support", []Edge{{From: m("cmd/gpurun"), To: m("internal/ci")}}, []string{"which only tests may import"}},
		{"an unknown package", []Edge{{From: m("newpkg"), To: m("gpu")}, {From: m("newpkg/sub"), To: m("gpu")}},
			[]string{"package github.com/gpurun/gpurun/newpkg is in no layer", "package github.com/gpurun/gpurun/newpkg/sub is in no layer"}},
		{"several", []Edge{{From: m("pipeline"), To: m("internal/webgpu")}, {From: m("pipeline"), To: m("fusion")}, {From: m("internal/gguf"), To: m("fusion")}},
			[]string{"internal/webgpu", "(layer tensors) imports"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := Check(Table, tt.edges)
			if len(errs) != len(tt.want) {
				t.Fatalf("Check = %v, want %d errors", errs, len(tt.want))
			}
			for i, err := range errs {
				if !strings.Contains(err.Error(), tt.want[i]) {
					t.Errorf("error %d = %q, want it to contain %q", i, err, tt.want[i])
				}
			}
		})
	}
}
