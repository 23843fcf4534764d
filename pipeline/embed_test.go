package pipeline_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors/model"
)

// embedTols bound our pooled embeddings against llama.cpp's, absolute per
// value, raw and L2-normalized (the raw vectors have norms of about 3 to
// 10). gemma-embedding is measured within 4.8e-5 raw and 5.8e-6
// normalized: the runtimes sum in other orders, and its dense projections
// come before the mean here, after it in llama.cpp. qwen3-embedding is
// within 7.3e-4 raw (3e-4 relative) and 9e-5 normalized: llama.cpp runs
// this decoder with its default f16 KV cache (and f16 queries in its KQ
// product), where our CPU reference keeps f32; building with an f16 cache
// alone brings the raw difference to 3.8e-4. gemma-embedding runs in
// llama.cpp's encoder, which keeps no cache. bert (LayerNorm, no RoPE) is
// within 4.8e-7 raw (norms of about 8).
var embedTols = map[string]struct{ raw, normalized float64 }{
	"gemma-embedding": {1e-4, 2e-5},
	"qwen3-embedding": {1.5e-3, 2e-4},
	"bert":            {5e-6, 1e-6},
}

// embedModel loads embed/<name>.gguf on the CPU backend, with cfg changed
// by edit (nil: as the file says).
func embedModel(t *testing.T, name string, edit func(*model.Config)) *pipeline.Model {
	t.Helper()
	ck, err := gguf.Load(testmodels.Path(t, "embed", name+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&ck.Config)
	}
	return load(t, ck, pipeline.Options{MaxCache: 64})
}

// TestEmbedGolden: gemma-embedding (mean pooling, bidirectional attention
// with symmetric windows, dense projections), qwen3-embedding (last
// token, causal) and bert (CLS, bidirectional, learned positions, post-LN
// blocks) embed the four golden inputs as llama.cpp 81ff7abe5
// does, with the special tokens it adds, raw and L2-normalized.
func TestEmbedGolden(t *testing.T) {
	for _, name := range []string{"gemma-embedding", "qwen3-embedding", "bert"} {
		t.Run(name, func(t *testing.T) {
			g := testmodels.Embed(t, name)
			tol := embedTols[name]
			m := embedModel(t, name, nil)
			if m.Pooling() != g.Pooling || m.EmbeddingDim() != g.NEmbdOut {
				t.Fatalf("pooling %q, dim %d; llama.cpp: %q, %d", m.Pooling(), m.EmbeddingDim(), g.Pooling, g.NEmbdOut)
			}
			for i, seq := range g.Sequences {
				if ids := m.WithSpecial(seq.ContentIDs); !slices.Equal(ids, seq.FedIDs) {
					t.Fatalf("sequence %d: special tokens give %v, llama.cpp fed %v", i, ids, seq.FedIDs)
				}
				raw, err := m.Embed(context.Background(), seq.FedIDs, false)
				if err != nil {
					t.Fatal(err)
				}
				if d := testmodels.MaxAbsDiff(raw, seq.Embedding); !(d <= tol.raw) {
					t.Errorf("sequence %d (%d tokens): raw embedding off by %.3g", i, len(seq.FedIDs), d)
				}
				norm, err := m.Embed(context.Background(), seq.FedIDs, true)
				if err != nil {
					t.Fatal(err)
				}
				if d := testmodels.MaxAbsDiff(norm, seq.Normalized); !(d <= tol.normalized) {
					t.Errorf("sequence %d: normalized embedding off by %.3g", i, d)
				}
			}
		})
	}
}

// TestEmbedAblations: each convention the goldens pin moves the
// embeddings far past their tolerance when done wrong: causal attention for
// gemma-embedding and bert, bidirectional for qwen3-embedding, the other
// poolings, and bert without its positions.
func TestEmbedAblations(t *testing.T) {
	for _, tc := range []struct {
		name, wrong string
		edit        func(*model.Config)
	}{
		{"gemma-embedding", "causal", func(c *model.Config) { c.NonCausal = false }},
		{"gemma-embedding", "last-token pooling", func(c *model.Config) { c.Pooling = model.PoolLast }},
		{"gemma-embedding", "no dense projections", nil}, // below
		{"bert", "causal", func(c *model.Config) { c.NonCausal = false }},
		{"bert", "mean pooling", func(c *model.Config) { c.Pooling = model.PoolMean }},
		{"bert", "no learned positions", func(c *model.Config) { c.LearnedPositions = false }},
		{"qwen3-embedding", "bidirectional", func(c *model.Config) { c.NonCausal = true }},
		{"qwen3-embedding", "mean pooling", func(c *model.Config) { c.Pooling = model.PoolMean }},
		{"qwen3-embedding", "cls pooling", func(c *model.Config) { c.Pooling = model.PoolCLS }},
	} {
		t.Run(tc.name+"/"+tc.wrong, func(t *testing.T) {
			g := testmodels.Embed(t, tc.name)
			edit := tc.edit
			if edit == nil {
				edit = func(c *model.Config) { c.DenseDim = 0 }
			}
			m := embedModel(t, tc.name, edit)
			seq := g.Sequences[len(g.Sequences)-1] // the longest, past the window
			got, err := m.Embed(context.Background(), seq.FedIDs, true)
			if err != nil {
				t.Fatal(err)
			}
			if d := testmodels.MaxAbsDiff(got, seq.Normalized); !(d > 10*embedTols[tc.name].normalized) {
				t.Errorf("%s: within %.3g of llama.cpp: the golden does not pin it", tc.wrong, d)
			}
		})
	}
}

// TestEmbedErrors: a generative model, no tokens, a token outside the
// vocabulary and an input longer than the cache are clear errors.
func TestEmbedErrors(t *testing.T) {
	m := embedModel(t, "qwen3-embedding", nil)
	ctx := context.Background()
	for _, tc := range []struct {
		ids  []int
		want error
	}{{nil, pipeline.ErrPrompt}, {[]int{1, 100000}, pipeline.ErrPrompt}, {make([]int, 65), pipeline.ErrPromptTooLong}} {
		if _, err := m.Embed(ctx, tc.ids, true); !errors.Is(err, tc.want) {
			t.Errorf("%d ids: %v, want %v", len(tc.ids), err, tc.want)
		}
	}
	ck, err := gguf.Load(testmodels.Path(t, "arch2", "qwen3.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	gen := load(t, ck, pipeline.Options{MaxCache: 64})
	if _, err := gen.Embed(ctx, []int{1, 2, 3}, true); !errors.Is(err, pipeline.ErrNotEmbedding) {
		t.Errorf("a generative model: %v, want ErrNotEmbedding", err)
	}
}

// TestEmbedGPU: qwen3-embedding (causal) embeds on the GPU backends
// through the same graph as on the CPU, within the CPU's tolerance of
// llama.cpp's normalized vectors (the model's f32 activation policy);
// gemma-embedding's bidirectional attention is refused at load with
// ErrUnsupported.
func TestEmbedGPU(t *testing.T) {
	g := testmodels.Embed(t, "qwen3-embedding")
	for _, name := range []string{"vulkan", "webgpu"} {
		t.Run(name, func(t *testing.T) {
			be := openBackend(t, name)
			ck, err := gguf.Load(testmodels.Path(t, "embed", "qwen3-embedding.gguf"))
			if err != nil {
				t.Fatal(err)
			}
			m, err := pipeline.FromCheckpoint(context.Background(), ck, pipeline.Options{Backend: be, MaxCache: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for i, seq := range g.Sequences {
				v, err := m.Embed(context.Background(), seq.FedIDs, true)
				if err != nil {
					t.Fatal(err)
				}
				if d := testmodels.MaxAbsDiff(v, seq.Normalized); !(d <= embedTols["qwen3-embedding"].normalized) {
					t.Errorf("sequence %d: off llama.cpp's by %.3g", i, d)
				} else {
					t.Logf("sequence %d: within %.3g of llama.cpp's", i, d)
				}
			}
			ck, err = gguf.Load(testmodels.Path(t, "embed", "gemma-embedding.gguf"))
			if err != nil {
				t.Fatal(err)
			}
			if m, err := pipeline.FromCheckpoint(context.Background(), ck, pipeline.Options{Backend: be, MaxCache: 64}); !errors.Is(err, gpu.ErrUnsupported) {
				if err == nil {
					m.Close()
				}
				t.Errorf("gemma-embedding on %s: %v, want ErrUnsupported", name, err)
			}
		})
	}
}
