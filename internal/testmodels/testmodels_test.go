package testmodels

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestDirHoldsTheSharedModels(t *testing.T) {
	dir := Dir(t)
	if filepath.Base(dir) != "models" || filepath.Base(filepath.Dir(dir)) != "shared" {
		t.Errorf("Dir = %s, want .../shared/models", dir)
	}
	if _, err := os.Stat(filepath.Join(Root(t), "go.mod")); err != nil {
		t.Errorf("Root has no go.mod: %v", err)
	}
	for _, name := range []string{"stories260K.bin", "stories260K.golden.json", "tok512.model", "arch"} {
		if _, err := os.Stat(Path(t, name)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The goldens decode into the fields the tests rely on: a field renamed in
// a struct tag would silently decode as zero, so check each is filled.
func TestGoldensDecode(t *testing.T) {
	s := LoadStories(t)
	if s.SourceModel.Header.Dim == 0 || s.SourceModel.Header.VocabSize == 0 {
		t.Errorf("llama2c header not decoded: %+v", s.SourceModel.Header)
	}
	vocab := s.SourceModel.Header.VocabSize
	withLogits := 0
	for _, c := range s.Cases {
		if c.Name == "" || c.Prompt == "" || len(c.PromptIDs) == 0 || len(c.GeneratedIDs) == 0 ||
			len(c.GeneratedPieces) != len(c.GeneratedIDs) || c.GeneratedText == "" || len(c.Margins) != len(c.GeneratedIDs) {
			t.Errorf("case %q: fields missing: %d prompt ids, %d generated ids, %d pieces, %d margins",
				c.Name, len(c.PromptIDs), len(c.GeneratedIDs), len(c.GeneratedPieces), len(c.Margins))
		}
		// The reference logits are optional per case, but whole when given.
		for _, l := range [][]float64{c.LogitsF16KV, c.LogitsF32KV} {
			if l != nil && len(l) != vocab {
				t.Errorf("case %q: %d reference logits, vocab %d", c.Name, len(l), vocab)
			}
		}
		if c.LogitsF16KV != nil && c.LogitsF32KV != nil {
			withLogits++
		}
	}
	if withLogits == 0 {
		t.Error("no case has both f16-KV and f32-KV reference logits")
	}
	a := Arch(t, "llama")
	if len(a.PromptIDs) == 0 || len(a.Logits) != len(a.PromptIDs) || len(a.GreedyIDs) == 0 ||
		len(a.GreedyLogits) != len(a.GreedyIDs) || len(a.Hparams) == 0 || len(a.Tensors) == 0 {
		t.Errorf("arch llama golden: fields missing: %d prompt ids, %d logit rows, %d greedy ids, %d greedy rows, %d hparams, %d tensors",
			len(a.PromptIDs), len(a.Logits), len(a.GreedyIDs), len(a.GreedyLogits), len(a.Hparams), len(a.Tensors))
	}
	b := Arch2(t, "llama3")
	if len(b.PromptIDs) == 0 || len(b.Logits) != len(b.PromptIDs) || len(b.GreedyIDs) == 0 ||
		len(b.GreedyLogits) != len(b.GreedyIDs) || len(b.Hparams) == 0 || len(b.Tensors) == 0 ||
		b.GGUFArch != "llama" || b.Dims.Embd == 0 || b.Dims.HeadDim == 0 || len(b.NonWeightTensors["rope_freqs.weight"]) == 0 {
		t.Errorf("arch2 llama3 golden: fields missing: %+v dims, gguf_arch %q, %d prompt ids, %d logit rows, %d greedy ids, %d greedy rows, %d non-weight tensors",
			b.Dims, b.GGUFArch, len(b.PromptIDs), len(b.Logits), len(b.GreedyIDs), len(b.GreedyLogits), len(b.NonWeightTensors))
	}
}

func TestLogitHelpers(t *testing.T) {
	for _, tc := range []struct {
		name string
		x    []float32
		want int
	}{
		{"single", []float32{-1}, 0},
		{"last", []float32{1, 2, 3}, 2},
		{"tie picks lowest", []float32{0, 5, 5, 1}, 1},
		{"negative", []float32{-3, -1, -2}, 1},
	} {
		if got := Argmax(tc.x); got != tc.want {
			t.Errorf("Argmax(%s) = %d, want %d", tc.name, got, tc.want)
		}
	}
	for _, tc := range []struct {
		name string
		got  []float32
		want []float64
		diff float64
	}{
		{"equal", []float32{1, 2}, []float64{1, 2}, 0},
		{"largest", []float32{1, 2, 3}, []float64{1.5, 2, 1}, 2},
		{"length mismatch", []float32{1}, []float64{1, 2}, math.Inf(1)},
	} {
		if d := MaxAbsDiff(tc.got, tc.want); d != tc.diff {
			t.Errorf("MaxAbsDiff(%s) = %g, want %g", tc.name, d, tc.diff)
		}
	}
	if got := IDs32([]int{1, 0, 511}); !slices.Equal(got, []int32{1, 0, 511}) {
		t.Errorf("IDs32 = %v", got)
	}
}
