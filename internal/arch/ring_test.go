package arch_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors/model"
)

// TestRingCacheExact: sliding-window layers on ring caches
// (BuildOptions.RingTokens) give bit for bit the logits of a full cache, on
// the CPU backend, over a 12-token prompt and 24 decode steps that wrap
// the rings (window 8: rings of 19 positions), unfused and fused, with f32
// and f16 caches: gemma3 (5 of 6 layers local), gemma2 (even layers) and
// llama3 given a Mistral-style window on every layer.
func TestRingCacheExact(t *testing.T) {
	for _, tc := range []struct {
		name, path string
		golden     testmodels.ArchGolden
		window     int // set a window on every layer (0: the model's own)
	}{
		{"gemma3", testmodels.Path(t, "arch2", "gemma3.gguf"), testmodels.Arch2(t, "gemma3").ArchGolden, 0},
		{"gemma2", filepath.Join(testmodels.Path(t, "arch"), "gemma2.gguf"), testmodels.Arch(t, "gemma2"), 0},
		{"llama3_window", testmodels.Path(t, "arch2", "llama3.gguf"), testmodels.Arch2(t, "llama3").ArchGolden, 8},
	} {
		ck, err := gguf.Load(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if tc.window > 0 {
			ck.Config.SlidingWindow, ck.Config.SlidingLayers = tc.window, "all"
		}
		for _, fused := range []bool{false, true} {
			for _, f16 := range []bool{false, true} {
				name := tc.name
				if fused {
					name += "/fused"
				}
				if f16 {
					name += "/kv16"
				}
				t.Run(name, func(t *testing.T) {
					n := len(tc.golden.PromptIDs)
					full := runSteps(t, ck, tc.golden, fused, f16, 0)
					ring := runSteps(t, ck, tc.golden, fused, f16, n)
					for i := range full {
						if math.Float32bits(full[i]) != math.Float32bits(ring[i]) {
							t.Fatalf("logit %d (row %d): ring %v, full cache %v", i, i/ck.Config.VocabSize, ring[i], full[i])
						}
					}
				})
			}
		}
	}
}

// runSteps runs the golden's prompt and its 24 greedy ids and returns
// every logit, on a cache with rings for ringTokens (0: none).
func runSteps(t *testing.T, ck *model.Checkpoint, g testmodels.ArchGolden, fused, f16 bool, ringTokens int) []float32 {
	t.Helper()
	ctx := context.Background()
	be := cpu.New(cpu.Options{})
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	const maxLen = 128
	n := len(g.PromptIDs)
	opts := arch.BuildOptions{MaxLen: maxLen, KVF16: f16, RingTokens: ringTokens}
	spec := arch.KVSpec(&ck.Config, opts)
	if (ringTokens > 0) != (spec.Ring != nil) {
		t.Fatalf("ring tokens %d, rings %v", ringTokens, spec.Ring)
	}
	for _, r := range spec.Ring {
		if r != 0 && r >= n+len(g.GreedyIDs) {
			t.Fatalf("a ring of %d positions does not wrap in %d steps", r, n+len(g.GreedyIDs))
		}
	}
	kv, err := be.NewKVCache(spec)
	if err != nil {
		t.Fatal(err)
	}
	compile := func(tokens int, all bool) func([]int32, int) []float32 {
		o := opts
		o.Tokens, o.AllLogits = tokens, all
		graph, err := arch.Build(&ck.Config, o)
		if err != nil {
			t.Fatal(err)
		}
		if fused {
			graph = fusion.Fuse(graph)
		}
		p, err := be.Compile(graph, w, kv)
		if err != nil {
			t.Fatal(err)
		}
		return func(ids []int32, pos int) []float32 {
			if err := p.Run(ctx, ids, pos); err != nil {
				t.Fatal(err)
			}
			rows := 1
			if all {
				rows = len(ids)
			}
			out := make([]float32, rows*ck.Config.VocabSize)
			if _, err := p.Logits(out); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	prefill, decode := compile(n, true), compile(1, false)
	logits := prefill(testmodels.IDs32(g.PromptIDs), 0)
	for i, id := range g.GreedyIDs {
		logits = append(logits, decode([]int32{int32(id)}, n+i)...)
	}
	return logits
}
