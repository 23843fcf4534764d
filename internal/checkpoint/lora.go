package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/hf"
	"github.com/gpurun/gpurun/internal/lora"
	"github.com/gpurun/gpurun/tensors/model"
)

// LoadLoRA reads the LoRA adapter at path for a model of configuration c:
// a GGUF adapter (llama.cpp's convert_lora_to_gguf.py) or a Hugging Face
// PEFT directory (adapter_config.json and adapter_model.safetensors), also
// when path names one of those two files.
func LoadLoRA(path string, c *model.Config) (*lora.Adapter, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("lora: %w", err)
	}
	dir := ""
	switch {
	case st.IsDir():
		dir = path
	case filepath.Base(path) == hf.PEFTConfig || filepath.Base(path) == hf.PEFTWeights:
		dir = filepath.Dir(path)
	}
	var a *lora.Adapter
	if dir != "" {
		a, err = hf.LoadLoRA(dir, c)
	} else {
		// Read, not mapped: the adapter is small and its values are copied.
		var data []byte
		var f *gguf.File
		if data, err = os.ReadFile(path); err == nil {
			if f, err = gguf.Parse(data); err == nil {
				a, err = f.LoRA(c)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return a, nil
}
