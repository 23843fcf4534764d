package tokenizer

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the ModelProto parser. Whatever loads
// must marshal to a fixed point and encode and decode without panicking.
func FuzzLoad(f *testing.F) {
	unk := pbPiece("<unk>", 0, typeUnknown)
	f.Add(pbModel([][]byte{unk, pbPiece("a", -1, typeNormal), pbPiece("ab", -2, typeNormal)}, pbVarint(3, modelBPE), nil))
	f.Add(pbModel([][]byte{unk, pbPiece("a", -1, typeNormal), pbPiece("<0x61>", 0, typeByte)},
		append(pbVarint(3, modelUnigram), pbVarint(35, 1)...), pbVarint(3, 0)))
	f.Add(pbModel([][]byte{unk, pbPiece("x", 0, typeUserDefined)}, pbVarint(3, modelChar),
		pbMessage(2, []byte{8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 'x', 0})))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := Load(data)
		if err != nil {
			return
		}
		out := tok.Marshal()
		again, err := Load(out)
		if err != nil {
			t.Fatalf("Load(Marshal()) fails: %v", err)
		}
		if !bytes.Equal(again.Marshal(), out) {
			t.Fatal("Marshal is not a fixed point")
		}
		for _, text := range []string{"", " a  b ", "ab\xffc▁ 日本"} {
			ids := tok.Encode(text)
			for _, id := range ids {
				if id < 0 || id >= tok.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d outside [0, %d)", text, id, tok.VocabSize())
				}
			}
			if got := again.Encode(text); formatIDs(got) != formatIDs(ids) {
				t.Fatalf("reloaded model encodes %q as %v, original %v", text, got, ids)
			}
			_ = tok.Decode(append(ids, -1, 0, tok.VocabSize()-1, tok.VocabSize()))
		}
	})
}

// spmSurface is what SentencePiece's identity normalizer and decoder make
// of text: each invalid UTF-8 byte becomes U+FFFD and U+2581 reads as a
// space.
func spmSurface(s string) string {
	var b strings.Builder
	for _, r := range s { // range yields U+FFFD once per invalid byte
		b.WriteRune(r)
	}
	return strings.ReplaceAll(b.String(), spaceSymbol, " ")
}

// FuzzEncode encodes arbitrary text with the committed test models. For
// the identity-normalized, byte-fallback model built from tok512.bin,
// decoding must give the text back (up to invalid bytes and U+2581).
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", " ", "hello world", "  two  spaces ", "\t\ttabs", "日本語テキスト", "👩\u200d💻 zwj",
		"e\u0301", "ＡＢＣ１２３", "<sep>ab[MASK]", "\xff\xe3\x81", "▁▁x", "a\x00b"} {
		f.Add(s)
	}
	load := func(name string) *Tokenizer {
		tok, err := LoadFile(filepath.Join(spmData, name+".model"))
		if err != nil {
			f.Fatal(err)
		}
		return tok
	}
	lossless := load("tok512_fromvocab")
	others := []*Tokenizer{load("bpe_raw"), load("unigram_bytes"), load("char_suffix")}
	f.Fuzz(func(t *testing.T, text string) {
		ids := lossless.Encode(text)
		if got, want := lossless.Decode(ids), spmSurface(text); got != want {
			t.Fatalf("Decode(Encode(%q)) = %q, want %q", text, got, want)
		}
		if got := decodeStreaming(t, lossless, ids); got != lossless.Decode(ids) {
			t.Fatalf("streaming decode %q differs from Decode", got)
		}
		for _, tok := range others {
			ids := tok.Encode(text)
			for _, id := range ids {
				if id < 0 || id >= tok.VocabSize() || tok.IsControl(id) {
					t.Fatalf("Encode(%q) gave id %d (control %v)", text, id, tok.IsControl(id))
				}
			}
			if got := decodeStreaming(t, tok, ids); got != tok.Decode(ids) {
				t.Fatalf("streaming decode %q differs from Decode %q", got, tok.Decode(ids))
			}
		}
	})
}
