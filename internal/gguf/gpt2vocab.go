package gguf

import (
	"fmt"

	"github.com/gpurun/gpurun/tensors/model"
)

// gpt2AddsBOS: the tokenizer.ggml.pre values for which llama.cpp adds BOS
// to a byte-level BPE prompt when the file does not say
// (tokenizer.ggml.add_bos_token); for the others it does not.
var gpt2AddsBOS = map[string]bool{"llama3": true, "llama-v3": true, "llama-bpe": true, "falcon3": true, "tekken": true, "chameleon": true,
	"lfm2": true}

// gpt2Vocab reads a merges vocabulary: byte-level BPE (tokenizer.ggml.model
// = "gpt2") or Gemma 4's SentencePiece-style BPE ("gemma4"): tokens,
// merges, token types, the pre-tokenizer name and the special token ids.
// For "gemma4" the pre-tokenizer is "gemma4" whatever the file says, as
// llama.cpp sets it.
func (f *File) gpt2Vocab(kind string) (*model.Vocab, error) {
	tv, ok := f.Get("tokenizer.ggml.tokens")
	if !ok {
		return nil, fmt.Errorf("%w: tokenizer.ggml.tokens missing", ErrFormat)
	}
	pieces, err := tv.Strings()
	if err != nil {
		return nil, fmt.Errorf("tokenizer.ggml.tokens: %w", err)
	}
	n := len(pieces)
	v := &model.Vocab{Model: kind, Pieces: pieces, Scores: make([]float32, n)}
	mv, ok := f.Get("tokenizer.ggml.merges")
	if !ok {
		return nil, fmt.Errorf("%w: tokenizer.ggml.merges missing for a %s vocabulary", ErrFormat, kind)
	}
	if v.Merges, err = mv.Strings(); err != nil {
		return nil, fmt.Errorf("tokenizer.ggml.merges: %w", err)
	}
	if tt, ok := f.Get("tokenizer.ggml.token_type"); ok {
		if v.Types, err = tt.Int32s(); err != nil {
			return nil, fmt.Errorf("tokenizer.ggml.token_type: %w", err)
		}
		if len(v.Types) != n {
			return nil, fmt.Errorf("%w: %d tokens but %d token types", ErrFormat, n, len(v.Types))
		}
	} else {
		v.Types = make([]int32, n)
	}
	for i, t := range v.Types {
		switch {
		case t == 0:
			v.Types[i] = model.PieceNormal
		case t < model.PieceNormal || t > model.PieceByte:
			return nil, fmt.Errorf("%w: token %d has type %d", ErrFormat, i, t)
		}
	}
	if pv, ok := f.Get("tokenizer.ggml.pre"); ok {
		s, ok := pv.Str()
		if !ok {
			return nil, fmt.Errorf("%w: tokenizer.ggml.pre is %s, not a string", ErrFormat, pv.Type)
		}
		v.Pre = s
	}
	if kind == "gemma4" {
		v.Pre = "gemma4"
	}
	m := &meta{f: f}
	v.UNK = m.tokenID("tokenizer.ggml.unknown_token_id", -1, n)
	v.BOS = m.tokenID("tokenizer.ggml.bos_token_id", -1, n)
	v.EOS = m.tokenID("tokenizer.ggml.eos_token_id", -1, n)
	v.PAD = m.tokenID("tokenizer.ggml.padding_token_id", -1, n)
	return v, m.err
}
