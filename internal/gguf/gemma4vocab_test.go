package gguf

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

func (w *ggufWriter) boolean(key string, v bool) {
	w.str(&w.kv, key)
	binary.Write(&w.kv, binary.LittleEndian, uint32(TypeBool))
	b := byte(0)
	if v {
		b = 1
	}
	w.kv.WriteByte(b)
	w.nkv++
}

// gemma4Vocab writes a four-token tokenizer.ggml.model = "gemma4" vocabulary
// with a pre-tokenizer name of its own and add_bos_token false.
func gemma4Vocab(w *ggufWriter, bos bool) {
	w.string("tokenizer.ggml.model", "gemma4")
	w.string("tokenizer.ggml.pre", "default")
	w.strings("tokenizer.ggml.tokens", []string{"<bos>", "<turn|>", "ab", "<|tool_response>"})
	w.strings("tokenizer.ggml.merges", []string{"a b"})
	w.u32("tokenizer.ggml.eos_token_id", 1)
	if bos {
		w.u32("tokenizer.ggml.bos_token_id", 0)
	}
	w.boolean("tokenizer.ggml.add_bos_token", false)
}

// TestGemma4Vocab: a gemma4 vocabulary is read with its merges and the
// "gemma4" pre-tokenizer whatever tokenizer.ggml.pre says, and the
// checkpoint adds BOS although the file says not to and stops at
// <|tool_response> besides EOS (<turn|> here), as llama.cpp 81ff7abe5 does; without a BOS id the import is an error, not a prompt
// llama.cpp would abort on.
func TestGemma4Vocab(t *testing.T) {
	ck, err := parseCheckpoint(tinyLlamaWith(func(w *ggufWriter) { gemma4Vocab(w, true) }))
	if err != nil {
		t.Fatal(err)
	}
	v := ck.Vocab
	if v.Model != "gemma4" || v.Pre != "gemma4" || len(v.Merges) != 1 || v.BOS != 0 || v.EOS != 1 || v.UNK != -1 {
		t.Errorf("vocab = %+v", v)
	}
	if !ck.Config.AddBOS || ck.Config.BOS != 0 {
		t.Errorf("AddBOS %v, BOS %d: want BOS 0 added", ck.Config.AddBOS, ck.Config.BOS)
	}
	if c := ck.Config; c.EOS != 1 || !slices.Equal(c.StopTokens, []int{3}) {
		t.Errorf("EOS %d, stop tokens %v: want 1 and [3]", c.EOS, c.StopTokens)
	}
	if _, err := parseCheckpoint(tinyLlamaWith(func(w *ggufWriter) { gemma4Vocab(w, false) })); !errors.Is(err, ErrFormat) {
		t.Errorf("gemma4 vocabulary without BOS: %v", err)
	}
}
