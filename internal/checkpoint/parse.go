package checkpoint

import (
	"fmt"

	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/tensors/model"
)

// Parse imports a checkpoint held in memory, a GGUF file or a llama2.c .bin
// (Hugging Face checkpoints are directories and need Load), detecting the
// format from the content, and attaches tokenizer when it is not empty (see
// AttachTokenizer). Tensors alias data where their layout allows.
func Parse(data, tokenizer []byte) (*model.Checkpoint, error) {
	var ck *model.Checkpoint
	var err error
	switch head := data[:min(len(data), llama2c.HeaderSize)]; {
	case len(head) >= 4 && string(head[:4]) == gguf.Magic:
		var f *gguf.File
		if f, err = gguf.Parse(data); err == nil {
			ck, err = f.Checkpoint()
		}
	default:
		if _, herr := llama2c.ParseHeader(head); herr != nil {
			return nil, fmt.Errorf("%w: neither GGUF nor a llama2.c checkpoint: %w", ErrUnknownFormat, herr)
		}
		ck, err = llama2c.Parse(data)
	}
	if err != nil {
		return nil, err
	}
	if len(tokenizer) > 0 {
		if err := AttachTokenizer(ck, tokenizer); err != nil {
			return nil, fmt.Errorf("checkpoint: tokenizer: %w", err)
		}
	}
	return ck, nil
}
