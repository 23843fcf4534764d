package hf

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/tensors/model"
)

// TestAddBOSFromTokenizerJSON: without add_bos_token in
// tokenizer_config.json, a tokenizer.json whose TemplateProcessing puts the
// BOS token first turns AddBOS on, and a ByteLevel post-processor off.
func TestAddBOSFromTokenizerJSON(t *testing.T) {
	bos := `{"post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|begin_of_text|>"}}, {"Sequence": {"id": "A"}}],
		"special_tokens": {"<|begin_of_text|>": {"ids": [7]}}}}`
	for _, c := range []struct {
		tok, config string
		want        bool
	}{
		{bos, "", true},
		{`{"post_processor": {"type": "ByteLevel"}}`, "", false},
		{bos, `{"add_bos_token": false}`, false},
		{`{"post_processor": null}`, `{"add_bos_token": true}`, true},
	} {
		dir := t.TempDir()
		if c.config != "" {
			if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(c.config), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cfg := model.Config{BOS: 7, AddBOS: !c.want}
		if err := readTokenizerConfig(dir, &cfg, []byte(c.tok)); err != nil {
			t.Fatal(err)
		}
		if cfg.AddBOS != c.want {
			t.Errorf("tokenizer.json %.50s, config %q: AddBOS %v", c.tok, c.config, cfg.AddBOS)
		}
	}
}
