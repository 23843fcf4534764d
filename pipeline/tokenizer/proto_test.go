package tokenizer

import (
	"bytes"
	"errors"
	"math"
	"os"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// TestMarshalRoundTrip checks that Marshal reproduces models written by
// spm_train byte for byte: every field, interpreted or not, survives.
func TestMarshalRoundTrip(t *testing.T) {
	for _, model := range conformanceModels {
		t.Run(model, func(t *testing.T) {
			want, err := os.ReadFile(modelPath(t, model))
			if err != nil {
				t.Fatal(err)
			}
			tok, err := Load(want)
			if err != nil {
				t.Fatal(err)
			}
			if got := tok.Marshal(); !bytes.Equal(got, want) {
				t.Fatalf("Marshal gives %d bytes differing from the %d-byte spm model", len(got), len(want))
			}
		})
	}
}

// Test-side proto builders, written directly with protowire so the error
// tests do not depend on the marshaling code under test.
func pbPiece(piece string, score float32, typ int) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.BytesType)
	b = protowire.AppendString(b, piece)
	b = protowire.AppendTag(b, 2, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, math.Float32bits(score))
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(typ))
	return b
}

func pbMessage(num protowire.Number, body []byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, body)
}

func pbVarint(num protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
}

// pbModel builds a ModelProto from pieces and optional trainer and
// normalizer bodies.
func pbModel(pieces [][]byte, trainer, normalizer []byte) []byte {
	var b []byte
	for _, p := range pieces {
		b = append(b, pbMessage(1, p)...)
	}
	if trainer != nil {
		b = append(b, pbMessage(2, trainer)...)
	}
	if normalizer != nil {
		b = append(b, pbMessage(3, normalizer)...)
	}
	return b
}

func TestLoadErrors(t *testing.T) {
	unk := pbPiece("<unk>", 0, typeUnknown)
	a := pbPiece("a", -1, typeNormal)
	bpe := pbVarint(3, modelBPE)
	charsmap := func(blob []byte) []byte {
		return pbMessage(2, blob)
	}
	valid := pbModel([][]byte{unk, a}, bpe, nil)
	tests := []struct {
		name  string
		proto []byte
		want  error
	}{
		{"truncated tag", []byte{0x0a}, ErrInvalidProto},
		{"length past end", []byte{0x0a, 0x05, 'a'}, ErrInvalidProto},
		{"overlong varint", []byte{0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, ErrInvalidProto},
		{"field number zero", []byte{0x00, 0x00}, ErrInvalidProto},
		{"truncated piece", pbModel([][]byte{unk, a[:len(a)-1]}, bpe, nil), ErrInvalidProto},
		{"truncated trainer", append(valid, 0x12, 0x02, 0x18), ErrInvalidProto},
		{"no unknown piece", pbModel([][]byte{a}, bpe, nil), ErrInvalidProto},
		{"two unknown pieces", pbModel([][]byte{unk, pbPiece("<unk2>", 0, typeUnknown)}, bpe, nil), ErrInvalidProto},
		{"empty piece", pbModel([][]byte{unk, pbPiece("", 0, typeNormal)}, bpe, nil), ErrInvalidProto},
		{"duplicate piece", pbModel([][]byte{unk, a, a}, bpe, nil), ErrInvalidProto},
		{"unknown piece type", pbModel([][]byte{unk, pbPiece("b", 0, 9)}, bpe, nil), ErrInvalidProto},
		{"byte piece without byte_fallback", pbModel([][]byte{unk, pbPiece("<0x41>", 0, typeByte)}, bpe, nil), ErrInvalidProto},
		{"malformed byte piece", pbModel([][]byte{unk, pbPiece("<0x4g>", 0, typeByte)}, append(bpe, pbVarint(35, 1)...), nil), ErrInvalidProto},
		{"lowercase byte piece", pbModel([][]byte{unk, pbPiece("<0xab>", 0, typeByte)}, append(bpe, pbVarint(35, 1)...), nil), ErrInvalidProto},
		{"word model", pbModel([][]byte{unk, a}, pbVarint(3, modelWord), nil), ErrUnsupportedModel},
		{"model type 9", pbModel([][]byte{unk, a}, pbVarint(3, 9), nil), ErrUnsupportedModel},
		{"charsmap too short", pbModel([][]byte{unk, a}, bpe, charsmap([]byte{1, 0})), ErrInvalidCharsmap},
		{"charsmap trie past end", pbModel([][]byte{unk, a}, bpe, charsmap([]byte{8, 0, 0, 0, 1, 2, 3, 4})), ErrInvalidCharsmap},
		{"charsmap trie not whole units", pbModel([][]byte{unk, a}, bpe, charsmap([]byte{3, 0, 0, 0, 1, 2, 3, 4})), ErrInvalidCharsmap},
		{"charsmap value out of range", pbModel([][]byte{unk, a}, bpe, charsmap([]byte{8, 0, 0, 0, 0, 0, 0, 0, 0x05, 0, 0, 0x80, 'x', 0})), ErrInvalidCharsmap},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok, err := Load(tc.proto)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Load = %v, %v; want error %v", tok, err, tc.want)
			}
		})
	}
	if _, err := Load(valid); err != nil {
		t.Fatalf("the valid base model fails: %v", err)
	}
}

// TestUnknownFieldsPreserved checks that fields this package does not
// interpret, including known numbers with another wire type, are written
// back in field order.
func TestUnknownFieldsPreserved(t *testing.T) {
	piece := append(pbPiece("a", -1, typeNormal), pbVarint(7, 42)...)
	trainer := append(pbVarint(3, modelBPE), pbMessage(1, []byte("corpus.txt"))...)
	trainer = append(trainer, pbMessage(40, []byte("not a varint"))...)
	normalizer := append(pbMessage(1, []byte("identity")), pbVarint(9, 1)...)
	in := pbModel([][]byte{pbPiece("<unk>", 0, typeUnknown), piece}, trainer, normalizer)
	in = append(in, pbMessage(4, []byte("self test"))...)
	tok, err := Load(in)
	if err != nil {
		t.Fatal(err)
	}
	out := tok.Marshal()
	// Expected: the same fields sorted by number within each message.
	sortedTrainer := append(pbMessage(1, []byte("corpus.txt")), pbVarint(3, modelBPE)...)
	sortedTrainer = append(sortedTrainer, pbMessage(40, []byte("not a varint"))...)
	want := pbModel([][]byte{pbPiece("<unk>", 0, typeUnknown), piece}, sortedTrainer, normalizer)
	want = append(want, pbMessage(4, []byte("self test"))...)
	if !bytes.Equal(out, want) {
		t.Fatalf("Marshal:\n got %q\nwant %q", out, want)
	}
	if tok.UNK() != 0 {
		t.Errorf("UNK() = %d, want 0 (unk_id with a bad wire type must not be used)", tok.UNK())
	}
}
