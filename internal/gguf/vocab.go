package gguf

import (
	"fmt"

	"github.com/gpurun/gpurun/tensors/model"
)

// spmModels maps tokenizer.ggml.model values that are SentencePiece
// vocabularies to SentencePiece model types: llama.cpp's "llama" is its SPM
// tokenizer (score-ordered merges, i.e. SentencePiece BPE), "t5" is unigram.
var spmModels = map[string]string{"llama": "bpe", "t5": "unigram"}

// Vocab reads the tokenizer.ggml.* metadata alone, as Checkpoint does (a
// vocabulary-only file, without tensors, is enough); nil without error
// when the file has no tokenizer.
func (f *File) Vocab() (*model.Vocab, error) { return f.vocab() }

// vocab reads the tokenizer.ggml.* metadata. It returns nil without error when
// the file has no tokenizer, and ErrUnsupported for a kind that is neither
// SentencePiece-like nor byte-level BPE (WordPiece "bert", "rwkv").
func (f *File) vocab() (*model.Vocab, error) {
	mv, ok := f.Get("tokenizer.ggml.model")
	if !ok {
		return nil, nil
	}
	name, ok := mv.Str()
	if !ok {
		return nil, fmt.Errorf("%w: tokenizer.ggml.model is %s, not a string", ErrFormat, mv.Type)
	}
	if name == "gpt2" || name == "gemma4" {
		return f.gpt2Vocab(name)
	}
	kind, ok := spmModels[name]
	if !ok {
		if name == "none" || name == "no_vocab" {
			return nil, nil // llama.cpp's "this model has no vocabulary"
		}
		return nil, fmt.Errorf("%w: tokenizer.ggml.model %q (gpurun reads llama, t5, gpt2 and gemma4 vocabularies)", ErrUnsupported, name)
	}
	tv, ok := f.Get("tokenizer.ggml.tokens")
	if !ok {
		return nil, fmt.Errorf("%w: tokenizer.ggml.tokens missing", ErrFormat)
	}
	pieces, err := tv.Strings()
	if err != nil {
		return nil, fmt.Errorf("tokenizer.ggml.tokens: %w", err)
	}
	n := len(pieces)
	v := &model.Vocab{Model: kind, Pieces: pieces}
	if sv, ok := f.Get("tokenizer.ggml.scores"); ok {
		if v.Scores, err = sv.Float32s(); err != nil {
			return nil, fmt.Errorf("tokenizer.ggml.scores: %w", err)
		}
	} else {
		v.Scores = make([]float32, n)
	}
	if tt, ok := f.Get("tokenizer.ggml.token_type"); ok {
		if v.Types, err = tt.Int32s(); err != nil {
			return nil, fmt.Errorf("tokenizer.ggml.token_type: %w", err)
		}
	} else {
		v.Types = make([]int32, n)
	}
	if len(v.Scores) != n || len(v.Types) != n {
		return nil, fmt.Errorf("%w: %d tokens but %d scores and %d token types", ErrFormat, n, len(v.Scores), len(v.Types))
	}
	for i, t := range v.Types {
		switch {
		case t == 0: // llama.cpp's "undefined" is a normal piece
			v.Types[i] = model.PieceNormal
		case t < model.PieceNormal || t > model.PieceByte:
			return nil, fmt.Errorf("%w: token %d has type %d", ErrFormat, i, t)
		}
	}
	m := &meta{f: f}
	// llama.cpp's SPM defaults when the ids are not in the file.
	v.UNK = m.tokenID("tokenizer.ggml.unknown_token_id", 0, n)
	v.BOS = m.tokenID("tokenizer.ggml.bos_token_id", 1, n)
	v.EOS = m.tokenID("tokenizer.ggml.eos_token_id", 2, n)
	v.PAD = m.tokenID("tokenizer.ggml.padding_token_id", -1, n)
	v.AddDummyPrefix = m.bool("tokenizer.ggml.add_space_prefix", true)
	return v, m.err
}

// tokenID reads an optional token id key; def applies when the key is
// absent (and is dropped to -1 when it does not fit a small vocabulary).
// llama.cpp writes -1 for "no such token", often as the uint32 4294967295
// (its llama2.c converter puts padding_token_id = -1 into every file), and
// ignores ids outside the vocabulary, so any integer outside [0, n) means
// none: -1. Only a value that is not an integer is an error.
func (m *meta) tokenID(key string, def, n int) int {
	if def >= n {
		def = -1
	}
	v, ok := m.f.Get(key)
	if !ok {
		return def
	}
	i, ok := v.Int()
	if !ok && v.Type != TypeUint64 { // a uint64 past MaxInt64 is out of range too
		m.fail(key, v, "an integer")
		return def
	}
	if !ok || i < 0 || i >= int64(n) {
		return -1
	}
	return int(i)
}
