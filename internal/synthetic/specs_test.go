package synthetic

import (
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/tensors/model"
)

// Parameter counts as the model cards and Hugging Face's safetensors
// metadata publish them. They pin every dimension of a spec at once: a wrong
// width, depth, head count, vocabulary, tying or bias flag changes the sum.
var publishedParams = []struct {
	name   string
	params int64
	note   string
}{
	{"tinyllama-1.1b", 1_100_048_384, "TinyLlama/TinyLlama-1.1B-Chat-v1.0"},
	{"gemma-2b", 2_506_172_416, "google/gemma-2b"},
	{"phi-2", 2_779_683_840, "microsoft/phi-2"},
	// falcon-rw-1b has 1,311,625,216 parameters (KerasHub's preset lists
	// the same). The falcon-7b style block of this spec drops, in each of
	// the 24 layers, the 18,432 linear biases, the K and V rows of 31 of
	// the 32 heads (multi-query: 2*31*64 rows of 2048) and the second
	// LayerNorm (scale and bias of 2048) of RW-1B's sequential block.
	{"falcon-1b", 1_311_625_216 - 24*(18_432+2*31*64*2048+2*2048),
		"tiiuae/falcon-rw-1b minus its biases, MHA K/V rows and second LayerNorm"},
	{"stablelm-3b", 2_795_443_200, "stabilityai/stablelm-3b-4e1t"},
	// The card only says 110M: embedding 32000*768, 12 layers of
	// 4*768*768 + 3*768*2048 + 2*768, the final norm, classifier tied.
	{"llama-110m", 32000*768 + 12*(4*768*768+3*768*2048+2*768) + 768, "stories110M, summed from llama2.c's dimensions"},
	{"llama-3.2-1b", 1_235_814_400, "meta-llama/Llama-3.2-1B"},
	// The card gives 0.49B (0.36B without the embedding); summed from
	// config.json: embedding 151936*896, 24 layers of q/o 896*896, k/v
	// 128*896 with their biases, MLP 3*896*4864 and two norms, final norm.
	{"qwen2.5-0.5b", 151936*896 + 24*(2*896*896+2*128*896+896+2*128+3*896*4864+2*896) + 896, "Qwen/Qwen2.5-0.5B, summed"},
	{"qwen3-0.6b", 596_049_920, "Qwen/Qwen3-0.6B"},
	// The card says 1.5B; summed from config.json: embedding 100352*1536
	// (tied), 36 Mamba-2 layers of in_proj 1536*(2*3072+2*128+48), conv
	// 3328*4 with its bias, dt bias, A and D of 48, norm 3072, out_proj
	// 3072*1536; 4 attention layers of q/o 1536*1536 and k/v 512*1536;
	// every layer an MLP of 3*1536*4096 and two norms of 1536; the final
	// norm.
	{"granite-4.0-h-1b", 100352*1536 + 36*(1536*6448+3328*5+3*48+3072+3072*1536) + 4*(2*1536*1536+2*512*1536) +
		40*(3*1536*4096+2*1536) + 1536, "ibm-granite/granite-4.0-h-1b, summed"},
	{"gemma-3-1b", 999_885_952, "google/gemma-3-1b-pt"},
	{"phi-4-mini", 3_836_021_760, "microsoft/Phi-4-mini-instruct"},
	{"smollm3-3b", 3_075_098_624, "HuggingFaceTB/SmolLM3-3B"},
	// Summed from config.json: embedding and head 151936*2048 each; 48
	// layers of q/o 4096*2048, k/v 512*2048, q/k norms 128, two norms
	// 2048, router 128*2048 and 128 experts of 3*768*2048; final norm.
	// The card gives 30.5B.
	{"qwen3-30b-a3b", 2*151936*2048 + 48*(2*4096*2048+2*512*2048+2*128+2*2048+128*2048+128*3*768*2048) + 2048, "Qwen/Qwen3-30B-A3B, summed"},
	{"qwen3-moe-small", 2*151936*2048 + 24*(2*4096*2048+2*512*2048+2*128+2*2048+32*2048+32*3*768*2048) + 2048, "summed"},
	{"qwen3-dense-small", 2*151936*2048 + 24*(2*4096*2048+2*512*2048+2*128+2*2048+3*6144*2048) + 2048, "summed"},
	// Summed from the dimensions (gemma4.go): embedding 262144*1536, the
	// per-layer table 262144*35*256 and projection 35*256*1536 with its
	// norm of 256; every layer's four norms, per-layer gate and
	// projection (256*1536 each), per-layer norm and scalar, q and o
	// (8 heads), q norm; the 15 first layers' k, v and k norm; FFNs of
	// 3*1536*6144, doubled on the 20 shared layers. 12 sliding (256) and
	// 3 global (512) layers own their caches, 16 and 4 share. The card's
	// 5.1B adds the vision and audio towers.
	{"gemma-4-e2b", gemma4E2BParams(), "summed"},
	// Summed: embedding 248320*1024 (tied); 18 Gated DeltaNet layers of
	// qkv 6144*1024, z 2048*1024, beta and alpha 16*1024, conv 6144*4,
	// dt bias and A 16, norm 128, out 1024*2048; 6 attention layers of q
	// and its gate 2048*1024 each, k/v 512*1024, q/k norms 256, o
	// 1024*2048; every layer two norms 1024 and an MLP 3*3584*1024; final
	// norm.
	{"qwen3.5-0.8b", 248320*1024 + 18*(6144*1024+2048*1024+2*16*1024+6144*4+2*16+128+1024*2048) +
		6*(2*2048*1024+2*512*1024+2*256+1024*2048) + 24*(2*1024+3*3584*1024) + 1024, "Qwen/Qwen3.5-0.8B text model, summed"},
	// The card says 1.17B; summed from config.json: embedding 65536*2048
	// (tied); 10 short
	// convolution layers of in_proj 3*2048*2048, kernel 2048*3 and
	// out_proj 2048*2048; 6 attention layers of q/o 2048*2048, k/v
	// 512*2048 and q/k norms 64; every layer two norms of 2048 and an MLP
	// of 3*2048*8192; the final norm.
	{"lfm2-1.2b", 65536*2048 + 10*(3*2048*2048+2048*3+2048*2048) + 6*(2*2048*2048+2*512*2048+2*64) +
		16*(2*2048+3*2048*8192) + 2048, "LiquidAI/LFM2-1.2B, summed"},
}

// gemma4E2BParams sums gemma-4-e2b's tensors by layer kind.
func gemma4E2BParams() int64 {
	const e, v, layers, p = 1536, 262144, 35, 256
	common := int64(4*e + 2*p*e + e + 1)
	att := func(hd int64, own bool) int64 {
		n := 8*hd*e*2 + hd // q, o, q norm
		if own {
			n += 2*hd*e + hd // k, v, k norm
		}
		return n
	}
	ffn := func(h int64) int64 { return 3 * e * h }
	return v*e + v*layers*p + layers*p*e + p + e +
		12*(common+att(256, true)+ffn(6144)) + 3*(common+att(512, true)+ffn(6144)) +
		16*(common+att(256, false)+ffn(12288)) + 4*(common+att(512, false)+ffn(12288))
}

func TestSpecsMatchPublishedParameterCounts(t *testing.T) {
	if got, want := len(Specs()), len(publishedParams); got != want {
		t.Fatalf("%d specs, %d published counts", got, want)
	}
	for _, tc := range publishedParams {
		t.Run(tc.name, func(t *testing.T) {
			cfg, ok := ByName(tc.name)
			if !ok {
				t.Fatalf("ByName(%q) not found", tc.name)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			got, err := Params(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.params {
				t.Errorf("%d parameters, %s has %d", got, tc.note, tc.params)
			}
		})
	}
}

func TestNamesAndByName(t *testing.T) {
	specs := Specs()
	names := Names()
	if len(names) != len(specs) {
		t.Fatalf("Names has %d entries, Specs %d", len(names), len(specs))
	}
	for i, s := range specs {
		if names[i] != s.Name {
			t.Errorf("Names()[%d] = %q, Specs()[%d].Name = %q", i, names[i], i, s.Name)
		}
		if s.Source == "" {
			t.Errorf("%s: no source model", s.Name)
		}
		cfg, ok := ByName(s.Name)
		if !ok || cfg.Dim != s.Config.Dim || cfg.Arch != s.Config.Arch {
			t.Errorf("ByName(%q) = %+v, %v", s.Name, cfg, ok)
		}
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != len(names) {
		t.Errorf("duplicate names in %v", names)
	}
	for _, bad := range []string{"", "TinyLlama-1.1B", "gemma", "llama-7b"} {
		if _, ok := ByName(bad); ok {
			t.Errorf("ByName(%q) found a spec", bad)
		}
	}
}

func TestSpecsAreCopies(t *testing.T) {
	a := Specs()
	a[0].Config.Layers = 1
	a[0].Name = "changed"
	if b := Specs(); b[0].Config.Layers == 1 || b[0].Name == "changed" {
		t.Fatal("editing the result of Specs changed the next call's")
	}
}

// TestLayoutMatchesGraph checks, at full size and without allocating any
// weights, that the tensors Checkpoint would build are exactly the ones the
// decode and prefill graphs of internal/arch reference, with the shapes the
// graph validator demands.
func TestLayoutMatchesGraph(t *testing.T) {
	for _, s := range Specs() {
		t.Run(s.Name, func(t *testing.T) {
			checkLayout(t, &s.Config)
		})
	}
}

// checkLayout compares layout(cfg) with the weights the graphs use.
func checkLayout(t *testing.T, cfg *model.Config) {
	t.Helper()
	shapes := map[string][]int{}
	for _, e := range layout(cfg) {
		if _, dup := shapes[e.name]; dup {
			t.Fatalf("tensor %q listed twice", e.name)
		}
		shapes[e.name] = e.shape
	}
	shapeOf := func(name string) ([]int, bool) {
		s, ok := shapes[name]
		return s, ok
	}
	used := map[string]bool{}
	for _, tokens := range []int{1, 8} {
		g, err := arch.Build(cfg, arch.BuildOptions{Tokens: tokens, MaxLen: 16})
		if err != nil {
			t.Fatalf("arch.Build(%d tokens): %v", tokens, err)
		}
		if err := g.Validate(shapeOf); err != nil {
			t.Fatalf("graph of %d tokens against the synthetic layout: %v", tokens, err)
		}
		for _, op := range g.Ops {
			for _, name := range fusion.Weights(op) {
				used[name] = true
			}
		}
	}
	for name := range shapes {
		if !used[name] {
			t.Errorf("tensor %q is built but no graph op reads it", name)
		}
	}
	for name := range used {
		if _, ok := shapes[name]; !ok {
			t.Errorf("graph reads %q, which is not built", name)
		}
	}
}
