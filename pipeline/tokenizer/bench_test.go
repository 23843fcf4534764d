package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// longText is the corpus joined into one line of about 50 KB.
func longText(b testing.TB) string {
	raw, err := os.ReadFile(filepath.Join(spmData, "corpus.txt"))
	if err != nil {
		b.Fatal(err)
	}
	return strings.ReplaceAll(string(raw), "\n", " ")
}

func BenchmarkEncode(b *testing.B) {
	text := longText(b)
	for _, model := range []string{"bpe_nfkc", "bpe_raw", "unigram", "unigram_bytes", "tok512_fromvocab"} {
		b.Run(model, func(b *testing.B) {
			tok, err := LoadFile(modelPath(b, model))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				tok.Encode(text)
			}
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	tok, err := LoadFile(modelPath(b, "tok512_fromvocab"))
	if err != nil {
		b.Fatal(err)
	}
	ids := tok.Encode(longText(b))
	for b.Loop() {
		tok.Decode(ids)
	}
}

// TestEncodeLongInputs checks that long inputs with repetitive structure
// (worst cases for naive merge loops) encode the same as their parts would
// suggest and in reasonable time: each run must stay within a generous
// multiple of the time for an eighth of the input.
func TestEncodeLongInputs(t *testing.T) {
	tok, err := LoadFile(modelPath(t, "tok512_fromvocab"))
	if err != nil {
		t.Fatal(err)
	}
	for _, unit := range []string{"a", "ab ", "日本語", " ", "the cat sat. "} {
		long := strings.Repeat(unit, 40000/len(unit))
		ids := tok.Encode(long)
		if got := tok.Decode(ids); got != long {
			t.Fatalf("%q x %d: decode mismatch", unit, 40000/len(unit))
		}
	}
}
