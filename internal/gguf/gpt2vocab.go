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

// gpt2Vocab reads a byte-level BPE vocabulary (tokenizer.ggml.model =
// "gpt2"): tokens, merges, token types, the pre-tokenizer name and the
// special token ids.
func (f *File) gpt2Vocab() (*model.Vocab, error) {
	tv, ok := f.Get("tokenizer.ggml.tokens")
	if !ok {
		return nil, fmt.Errorf("%w: tokenizer.ggml.tokens missing", ErrFormat)
	}
	pieces, err := tv.Strings()
	if err != nil {
		return nil, fmt.Errorf("tokenizer.ggml.tokens: %w", err)
	}
	n := len(pieces)
	v := &model.Vocab{Model: "gpt2", Pieces: pieces, Scores: make([]float32, n)}
	mv, ok := f.Get("tokenizer.ggml.merges")
	if !ok {
		return nil, fmt.Errorf("%w: tokenizer.ggml.merges missing for a gpt2 vocabulary", ErrFormat)
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
	m := &meta{f: f}
	v.UNK = m.tokenID("tokenizer.ggml.unknown_token_id", -1, n)
	v.BOS = m.tokenID("tokenizer.ggml.bos_token_id", -1, n)
	v.EOS = m.tokenID("tokenizer.ggml.eos_token_id", -1, n)
	v.PAD = m.tokenID("tokenizer.ggml.padding_token_id", -1, n)
	return v, m.err
}
