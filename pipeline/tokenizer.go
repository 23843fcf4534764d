package pipeline

import (
	"fmt"

	"github.com/gpurun/gpurun/pipeline/tokenizer"
	"github.com/gpurun/gpurun/tensors/model"
)

// spm adapts pipeline/tokenizer to what a session needs.
type spm struct{ *tokenizer.Tokenizer }

func (s spm) newDecoder() pieceDecoder { return s.NewDecoder() }

// loadTokenizer parses a serialized SentencePiece model.
func loadTokenizer(proto []byte) (textCodec, error) {
	t, err := tokenizer.Load(proto)
	if err != nil {
		return nil, err
	}
	return spm{t}, nil
}

// checkpointTokenizer is the checkpoint's SentencePiece model, or one built
// from its plain vocabulary (llama2.c and GGUF checkpoints carry that form),
// or nil when it has neither.
func checkpointTokenizer(ck *model.Checkpoint) (textCodec, error) {
	proto := ck.Tokenizer
	if proto == nil && ck.Vocab != nil {
		var err error
		if proto, err = tokenizer.FromVocab(ck.Vocab); err != nil {
			return nil, fmt.Errorf("vocabulary: %w", err)
		}
	}
	if proto == nil {
		return nil, nil
	}
	return loadTokenizer(proto)
}
