package gguf

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/tensors/model"
)

// TestGPT2Vocab: a byte-level BPE vocabulary (tokenizer.ggml.model =
// "gpt2") is read with its merges and pre-tokenizer name; one without
// merges is an error naming the key.
func TestGPT2Vocab(t *testing.T) {
	var w ggufWriter
	w.string("tokenizer.ggml.model", "gpt2")
	w.string("tokenizer.ggml.pre", "qwen2")
	w.strings("tokenizer.ggml.tokens", []string{"a", "b", "ab", "Ġ", "<|endoftext|>"})
	w.strings("tokenizer.ggml.merges", []string{"a b"})
	w.u32("tokenizer.ggml.eos_token_id", 4)
	f, err := Parse(w.bytes())
	if err != nil {
		t.Fatal(err)
	}
	v, err := f.vocab()
	if err != nil {
		t.Fatal(err)
	}
	want := &model.Vocab{Model: "gpt2", Pieces: []string{"a", "b", "ab", "Ġ", "<|endoftext|>"}, Scores: make([]float32, 5),
		Types: []int32{1, 1, 1, 1, 1}, UNK: -1, BOS: -1, EOS: 4, PAD: -1, Merges: []string{"a b"}, Pre: "qwen2"}
	if !reflect.DeepEqual(v, want) {
		t.Errorf("vocab = %+v\nwant %+v", v, want)
	}

	var bad ggufWriter
	bad.string("tokenizer.ggml.model", "gpt2")
	bad.strings("tokenizer.ggml.tokens", []string{"a"})
	f, err = Parse(bad.bytes())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.vocab(); !errors.Is(err, ErrFormat) {
		t.Errorf("vocab without merges: %v", err)
	}
}

// TestUnknownTokenizerKind: a vocabulary kind gpurun cannot read is an error
// naming it, not a model silently without a tokenizer.
func TestUnknownTokenizerKind(t *testing.T) {
	var w ggufWriter
	w.string("tokenizer.ggml.model", "bert")
	w.strings("tokenizer.ggml.tokens", []string{"a"})
	f, err := Parse(w.bytes())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.vocab(); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), `"bert"`) {
		t.Errorf("bert vocabulary: %v", err)
	}
}
