package arch_test

import (
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestYaRNGolden: arch2's qwen3 with YaRN RoPE scaling in its metadata
// (testdata/yarn/gen.sh: factor 4 over an original context of 32) against
// llama.cpp's logits on that file, on the CPU backend. llama.cpp's logits
// for the same prompt without the scaling are first shown to be far from
// them, so a loader that ignored the scaling could not pass.
func TestYaRNGolden(t *testing.T) {
	dir := filepath.Join(testmodels.Root(t), "testdata", "yarn")
	var g, plain testmodels.ArchGolden
	testmodels.DecodeJSON(t, filepath.Join(dir, "qwen3-yarn.golden.json"), &g)
	testmodels.DecodeJSON(t, filepath.Join(dir, "qwen3-plain.golden.json"), &plain)
	const tol = 1e-4
	if d := maxDiffRows(g.Logits, plain.Logits); d < 100*tol {
		t.Fatalf("YaRN moves llama.cpp's logits by only %.3g", d)
	}
	for _, fused := range []bool{false, true} {
		name := "qwen3-yarn"
		if fused {
			name += "/fused"
		}
		t.Run(name, func(t *testing.T) {
			ck, err := gguf.Load(filepath.Join(dir, "qwen3-yarn.gguf"))
			if err != nil {
				t.Fatal(err)
			}
			if ck.Config.RopeFactors == nil || ck.Config.RopeAttnFactor == 0 {
				t.Fatalf("no YaRN in the imported configuration: factors %v, attention factor %g", ck.Config.RopeFactors, ck.Config.RopeAttnFactor)
			}
			checkCheckpointMath(t, name, ck, g, tol, true, fused, nil, cpu.MathExact)
		})
	}
}
