package conformance

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/pipeline/arch"
	"github.com/gpurun/gpurun/tensors/llama2c"
)

// storiesLogitTol bounds the first generated position's logits against
// llama.cpp with an f32 KV cache. run.c and llama.cpp differ by 1.1e-5 at
// |logit| ~18; GPU kernels sum in yet another order (tree reductions, other
// tiling), so allow an order of magnitude more than that, as the CPU
// reference's own golden test does.
const storiesLogitTol = 1e-4

// ModelsDir is ../shared/models relative to the repository root (the
// directory holding go.mod above the working directory).
func ModelsDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "../shared/models")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

type storiesGolden struct {
	Cases []struct {
		Name         string    `json:"name"`
		PromptIDs    []int32   `json:"prompt_ids"`
		GeneratedIDs []int     `json:"generated_ids"`
		Margins      []float64 `json:"top1_top2_logit_margin"`
		LogitsF32KV  []float64 `json:"logits_first_generated_position_kv_f32"`
	} `json:"cases"`
}

// RunStories260K feeds each golden prompt to stories260K on the backend and
// checks the greedy continuation llama.cpp (and llama2.c's run.c) produced
// and the first generated position's logits.
func RunStories260K(t *testing.T, newBackend Factory) {
	dir := ModelsDir(t)
	raw, err := os.ReadFile(filepath.Join(dir, "stories260K.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var golden storiesGolden
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	ck, err := llama2c.Load(filepath.Join(dir, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	const prefillLen, maxLen = 16, 128
	cfg := &ck.Config
	for _, tc := range golden.Cases {
		t.Run(tc.Name, func(t *testing.T) {
			ctx := context.Background()
			be := newBackend(t)
			defer be.Close()
			w, err := be.LoadWeights(ctx, ck.Tensors)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Release()
			kv, err := be.NewKVCache(fusion.KVSpec{Layers: cfg.Layers, KVHeads: cfg.KVHeads, HeadDim: cfg.HeadDim, MaxLen: maxLen})
			if err != nil {
				t.Fatal(err)
			}
			defer kv.Release()
			compile := func(tokens int) gpu.Program {
				g, err := arch.Build(cfg, arch.BuildOptions{Tokens: tokens, MaxLen: maxLen})
				if err != nil {
					t.Fatal(err)
				}
				p, err := be.Compile(g, w, kv)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(p.Release)
				return p
			}
			prefill, decode := compile(prefillLen), compile(1)

			if err := prefill.Run(ctx, tc.PromptIDs, 0); err != nil {
				t.Fatal(err)
			}
			logits := make([]float32, cfg.VocabSize)
			if _, err := prefill.Logits(logits); err != nil {
				t.Fatal(err)
			}
			if tc.LogitsF32KV != nil {
				if len(tc.LogitsF32KV) != len(logits) {
					t.Fatalf("golden has %d logits, model vocab is %d", len(tc.LogitsF32KV), len(logits))
				}
				var worst float64
				for i, want := range tc.LogitsF32KV {
					worst = max(worst, math.Abs(float64(logits[i])-want))
				}
				t.Logf("first generated position: max |Δlogit| vs llama.cpp (f32 KV) = %.3g", worst)
				if worst > storiesLogitTol {
					t.Errorf("first-position logits differ from llama.cpp by %.3g (tolerance %g)", worst, storiesLogitTol)
				}
			}
			pos := len(tc.PromptIDs)
			for step, want := range tc.GeneratedIDs {
				if got := argmax(logits); got != want {
					t.Fatalf("step %d: greedy id %d, want %d (llama.cpp's top-1/top-2 margin %.4g)", step, got, want, tc.Margins[step])
				}
				if err := decode.Run(ctx, []int32{int32(want)}, pos); err != nil {
					t.Fatal(err)
				}
				pos++
				if _, err := decode.Logits(logits); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
