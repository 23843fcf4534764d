package pipeline_test

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors/gguf"
)

// TestGGUFSessions: a session over each GGUF architecture model, fed the
// golden prompt ids as given (no BOS), generates llama.cpp's 24 greedy ids;
// the GGUF vocabulary becomes the model's tokenizer. Both with the fused
// graphs (the default) and with Options.NoFusion.
func TestGGUFSessions(t *testing.T) {
	dir := testmodels.Path(t, "arch")
	for _, tc := range []struct {
		name     string
		noFusion bool
	}{
		{"llama", false}, {"gemma", false}, {"gemma2", false}, {"phi2", false}, {"phi2_fusedqkv", false},
		{"falcon", false}, {"stablelm", false}, {"llama-q8_0", false},
		{"llama", true}, {"gemma2", true}, {"phi2", true}, {"llama-q8_0", true},
	} {
		name := tc.name
		label := name
		if tc.noFusion {
			label += "/nofusion"
		}
		t.Run(label, func(t *testing.T) {
			g := testmodels.Arch(t, name)
			ck, err := gguf.Load(filepath.Join(dir, name+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			m := load(t, ck, pipeline.Options{MaxCache: 64, NoFusion: tc.noFusion})
			if !m.HasTokenizer() {
				t.Error("no tokenizer from the GGUF vocabulary")
			}
			got := collect(t, m.NewSession(), pipeline.Prompt{IDs: g.PromptIDs}, pipeline.GenerateOptions{MaxTokens: len(g.GreedyIDs)})
			if !slices.Equal(got, g.GreedyIDs) {
				t.Errorf("ids\n got %v\nwant %v", got, g.GreedyIDs)
			}
		})
	}
}
