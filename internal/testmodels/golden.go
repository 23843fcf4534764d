package testmodels

import (
	"encoding/json"
	"os"
	"testing"
)

// StoriesCase is one prompt of stories260K.golden.json: llama.cpp's greedy
// run of llama2.c's stories260K with the tok512 tokenizer.
type StoriesCase struct {
	Name   string `json:"name"`
	Prompt string `json:"prompt"`
	// PromptIDs start with BOS.
	PromptIDs       []int    `json:"prompt_ids"`
	GeneratedIDs    []int    `json:"generated_ids"`
	GeneratedPieces []string `json:"generated_pieces"`
	// GeneratedText shows U+2581 as a space, as the pieces decode.
	GeneratedText string `json:"generated_text"`
	// Margins is the top-1 minus top-2 logit at each generated position.
	Margins []float64 `json:"top1_top2_logit_margin"`
	// LogitsF32KV are the first generated position's logits with an f32
	// KV cache; nil when the reference has none.
	LogitsF32KV []float64 `json:"logits_first_generated_position_kv_f32"`
	// LogitsF16KV are the same logits with llama.cpp's default f16 KV cache.
	LogitsF16KV []float64 `json:"logits_first_generated_position"`
}

// Llama2cHeader is the header of stories260K.bin as the golden file records it.
type Llama2cHeader struct {
	Dim              int  `json:"dim"`
	HiddenDim        int  `json:"hidden_dim"`
	Layers           int  `json:"n_layers"`
	Heads            int  `json:"n_heads"`
	KVHeads          int  `json:"n_kv_heads"`
	VocabSize        int  `json:"vocab_size"`
	SeqLen           int  `json:"seq_len"`
	SharedClassifier bool `json:"shared_classifier"`
}

// Stories is the part of stories260K.golden.json the tests use.
type Stories struct {
	SourceModel struct {
		Header Llama2cHeader `json:"llama2c_header"`
	} `json:"source_model"`
	Cases []StoriesCase `json:"cases"`
}

// LoadStories decodes stories260K.golden.json from Dir; it fails the test
// when the file is missing, malformed or has no cases.
func LoadStories(t testing.TB) Stories {
	t.Helper()
	var g Stories
	decode(t, Path(t, "stories260K.golden.json"), &g)
	if len(g.Cases) == 0 {
		t.Fatal("testmodels: stories260K.golden.json has no cases")
	}
	return g
}

// StoriesCases is LoadStories(t).Cases.
func StoriesCases(t testing.TB) []StoriesCase {
	t.Helper()
	return LoadStories(t).Cases
}

// ArchGolden is arch/<name>.golden.json: llama.cpp's run of one tiny GGUF
// architecture model over a prompt fed without BOS.
type ArchGolden struct {
	PromptIDs []int `json:"prompt_ids"`
	// Logits holds one row per prompt position.
	Logits    [][]float64 `json:"logits"`
	GreedyIDs []int       `json:"greedy_ids"`
	// GreedyLogits holds one row per greedy decode step.
	GreedyLogits [][]float64 `json:"greedy_logits"`
	// Hparams are the GGUF metadata llama.cpp read.
	Hparams map[string]any `json:"hparams"`
	// Tensors maps each llama.cpp tensor name to its ggml dims.
	Tensors map[string][]int `json:"tensors"`
}

// Arch decodes arch/<name>.golden.json from Dir.
func Arch(t testing.TB, name string) ArchGolden {
	t.Helper()
	var g ArchGolden
	decode(t, Path(t, "arch", name+".golden.json"), &g)
	return g
}

// Arch2Golden is arch2/<name>.golden.json: llama.cpp's run of one tiny
// GGUF of today's architectures (../shared/models/arch2/README.md), with
// the fields of ArchGolden plus the GGUF architecture, the dims and the
// values of the tensors that are RoPE hyperparameters.
type Arch2Golden struct {
	ArchGolden
	GGUFArch string `json:"gguf_arch"`
	Dims     struct {
		Embd    int `json:"embd"`
		Layers  int `json:"layers"`
		Heads   int `json:"heads"`
		KVHeads int `json:"kv_heads"`
		HeadDim int `json:"head_dim"`
		FFN     int `json:"ffn"`
		// NExpert and NExpertUsed: qwen3moe's experts and experts per token.
		NExpert     int `json:"n_expert"`
		NExpertUsed int `json:"n_expert_used"`
	} `json:"dims"`
	Tied bool `json:"tied_embeddings"`
	// NonWeightTensors holds rope_freqs and rope_factors_* values.
	NonWeightTensors map[string][]float64 `json:"non_weight_tensors"`
}

// Arch2 decodes arch2/<name>.golden.json from Dir.
func Arch2(t testing.TB, name string) Arch2Golden {
	t.Helper()
	var g Arch2Golden
	decode(t, Path(t, "arch2", name+".golden.json"), &g)
	return g
}

// Arch3 decodes arch3/<name>.golden.json from Dir: llama.cpp's run of one
// tiny GGUF of 2026's architectures (../shared/models/arch3/README.md),
// in the fields the arch2 goldens share.
func Arch3(t testing.TB, name string) Arch2Golden {
	t.Helper()
	var g Arch2Golden
	decode(t, Path(t, "arch3", name+".golden.json"), &g)
	return g
}

func decode(t testing.TB, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("testmodels: %s: %v", path, err)
	}
}

// DecodeJSON decodes the JSON file at path into v, failing the test on error.
func DecodeJSON(t testing.TB, path string, v any) {
	t.Helper()
	decode(t, path, v)
}

// EmbedSequence is one input of an embed/<model>.golden.json.
type EmbedSequence struct {
	ContentIDs []int `json:"content_ids"`
	// FedIDs is what llama.cpp decoded: the content with its special tokens.
	FedIDs    []int     `json:"fed_ids"`
	Embedding []float64 `json:"embedding"` // pooled, not normalized
	L2Norm    float64   `json:"l2_norm"`
	// Normalized is Embedding / its L2 norm (llama-embedding's default).
	Normalized []float64 `json:"embedding_normalized"`
}

// EmbedGolden is llama.cpp's pooled embeddings of one tiny embedding GGUF
// (../shared/models/embed/README.md).
type EmbedGolden struct {
	Pooling   string          `json:"pooling_type"`
	NEmbdOut  int             `json:"n_embd_out"`
	AddBOS    bool            `json:"add_bos"`
	AddEOS    bool            `json:"add_eos"`
	Sequences []EmbedSequence `json:"sequences"`
}

// Embed decodes embed/<name>.golden.json from Dir; it fails the test when
// the file has no sequences.
func Embed(t testing.TB, name string) EmbedGolden {
	t.Helper()
	var g EmbedGolden
	decode(t, Path(t, "embed", name+".golden.json"), &g)
	if len(g.Sequences) == 0 {
		t.Fatalf("testmodels: embed/%s.golden.json has no sequences", name)
	}
	return g
}
