package llama2c

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors/model"
)

// protoPiece is one ModelProto.SentencePiece entry.
type protoPiece struct {
	piece string
	score float32
	typ   int32 // 1 (NORMAL) when absent
}

// readVarint decodes a protobuf varint at b[*off].
func readVarint(t *testing.T, b []byte, off *int) uint64 {
	var v uint64
	for shift := 0; ; shift += 7 {
		if *off >= len(b) || shift > 63 {
			t.Fatalf("bad varint at %d", *off)
		}
		c := b[*off]
		*off++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
}

// protoFields walks one message and calls fn for each field; for
// length-delimited fields val is the payload, otherwise num holds the value.
func protoFields(t *testing.T, b []byte, fn func(field int, num uint64, val []byte)) {
	for off := 0; off < len(b); {
		key := readVarint(t, b, &off)
		field, wire := int(key>>3), key&7
		switch wire {
		case 0:
			fn(field, readVarint(t, b, &off), nil)
		case 1:
			fn(field, binary.LittleEndian.Uint64(b[off:]), nil)
			off += 8
		case 2:
			n := int(readVarint(t, b, &off))
			fn(field, 0, b[off:off+n])
			off += n
		case 5:
			fn(field, uint64(binary.LittleEndian.Uint32(b[off:])), nil)
			off += 4
		default:
			t.Fatalf("wire type %d", wire)
		}
	}
}

// sentencePieces reads the pieces of a SentencePiece ModelProto (field 1,
// each with piece = 1, score = 2, type = 3).
func sentencePieces(t *testing.T, b []byte) []protoPiece {
	var out []protoPiece
	protoFields(t, b, func(field int, _ uint64, val []byte) {
		if field != 1 {
			return
		}
		p := protoPiece{typ: model.PieceNormal}
		protoFields(t, val, func(f int, num uint64, v []byte) {
			switch f {
			case 1:
				p.piece = string(v)
			case 2:
				p.score = math.Float32frombits(uint32(num))
			case 3:
				p.typ = int32(num)
			}
		})
		out = append(out, p)
	})
	return out
}

func TestLoadTokenizerMatchesSentencePieceModel(t *testing.T) {
	dir := testmodels.Dir(t)
	want := sentencePieces(t, readFile(t, filepath.Join(dir, "tok512.model")))
	if len(want) != 512 {
		t.Fatalf("tok512.model has %d pieces", len(want))
	}
	v, err := LoadTokenizer(filepath.Join(dir, "tok512.bin"), len(want))
	if err != nil {
		t.Fatal(err)
	}
	if v.Model != "bpe" || !v.AddDummyPrefix || v.UNK != 0 || v.BOS != 1 || v.EOS != 2 || v.PAD != -1 {
		t.Errorf("vocab header = %q dummy=%v unk=%d bos=%d eos=%d pad=%d", v.Model, v.AddDummyPrefix, v.UNK, v.BOS, v.EOS, v.PAD)
	}
	if len(v.Pieces) != len(want) || len(v.Scores) != len(want) || len(v.Types) != len(want) {
		t.Fatalf("lengths %d/%d/%d, want %d", len(v.Pieces), len(v.Scores), len(v.Types), len(want))
	}
	bad := 0
	for i, w := range want {
		if v.Pieces[i] != w.piece || math.Float32bits(v.Scores[i]) != math.Float32bits(w.score) || v.Types[i] != w.typ {
			if bad++; bad <= 10 {
				t.Errorf("piece %d = (%q, %v, %d), model has (%q, %v, %d)", i, v.Pieces[i], v.Scores[i], v.Types[i], w.piece, w.score, w.typ)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d pieces differ", bad, len(want))
	}
}

// tokenizerBin writes a tokenizer.bin the way llama2.c's exporter does.
func tokenizerBin(pieces []string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 16)
	for i, p := range pieces {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(-i)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

func TestParseTokenizerBadInput(t *testing.T) {
	good := tokenizerBin([]string{"<unk>", "\n<s>\n", "\n</s>\n", " a"})
	set := func(off int, v uint32) []byte {
		b := append([]byte(nil), good...)
		binary.LittleEndian.PutUint32(b[off:], v)
		return b
	}
	for _, tc := range []struct {
		name  string
		data  []byte
		vocab int
	}{
		{"empty", nil, 4},
		{"negative vocab", good, -1},
		{"zero vocab, truncated", good[:len(good)-1], 0},
		{"zero vocab, empty", nil, 0},
		{"vocab larger than file", good, 1 << 30},
		{"one piece too many", good, 5},
		{"one piece too few", good, 3},
		{"truncated", good[:len(good)-1], 4},
		{"negative length", set(8, 0xffffffff), 4},
		{"length above max", set(8, 17), 4},
		{"zero max length", set(0, 0), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseTokenizer(tc.data, tc.vocab); !errors.Is(err, ErrFormat) {
				t.Fatalf("err = %v, want ErrFormat", err)
			}
		})
	}
	for _, vocab := range []int{4, 0} { // 0: count the pieces in the file
		v, err := ParseTokenizer(good, vocab)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%q", v.Pieces); got != `["<unk>" "<s>" "</s>" "▁a"]` {
			t.Errorf("vocab %d: pieces = %s", vocab, got)
		}
	}
}
