package shaders

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// The kernel set's budget (issue 26): one set for every device, so the
// WGSL entry points and the pipelines the registry can build (every module
// times the entry points it holds: a plain family's kernels once, a
// specialized family's in each variant holding them) stay few enough to
// read, test and tune. Issue 40's recurrent layers moved it from 40 to 48:
// the short convolution (LFM2), the gated delta rule's three forms
// (Qwen3.5's conv, recurrent and chunked) and Mamba-2's conv and scan
// (Granite 4.0 H) are work no other kernel does. Issue 41 moved the
// pipelines from 150 to 160: the fused Q/K/V's subgroup form (one entry
// point, a module per weight layout, as matvec_sg beside matvec_lanes).
const (
	maxEntryPoints = 48
	maxPipelines   = 160
)

// TestKernelBudget counts the WGSL entry points and the compiled pipeline
// variants (Specs: modules x their kernels, Extended variants
// included), prints both per family, and fails above the budget.
func TestKernelBudget(t *testing.T) {
	specs, err := Specs()
	if err != nil {
		t.Fatal(err)
	}
	fams, err := Families()
	if err != nil {
		t.Fatal(err)
	}
	entries := len(Names())
	modules, err := Modules()
	if err != nil {
		t.Fatal(err)
	}
	perFamily := map[string]int{}
	for _, s := range specs {
		perFamily[kernelFamily(t, s.Entry)]++
	}
	var lines []string
	for _, f := range fams {
		lines = append(lines, fmt.Sprintf("%s: %d entry points, %d pipelines", f.Name, len(f.Kernels), perFamily[f.Name]))
	}
	sort.Strings(lines)
	t.Logf("kernel set: %d WGSL entry points, %d modules, %d pipeline variants (budget %d and %d)\n  %s",
		entries, len(modules), len(specs), maxEntryPoints, maxPipelines, strings.Join(lines, "\n  "))
	if entries > maxEntryPoints {
		t.Errorf("%d WGSL entry points, over the budget of %d", entries, maxEntryPoints)
	}
	if len(specs) > maxPipelines {
		t.Errorf("%d pipeline variants, over the budget of %d", len(specs), maxPipelines)
	}
}

func kernelFamily(t *testing.T, kernel string) string {
	t.Helper()
	f, ok := load().kernels[kernel]
	if !ok {
		t.Fatalf("kernel %s in no family", kernel)
	}
	return f.Name
}
