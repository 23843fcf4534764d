// Package layers holds the module's layering rules: which of its packages
// may import which. The test beside it lists every import of every package
// in the module (go list, on several target platforms) and fails on an edge
// the table does not allow, or on a package no layer claims.
//
// From the bottom up: shaders, tensors, fusion, internal/sampler and its random
// numbers are leaves; gpu (the Backend and Device interfaces) sits on them;
// the devices (internal/vulkan, internal/webgpu) and the backends (internal/backend/...)
// implement gpu; pipeline runs a model on any gpu.Backend its caller gives
// it, so it imports no backend and no device; the module root
// (package gpurun) and the commands choose and open the backends.
package layers

import (
	"fmt"
	"slices"
	"strings"
)

// Module is the module path the table's package paths are relative to.
const Module = "github.com/gpurun/gpurun"

// Layer is a set of packages and the layers their non-test files may
// import. Packages of one layer may import each other.
type Layer struct {
	// Name names the layer in May lists and in errors.
	Name string
	// Packages are module-relative package paths; each claims the package
	// and everything below it, the longest claiming path winning. "" is
	// the module root alone.
	Packages []string
	// May lists the layers this one may import; "*" is every layer.
	May []string
	// TestOnly: only test files (and other test-only layers) may import
	// this layer.
	TestOnly bool
	// Why says why the layer may import what it does.
	Why string
}

// Table is the module's layering. Test files may import any layer (a test
// checks a layer against others: the CPU reference, real models built by
// internal/arch, the backends the root opens); only the Go toolchain's
// own rule against import cycles holds for them.
var Table = []Layer{
	{Name: "shaders", Packages: []string{"shaders"},
		Why: "the kernels' sources and their contracts: a leaf"},
	{Name: "tensors", Packages: []string{"tensors", "internal/checkpoint", "internal/convert", "internal/gguf",
		"internal/hf", "internal/llama2c", "internal/lora", "internal/modelfile", "internal/safetensors",
		"internal/synthetic", "internal/mmap", "internal/vision", "internal/audio"},
		Why: "tensors and the model file formats (their readers and writers internal): a leaf"},
	{Name: "rng", Packages: []string{"internal/philox"},
		Why: "the counter-based random numbers host and device sampling share: a leaf"},
	{Name: "sampler", Packages: []string{"internal/sampler"}, May: []string{"rng"},
		Why: "host sampling, shared by the backends and the pipeline: a leaf but for its random numbers"},
	{Name: "fusion", Packages: []string{"fusion"}, May: []string{"tensors"},
		Why: "the op graph and its rewrites"},
	{Name: "gpu", Packages: []string{"gpu", "internal/tuning", "internal/memcount"}, May: []string{"shaders", "fusion", "tensors"},
		Why: "the Backend and Device interfaces, over graphs of tensors"},
	{Name: "devices", Packages: []string{"internal/vulkan", "internal/webgpu"}, May: []string{"gpu", "shaders"},
		Why: "gpu.Device implementations; they load the shaders' compiled modules"},
	{Name: "backend/compute", Packages: []string{"internal/backend/compute"}, May: []string{"gpu", "shaders", "fusion", "tensors", "sampler"},
		Why: "the GPU backend, over any gpu.Device"},
	{Name: "backend/cpu", Packages: []string{"internal/backend/cpu"}, May: []string{"gpu", "shaders", "fusion", "tensors", "sampler"},
		Why: "the CPU backend"},
	{Name: "pipeline", Packages: []string{"pipeline", "internal/arch", "internal/bpe"}, May: []string{"gpu", "fusion", "tensors", "sampler", "rng"},
		Why: "runs a model on the gpu.Backend its caller gives it: no backend, no device (random numbers for speculative decoding's acceptance draws)"},
	{Name: "root", Packages: []string{""}, May: []string{"*"},
		Why: "package gpurun chooses and opens the backends (WithBackend, OpenBackend)"},
	{Name: "webpage", Packages: []string{"internal/webpage"},
		Why: "gpurun-web's page, its server and its wasm build: a leaf (the standard library)"},
	{Name: "hub", Packages: []string{"internal/hub"},
		Why: "downloads GGUF files from a Hugging Face-compatible hub into its cache: a leaf (the standard library)"},
	{Name: "browser", Packages: []string{"internal/browser"}, May: []string{"webpage"},
		Why: "drives gpurun-web's page in headless Chromium for bench and the browser tests"},
	{Name: "cmd", Packages: []string{"cmd"}, May: []string{"*"},
		Why: "the commands"},
	{Name: "conformance", Packages: []string{"internal/conformance"}, TestOnly: true,
		May: []string{"gpu", "fusion", "tensors", "backend/cpu", "testsupport"},
		Why: "the backends' parity tables against the CPU reference, below the pipeline: a test passes in the model graph builder (GraphBuilder)"},
	{Name: "testsupport", TestOnly: true, May: []string{"*"},
		Packages: []string{"internal/ci", "internal/gputest", "internal/testmodels", "internal/tokref",
			"internal/qemutest", "internal/badsampling", "internal/layers", "internal/platforms",
			"cmd/gpurun/internal/benchreport/reporttest", "internal/hub/hubtest"},
		Why: "helpers for tests, which may import any layer"},
}

// Edge is one import: From imports To, both full import paths.
type Edge struct {
	From, To string
	// Test: the import is in a test file of From.
	Test bool
}

// LayerOf returns the layer claiming pkg (a full import path), or nil when
// pkg is outside the module or no layer claims it.
func LayerOf(table []Layer, pkg string) *Layer {
	rel, ok := relative(pkg)
	if !ok {
		return nil
	}
	var best *Layer
	bestLen := -1
	for i := range table {
		for _, p := range table[i].Packages {
			if claims(p, rel) && len(p) > bestLen {
				best, bestLen = &table[i], len(p)
			}
		}
	}
	return best
}

// Check returns one error for each module-internal edge the table does not
// allow and for each module package no layer claims.
func Check(table []Layer, edges []Edge) []error {
	var errs []error
	unclaimed := map[string]bool{}
	layerOf := func(pkg string) *Layer {
		l := LayerOf(table, pkg)
		if l == nil && !unclaimed[pkg] {
			unclaimed[pkg] = true
			errs = append(errs, fmt.Errorf("package %s is in no layer: add it to layers.Table", pkg))
		}
		return l
	}
	for _, e := range edges {
		if _, ok := relative(e.To); !ok {
			continue // the standard library or another module
		}
		if _, ok := relative(e.From); !ok {
			continue
		}
		from, to := layerOf(e.From), layerOf(e.To)
		if from == nil || to == nil || from == to {
			continue
		}
		if to.TestOnly && !e.Test && !from.TestOnly {
			errs = append(errs, fmt.Errorf("%s imports %s (layer %s), which only tests may import", e.From, e.To, to.Name))
			continue
		}
		if e.Test || slices.Contains(from.May, "*") || slices.Contains(from.May, to.Name) {
			continue
		}
		errs = append(errs, fmt.Errorf("%s (layer %s) imports %s (layer %s): %s may import only %v",
			e.From, from.Name, e.To, to.Name, from.Name, from.May))
	}
	return errs
}

// relative returns pkg relative to Module ("" for the root), and whether
// pkg is in the module.
func relative(pkg string) (string, bool) {
	if pkg == Module {
		return "", true
	}
	rel, ok := strings.CutPrefix(pkg, Module+"/")
	return rel, ok
}

// claims reports whether the table path p claims the relative path rel.
// The root claims only itself.
func claims(p, rel string) bool {
	return rel == p || p != "" && strings.HasPrefix(rel, p+"/")
}
