package pipeline

import (
	"fmt"

	"github.com/gpurun/gpurun/internal/bpe"
	"github.com/gpurun/gpurun/internal/modelfile"
	"github.com/gpurun/gpurun/pipeline/tokenizer"
	"github.com/gpurun/gpurun/tensors/model"
)

// spm adapts pipeline/tokenizer (SentencePiece) to what a session needs.
type spm struct{ *tokenizer.Tokenizer }

func (s spm) newDecoder() pieceDecoder { return s.NewDecoder() }

// byteBPE adapts internal/bpe (tokenizer.json) likewise.
type byteBPE struct{ *bpe.Tokenizer }

func (b byteBPE) newDecoder() pieceDecoder { return b.NewDecoder() }

// loadTokenizer parses a stored tokenizer: a Hugging Face tokenizer.json or
// a serialized SentencePiece model (modelfile.IsTokenizerJSON tells them
// apart).
func loadTokenizer(data []byte) (textCodec, error) {
	if modelfile.IsTokenizerJSON(data) {
		t, err := bpe.Load(data)
		if err != nil {
			return nil, err
		}
		return byteBPE{t}, nil
	}
	t, err := tokenizer.Load(data)
	if err != nil {
		return nil, err
	}
	return spm{t}, nil
}

// checkpointTokenizer is the checkpoint's tokenizer (a SentencePiece model
// or a tokenizer.json), or one built from its plain vocabulary (llama2.c and
// GGUF checkpoints carry that form), or nil when it has neither.
func checkpointTokenizer(ck *model.Checkpoint) (textCodec, error) {
	data, err := TokenizerBytes(ck)
	if err != nil || data == nil {
		return nil, err
	}
	return loadTokenizer(data)
}

// TokenizerBytes returns what a model file stores for ck's tokenizer: its
// SentencePiece model or tokenizer.json as is, a SentencePiece model built
// from a SentencePiece-style vocabulary, or a tokenizer.json built from a
// GGUF gpt2 or gemma4 vocabulary; nil when ck has no tokenizer.
func TokenizerBytes(ck *model.Checkpoint) ([]byte, error) {
	if ck.Tokenizer != nil {
		if modelfile.IsTokenizerJSON(ck.Tokenizer) {
			// Checked now, so that convert reports a tokenizer.json it
			// cannot use (a WordPiece model, say) instead of writing it.
			if _, err := bpe.Load(ck.Tokenizer); err != nil {
				return nil, fmt.Errorf("tokenizer.json: %w", err)
			}
		}
		return ck.Tokenizer, nil
	}
	if ck.Vocab == nil {
		return nil, nil
	}
	var (
		b   []byte
		err error
	)
	if ck.Vocab.Model == "gpt2" || ck.Vocab.Model == "gemma4" {
		b, err = bpe.FromVocab(ck.Vocab, ck.Config.AddBOS)
	} else {
		b, err = tokenizer.FromVocab(ck.Vocab)
	}
	if err != nil {
		return nil, fmt.Errorf("vocabulary: %w", err)
	}
	return b, nil
}
