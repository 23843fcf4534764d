package pipeline

import (
	"slices"
	"testing"

	"github.com/gpurun/gpurun/internal/modelfile"
	"github.com/gpurun/gpurun/tensors/model"
)

// TestTokenizerBytesGPT2: a GGUF gpt2 vocabulary becomes a tokenizer.json
// that sessions load as byte-level BPE; BOS goes into its post-processor
// when the config adds it.
func TestTokenizerBytesGPT2(t *testing.T) {
	pieces := []string{"a", "b", "ab", "Ġ", "Ġab", "<|bos|>"}
	ck := &model.Checkpoint{Config: model.Config{AddBOS: true}, Vocab: &model.Vocab{Model: "gpt2", Pieces: pieces,
		Types: []int32{1, 1, 1, 1, 1, model.PieceControl}, Merges: []string{"a b", "Ġ ab"}, Pre: "gpt-2", BOS: 5, EOS: -1, UNK: -1, PAD: -1}}
	b, err := TokenizerBytes(ck)
	if err != nil {
		t.Fatal(err)
	}
	if !modelfile.IsTokenizerJSON(b) {
		t.Fatalf("not a tokenizer.json: %.40q", b)
	}
	tok, err := loadTokenizer(b)
	if err != nil {
		t.Fatal(err)
	}
	bt, ok := tok.(byteBPE)
	if !ok {
		t.Fatalf("loaded as %T", tok)
	}
	if ids := tok.Encode("ab ab<|bos|>"); !slices.Equal(ids, []int{2, 4, 5}) {
		t.Errorf("Encode = %v", ids)
	}
	if c := bt.controlTokens(); len(c) != 1 || c["<|bos|>"] != 5 {
		t.Errorf("controlTokens = %v", c)
	}
	if id, ok := bt.BOS(); !ok || id != 5 {
		t.Errorf("BOS = %d %v", id, ok)
	}
	ck.Vocab.Pre = "no-such-pre"
	if _, err := TokenizerBytes(ck); err == nil {
		t.Error("unknown pre-tokenizer: want an error")
	}
	ck.Vocab, ck.Tokenizer = nil, []byte(`{"model": {"type": "WordPiece", "vocab": {}}}`)
	if _, err := TokenizerBytes(ck); err == nil {
		t.Error("a WordPiece tokenizer.json: want an error")
	}
}
