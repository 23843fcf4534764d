package arch_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors/model"
)

// TestFusedMatchesUnfused runs every real model through the CPU backend
// twice, from arch.Build's graph and from fusion.Fuse of it, and requires
// bitwise-equal logits: the fused ops evaluate the same additions and
// products in the same order. It also checks that fusion removed ops.
func TestFusedMatchesUnfused(t *testing.T) {
	dir := testmodels.Dir(t)
	load := map[string]func() (*model.Checkpoint, error){
		"stories260K": func() (*model.Checkpoint, error) { return llama2c.Load(filepath.Join(dir, "stories260K.bin")) },
	}
	for _, name := range []string{"llama", "gemma", "gemma2", "phi2", "phi2_fusedqkv", "falcon", "stablelm", "llama-q8_0", "llama-q4_0"} {
		load[name] = func() (*model.Checkpoint, error) { return gguf.Load(filepath.Join(dir, "arch", name+".gguf")) }
	}
	for name, ld := range load {
		t.Run(name, func(t *testing.T) {
			ck, err := ld()
			if err != nil {
				t.Fatal(err)
			}
			const prompt, decode = 7, 5
			var runs [2][][]float32
			for i, fused := range []bool{false, true} {
				runs[i] = runModel(t, &ck.Config, ck, fused, prompt, decode)
			}
			for s := range runs[0] {
				for j, v := range runs[0][s] {
					if w := runs[1][s][j]; math.Float32bits(v) != math.Float32bits(w) {
						t.Fatalf("step %d logit %d: unfused %v, fused %v", s, j, v, w)
					}
				}
			}
		})
	}
}

// runModel runs a prefill of prompt tokens (all logits) and decode steps on
// the CPU backend and returns the logits of every step.
func runModel(t *testing.T, cfg *model.Config, ck *model.Checkpoint, fused bool, prompt, decode int) [][]float32 {
	t.Helper()
	ctx := context.Background()
	be := cpu.New(cpu.Options{})
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	if fused {
		g, err := arch.Build(cfg, arch.BuildOptions{Tokens: prompt, MaxLen: 64, AllLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		if f := fusion.Fuse(g); len(f.Ops) >= len(g.Ops) {
			t.Fatalf("fusion left %d of %d ops", len(f.Ops), len(g.Ops))
		}
	}
	compile := testmodels.Compiler(t, be, w, cfg, arch.BuildOptions{MaxLen: 64}, fused)
	pre, dec := compile(prompt, true), compile(1, false)
	defer pre.Release()
	defer dec.Release()
	toks := make([]int32, prompt)
	for i := range toks {
		toks[i] = int32((i*37 + 5) % cfg.VocabSize)
	}
	var out [][]float32
	logits := func(p gpu.Program, rows int) {
		dst := make([]float32, rows*cfg.VocabSize)
		if _, err := p.Logits(dst); err != nil {
			t.Fatal(err)
		}
		out = append(out, dst)
	}
	if err := pre.Run(ctx, toks, 0); err != nil {
		t.Fatal(err)
	}
	logits(pre, prompt)
	for s := range decode {
		if err := dec.Run(ctx, []int32{int32((s*11 + 3) % cfg.VocabSize)}, prompt+s); err != nil {
			t.Fatal(err)
		}
		logits(dec, 1)
	}
	return out
}
