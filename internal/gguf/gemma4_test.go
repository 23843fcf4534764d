package gguf

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestGemma4BadMetadata: gemma4's own keys, malformed, fail the import
// with ErrFormat naming the key, never a panic or a guess.
func TestGemma4BadMetadata(t *testing.T) {
	path := testmodels.Path(t, "arch3", "gemma4.gguf")
	for _, key := range []string{
		"gemma4.attention.sliding_window_pattern",
		"gemma4.feed_forward_length",
		"gemma4.embedding_length_per_layer_input",
		"gemma4.attention.shared_kv_layers",
		"gemma4.attention.key_length_swa",
	} {
		t.Run(key, func(t *testing.T) {
			_, err := Load(testmodels.GGUFWithString(t, path, key, "x"))
			if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), key) {
				t.Fatalf("%s = \"x\": err %v, want ErrFormat naming the key", key, err)
			}
		})
	}
}
