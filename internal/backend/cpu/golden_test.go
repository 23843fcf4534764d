package cpu_test

import (
	"context"
	"math"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors/model"
)

// runner drives a prefill and a decode program over one cache, greedily.
type runner struct {
	prefill, decode gpu.Program
	vocab           int
}

func newRunner(t testing.TB, ck *model.Checkpoint, be gpu.Backend, prefillLen, maxLen int) *runner {
	t.Helper()
	ctx := context.Background()
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := be.NewKVCache(fusionKV(&ck.Config, maxLen))
	if err != nil {
		t.Fatal(err)
	}
	r := &runner{vocab: ck.Config.VocabSize}
	for _, spec := range []struct {
		tokens int
		dst    *gpu.Program
	}{{prefillLen, &r.prefill}, {1, &r.decode}} {
		g, err := arch.Build(&ck.Config, arch.BuildOptions{Tokens: spec.tokens, MaxLen: maxLen})
		if err != nil {
			t.Fatal(err)
		}
		p, err := be.Compile(g, w, kv)
		if err != nil {
			t.Fatal(err)
		}
		*spec.dst = p
	}
	return r
}

// TestStories260KGolden feeds each golden prompt to stories260K and checks
// the 64 greedy ids llama.cpp (and llama2.c run.c) produced, and the logits
// of the first generated position against llama.cpp with an f32 KV cache.
func TestStories260KGolden(t *testing.T) {
	cases := testmodels.StoriesCases(t)
	ck, err := llama2c.Load(testmodels.Path(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	// run.c and llama.cpp with an F32 cache differ by 1.1e-5 at |logit| ~18;
	// allow an order of magnitude more for summation order.
	const logitTol = 1e-4
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			ctx := context.Background()
			r := newRunner(t, ck, cpu.New(cpu.Options{}), 16, 128)
			prompt := testmodels.IDs32(tc.PromptIDs)
			if err := r.prefill.Run(ctx, prompt, 0); err != nil {
				t.Fatal(err)
			}
			logits := make([]float32, r.vocab)
			if _, err := r.prefill.Logits(logits); err != nil {
				t.Fatal(err)
			}
			if tc.LogitsF32KV == nil {
				t.Logf("no f32-KV reference logits for this case; checking ids only")
			} else {
				var maxDiff float64
				for i, want := range tc.LogitsF32KV {
					maxDiff = max(maxDiff, math.Abs(float64(logits[i])-want))
				}
				t.Logf("first generated position: max |Δlogit| vs llama.cpp (f32 KV) = %.3g", maxDiff)
				if len(tc.LogitsF32KV) != r.vocab || maxDiff > logitTol {
					t.Errorf("first-position logits differ by %.3g (tolerance %g, %d reference values)", maxDiff, logitTol, len(tc.LogitsF32KV))
				}
			}
			pos := len(prompt)
			for step, want := range tc.GeneratedIDs {
				got := testmodels.Argmax(logits)
				if got != want {
					t.Fatalf("step %d: greedy id %d, want %d (reference margin %.4g)", step, got, want, tc.Margins[step])
				}
				if err := r.decode.Run(ctx, []int32{int32(got)}, pos); err != nil {
					t.Fatal(err)
				}
				pos++
				if _, err := r.decode.Logits(logits); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
