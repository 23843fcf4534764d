package synthetic

import (
	"context"
	"math"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors/model"
)

// TestShrunkSpecsRun runs every architecture, shrunk, in every storage mode
// on the CPU backend: a prefill of 8 tokens and 3 greedy decode steps, each
// giving finite logits that are not all equal and whose spread shows the
// activations neither vanished nor exploded.
func TestShrunkSpecsRun(t *testing.T) {
	ctx := context.Background()
	be := cpu.New(cpu.Options{})
	defer be.Close()
	for _, tc := range testConfigs() {
		for _, q := range quantModes {
			t.Run(tc.name+"/"+q, func(t *testing.T) {
				ck, err := Checkpoint(tc.cfg, Options{Quant: q, Seed: 11})
				if err != nil {
					t.Fatal(err)
				}
				runSteps(ctx, t, be, ck, prompt(8, tc.cfg.VocabSize), 3)
			})
		}
	}
}

// runSteps prefills ids in one program run, then decodes steps tokens
// greedily, checking the logits after each run.
func runSteps(ctx context.Context, t *testing.T, be gpu.Backend, ck *model.Checkpoint, ids []int32, steps int) {
	t.Helper()
	cfg := &ck.Config
	maxLen := len(ids) + steps
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	kv, err := be.NewKVCache(fusionKV(cfg, maxLen))
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
			t.Fatalf("compile %d tokens: %v", tokens, err)
		}
		return p
	}
	prefill, decode := compile(len(ids)), compile(1)
	defer prefill.Release()
	defer decode.Release()
	logits := make([]float32, cfg.VocabSize)
	if err := prefill.Run(ctx, ids, 0); err != nil {
		t.Fatalf("prefill: %v", err)
	}
	readLogits(t, prefill, logits, "prefill")
	for s := range steps {
		next := testmodels.Argmax(logits)
		if err := decode.Run(ctx, []int32{int32(next)}, len(ids)+s); err != nil {
			t.Fatalf("decode step %d: %v", s, err)
		}
		readLogits(t, decode, logits, "decode")
	}
}

func fusionKV(cfg *model.Config, maxLen int) fusion.KVSpec {
	return arch.KVSpec(cfg, arch.BuildOptions{MaxLen: maxLen})
}

func readLogits(t *testing.T, p gpu.Program, logits []float32, step string) {
	t.Helper()
	n, err := p.Logits(logits)
	if err != nil || n != len(logits) {
		t.Fatalf("%s: Logits = %d, %v; want %d values", step, n, err, len(logits))
	}
	checkLogits(t, logits, step)
}

// checkLogits: finite, not constant, and a standard deviation between 0.05
// and 20, the range weights scaled to 1/sqrt(width) should give.
func checkLogits(t *testing.T, logits []float32, step string) {
	t.Helper()
	var sum, sq float64
	for i, v := range logits {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("%s: logit %d is %v", step, i, v)
		}
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	n := float64(len(logits))
	std := math.Sqrt(max(sq/n-(sum/n)*(sum/n), 0))
	if std == 0 {
		t.Fatalf("%s: all %d logits equal %v", step, len(logits), logits[0])
	}
	if std < 0.05 || std > 20 {
		t.Errorf("%s: logits spread %.4g, want 0.05..20", step, std)
	}
}

// prompt is n deterministic token ids spread over the vocabulary.
func prompt(n, vocab int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32((i*7919 + 3) % vocab)
	}
	return ids
}

// TestShrunkSpecsThroughPipeline loads each shrunk spec with
// pipeline.FromCheckpoint, which compiles (and so validates) the decode and
// prefill graphs against the checkpoint, and generates 4 tokens.
func TestShrunkSpecsThroughPipeline(t *testing.T) {
	ctx := context.Background()
	for _, tc := range testConfigs() {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.EOS = -1 // random weights may pick any id; run a fixed number of steps
			ck, err := Checkpoint(cfg, Options{Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
			b := cpu.New(cpu.Options{})
			defer b.Close()
			m, err := pipeline.FromCheckpoint(ctx, ck, pipeline.Options{Backend: b, MaxCache: 32, PrefillSizes: []int{8}})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			s := m.NewSession()
			var got []int
			ids := prompt(8, cfg.VocabSize)
			p := make([]int, len(ids))
			for i, id := range ids {
				p[i] = int(id)
			}
			for tok, err := range s.Generate(ctx, pipeline.Prompt{IDs: p}, pipeline.GenerateOptions{MaxTokens: 4}) {
				if err != nil {
					t.Fatal(err)
				}
				if tok.ID < 0 || tok.ID >= cfg.VocabSize {
					t.Fatalf("token %d outside the vocabulary", tok.ID)
				}
				got = append(got, tok.ID)
			}
			if mt := s.Metrics(); len(got) != 4 || mt.GeneratedTokens != 4 || mt.PrefillTokens != 8 {
				t.Errorf("generated %v, metrics %+v", got, mt)
			}
		})
	}
}
