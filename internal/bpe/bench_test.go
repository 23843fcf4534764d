package bpe

import (
	"os"
	"testing"

	"github.com/gpurun/gpurun/internal/tokref"
)

// BenchmarkEncode encodes the SentencePiece conformance corpus with the
// Llama 3 and Qwen3 tokenizer.json files (bytes/s of input text).
func BenchmarkEncode(b *testing.B) {
	text, err := os.ReadFile(tokref.Input(b, "corpus"))
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"llama3", "qwen3"} {
		b.Run(name, func(b *testing.B) {
			tok, err := LoadFile(tokref.Vendor(b, name))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				tok.Encode(string(text))
			}
		})
	}
}

// BenchmarkLoad parses Llama 3's tokenizer.json (9 MB, 280k merges).
func BenchmarkLoad(b *testing.B) {
	data, err := os.ReadFile(tokref.Vendor(b, "llama3"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Load(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeStream decodes the corpus's Llama 3 ids one at a time, as
// a session does.
func BenchmarkDecodeStream(b *testing.B) {
	text, err := os.ReadFile(tokref.Input(b, "corpus"))
	if err != nil {
		b.Fatal(err)
	}
	tok, err := LoadFile(tokref.Vendor(b, "llama3"))
	if err != nil {
		b.Fatal(err)
	}
	ids := tok.Encode(string(text))[:2000]
	// generic: the path decoders other than a lone ByteLevel take (decode
	// everything again on each id), for comparison.
	generic := *tok
	generic.byteLevelDecoder = false
	for _, c := range []struct {
		name string
		tok  *Tokenizer
	}{{"bytelevel", tok}, {"generic", &generic}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				streamDecode(c.tok, ids)
			}
		})
	}
}
