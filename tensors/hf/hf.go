// Package hf imports Hugging Face checkpoints: a directory with config.json,
// *.safetensors and optionally tokenizer.model.
package hf

import (
	"errors"
	"fmt"

	"github.com/gpurun/gpurun/tensors/model"
)

// ErrUnsupported reports a model type or tensor this importer does not handle.
var ErrUnsupported = errors.New("hf: unsupported")

// Load imports the Hugging Face checkpoint in dir.
func Load(dir string) (*model.Checkpoint, error) {
	return nil, fmt.Errorf("%w: %s: importer not written yet", ErrUnsupported, dir)
}
