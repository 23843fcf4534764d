package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpurun/gpurun/tensors/modelfile"
)

// ErrNoConfig: a model file without a gpurun configuration, so its
// architecture is unknown.
var ErrNoConfig = errors.New("pipeline: model file has no configuration")

// Load opens a model file (.tflite weight container or .task bundle) and
// prepares it on opts.Backend. Weights alias the file's mapping, which stays
// open until Close.
func Load(ctx context.Context, path string, opts Options) (*Model, error) {
	f, err := modelfile.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w", err)
	}
	if !f.HasConfig() {
		f.Close()
		return nil, fmt.Errorf("%w: %s", ErrNoConfig, path)
	}
	var tok textCodec
	if proto := f.Tokenizer(); proto != nil {
		if tok, err = loadTokenizer(proto); err != nil {
			f.Close()
			return nil, fmt.Errorf("pipeline: %s: tokenizer: %w", path, err)
		}
	}
	cfg := f.Config()
	m, err := newModel(ctx, &cfg, f.Tensors(), tok, opts)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("pipeline: %s: %w", path, err)
	}
	m.file = f
	return m, nil
}
