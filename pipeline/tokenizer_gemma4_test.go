package pipeline

import (
	"slices"
	"testing"

	"github.com/gpurun/gpurun/tensors/model"
)

// TestTokenizerBytesGemma4: a GGUF gemma4 vocabulary becomes a tokenizer
// that sessions load as SentencePiece-style BPE: spaces as U+2581, a
// newline run that is a token kept whole, <0xNN> byte fallback, BOS in the
// post-processor, and decoding back to the text.
func TestTokenizerBytesGemma4(t *testing.T) {
	pieces := []string{"<bos>", "▁", "a", "b", "ab", "▁ab", "\n", "\n\n", "<0xC3>", "<0xA9>"}
	types := []int32{model.PieceControl, 1, 1, 1, 1, 1, 1, 1, model.PieceByte, model.PieceByte}
	ck := &model.Checkpoint{Config: model.Config{AddBOS: true}, Vocab: &model.Vocab{Model: "gemma4", Pre: "gemma4", Pieces: pieces,
		Types: types, Merges: []string{"a b", "▁ ab"}, BOS: 0, EOS: -1, UNK: -1, PAD: -1}}
	b, err := TokenizerBytes(ck)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := loadTokenizer(b)
	if err != nil {
		t.Fatal(err)
	}
	bt, ok := tok.(byteBPE)
	if !ok {
		t.Fatalf("loaded as %T", tok)
	}
	const text = "ab ab\n\né<bos>"
	ids := tok.Encode(text)
	if want := []int{4, 5, 7, 8, 9, 0}; !slices.Equal(ids, want) {
		t.Errorf("Encode = %v, want %v", ids, want)
	}
	if id, ok := bt.BOS(); !ok || id != 0 {
		t.Errorf("BOS = %d %v", id, ok)
	}
	if got := bt.Decode(ids); got != text {
		t.Errorf("Decode = %q", got)
	}
}
