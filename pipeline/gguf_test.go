package pipeline_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors/gguf"
)

// TestGGUFSessions: a session over each GGUF architecture model, fed the
// golden prompt ids as given (no BOS), generates llama.cpp's 24 greedy ids;
// the GGUF vocabulary becomes the model's tokenizer.
func TestGGUFSessions(t *testing.T) {
	dir := filepath.Join(modelsDir(t), "arch")
	for _, name := range []string{"llama", "gemma", "gemma2", "phi2", "phi2_fusedqkv", "falcon", "stablelm", "llama-q8_0"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, name+".golden.json"))
			if err != nil {
				t.Fatal(err)
			}
			var g struct {
				PromptIDs []int `json:"prompt_ids"`
				GreedyIDs []int `json:"greedy_ids"`
			}
			if err := json.Unmarshal(raw, &g); err != nil {
				t.Fatal(err)
			}
			ck, err := gguf.Load(filepath.Join(dir, name+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			m := load(t, ck, pipeline.Options{MaxCache: 64})
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
