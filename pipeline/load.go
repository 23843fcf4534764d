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
		return nil, err
	}
	m, err := FromModelFile(ctx, f, opts)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// FromModelFile prepares an open model file on opts.Backend. The model
// takes the file over and closes it with itself; on error the caller still
// owns it.
func FromModelFile(ctx context.Context, f *modelfile.File, opts Options) (*Model, error) {
	if !f.HasConfig() {
		return nil, ErrNoConfig
	}
	var tok textCodec
	if proto := f.Tokenizer(); proto != nil {
		var err error
		if tok, err = loadTokenizer(proto); err != nil {
			return nil, fmt.Errorf("pipeline: tokenizer: %w", err)
		}
	}
	cfg := f.Config()
	m, err := newModel(ctx, &cfg, f.Tensors(), tok, opts)
	if err != nil {
		return nil, err
	}
	m.file = f
	return m, nil
}
