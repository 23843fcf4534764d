package gguf

import (
	"bytes"
	"errors"
	"github.com/gpurun/gpurun/tensors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors/model"
	"google.golang.org/protobuf/encoding/protowire"
)

type spmPiece struct {
	piece string
	score float32
	typ   int32
}

// spmPieces reads ModelProto.pieces (field 1: piece 1, score 2, type 3,
// type defaulting to NORMAL) with protowire.
func spmPieces(t *testing.T, b []byte) []spmPiece {
	var out []spmPiece
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatal(protowire.ParseError(n))
		}
		b = b[n:]
		if num != 1 || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			b = b[n:]
			continue
		}
		msg, n := protowire.ConsumeBytes(b)
		b = b[n:]
		p := spmPiece{typ: 1}
		for len(msg) > 0 {
			f, ft, m := protowire.ConsumeTag(msg)
			msg = msg[m:]
			switch {
			case f == 1 && ft == protowire.BytesType:
				s, m := protowire.ConsumeBytes(msg)
				p.piece, msg = string(s), msg[m:]
			case f == 2 && ft == protowire.Fixed32Type:
				v, m := protowire.ConsumeFixed32(msg)
				p.score, msg = math.Float32frombits(v), msg[m:]
			case f == 3 && ft == protowire.VarintType:
				v, m := protowire.ConsumeVarint(msg)
				p.typ, msg = int32(v), msg[m:]
			default:
				msg = msg[protowire.ConsumeFieldValue(f, ft, msg):]
			}
		}
		out = append(out, p)
	}
	return out
}

func TestVocabMatchesSentencePieceModel(t *testing.T) {
	proto, err := os.ReadFile(filepath.Join(archDir(t), "../tok512.model"))
	if err != nil {
		t.Fatal(err)
	}
	want := spmPieces(t, proto)
	if len(want) != 512 {
		t.Fatalf("tok512.model: %d pieces", len(want))
	}
	for _, name := range []string{"llama", "gemma2", "falcon", "llama-q4_0"} {
		t.Run(name, func(t *testing.T) {
			ck, err := Load(filepath.Join(archDir(t), name+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			v := ck.Vocab
			if v == nil || v.Model != "bpe" || !v.AddDummyPrefix || v.UNK != 0 || v.BOS != 1 || v.EOS != 2 || v.PAD != -1 {
				t.Fatalf("vocab header %+v", v)
			}
			if len(v.Pieces) != len(want) {
				t.Fatalf("%d pieces, want %d", len(v.Pieces), len(want))
			}
			for i, w := range want {
				if v.Pieces[i] != w.piece || v.Scores[i] != w.score || v.Types[i] != w.typ {
					t.Errorf("piece %d = (%q %v %d), model has (%q %v %d)", i, v.Pieces[i], v.Scores[i], v.Types[i], w.piece, w.score, w.typ)
				}
			}
		})
	}
}

func TestTinyLlamaImports(t *testing.T) {
	ck, err := parseCheckpoint(tinyLlama())
	if err != nil {
		t.Fatal(err)
	}
	if ck.Vocab == nil || len(ck.Vocab.Pieces) != 4 || ck.Config.VocabSize != 4 {
		t.Fatalf("vocab %+v, size %d", ck.Vocab, ck.Config.VocabSize)
	}
	// A BOS default of 1 and EOS 2 fit the 4-piece vocabulary.
	if ck.Config.BOS != 1 || ck.Config.EOS != 2 {
		t.Errorf("bos/eos %d/%d", ck.Config.BOS, ck.Config.EOS)
	}
	// Q4_0 blocks of tinyLlama hold qs = 0x0f, 0xf0, ... : element j (j < 16)
	// is the low nibble of qs[j] (15 or 0, minus 8 gives 7 or -8 for even or
	// odd j), element j+16 the high nibble (-8 or 7). Packed as pairs
	// (2k low, 2k+1 high) in two's complement: 0x87 eight times, then 0x78.
	q4block := append(bytes.Repeat([]byte{0x87}, 8), bytes.Repeat([]byte{0x78}, 8)...)
	// Q8_0 blocks hold d = 1.0 (f16 0x3c00) and int8 -127, 127, ...
	q8block := bytes.Repeat([]byte{0x81, 0x7f}, 16)
	for _, tc := range []struct {
		name   string
		dtype  tensors.DType
		shape  []int
		block  []byte // repeated pattern of Data
		scales []byte // repeated pattern of Scales.Data, nil when unquantized
	}{
		{model.Layer(0, model.WUp), tensors.I4, []int{64, 32}, q4block, []byte{0x00, 0x38}},
		{model.Layer(0, model.WGate), tensors.I8, []int{64, 32}, q8block, []byte{0x00, 0x3c}},
		{model.Layer(0, model.WV), tensors.BF16, []int{32, 32}, []byte{0x80, 0x3f}, nil},
		{model.Layer(0, model.WDown), tensors.F16, []int{32, 64}, []byte{0, 0}, nil},
	} {
		tt := ck.Tensor(tc.name)
		if tt == nil {
			t.Fatalf("missing %s", tc.name)
		}
		if tt.DType != tc.dtype || !slices.Equal(tt.Shape, tc.shape) {
			t.Errorf("%s: %s%v, want %s%v", tc.name, tt.DType, tt.Shape, tc.dtype, tc.shape)
		}
		if !bytes.Equal(tt.Data, bytes.Repeat(tc.block, len(tt.Data)/len(tc.block))) {
			t.Errorf("%s: data % x..., want repeats of % x", tc.name, tt.Data[:min(16, len(tt.Data))], tc.block)
		}
		if (tt.Scales != nil) != (tc.scales != nil) {
			t.Fatalf("%s: scales %v", tc.name, tt.Scales)
		}
		if tt.Scales != nil {
			if !slices.Equal(tt.Scales.Shape, []int{64, 1}) || !bytes.Equal(tt.Scales.Data, bytes.Repeat(tc.scales, 64)) {
				t.Errorf("%s: scales %v % x", tc.name, tt.Scales.Shape, tt.Scales.Data[:4])
			}
			if tt.Scales.Name != tc.name+"_quantized_scale" {
				t.Errorf("scales named %q", tt.Scales.Name)
			}
		}
	}
}

func parseCheckpoint(b []byte) (*model.Checkpoint, error) {
	f, err := Parse(b)
	if err != nil {
		return nil, err
	}
	return f.Checkpoint()
}

func TestUnsupported(t *testing.T) {
	w := &ggufWriter{}
	w.string("general.architecture", "mamba")
	_, err := parseCheckpoint(w.bytes())
	if !errors.Is(err, ErrUnsupported) {
		t.Errorf("unknown architecture: err = %v, want ErrUnsupported", err)
	}
	w = &ggufWriter{}
	w.tensor("x", GGMLType(41), []uint64{128}, make([]byte, 18))
	f, err := Parse(w.bytes())
	if err != nil {
		t.Fatalf("a Q1_0 tensor info must parse: %v", err)
	}
	if _, err := f.TensorData(&f.Tensors[0]); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "Q1_0") {
		t.Errorf("Q1_0 data: err = %v, want ErrUnsupported naming the type", err)
	}
}

func TestZeroValue(t *testing.T) {
	var v Value
	if _, ok := v.Int(); ok {
		t.Error("zero Value has an Int")
	}
	if _, ok := v.Float(); ok {
		t.Error("zero Value has a Float")
	}
	if _, ok := v.Str(); ok {
		t.Error("zero Value has a Str")
	}
	_ = v.String()
}

// llama.cpp writes -1 for "no such token" (its llama2.c converter stores
// padding_token_id = -1 as the uint32 4294967295); out-of-range ids of any
// integer type mean none, while a value that is not an integer is an error.
func TestOutOfRangeTokenIDsMeanNone(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(w *ggufWriter)
		pad  int
		eos  int
	}{
		{"uint32 -1 padding", func(w *ggufWriter) { w.u32("tokenizer.ggml.padding_token_id", 0xffffffff) }, -1, 2},
		{"int32 -1 padding", func(w *ggufWriter) { w.i32("tokenizer.ggml.padding_token_id", -1) }, -1, 2},
		{"padding past the vocabulary", func(w *ggufWriter) { w.u32("tokenizer.ggml.padding_token_id", 4) }, -1, 2},
		{"valid padding", func(w *ggufWriter) { w.u32("tokenizer.ggml.padding_token_id", 3) }, 3, 2},
		{"eos -1", func(w *ggufWriter) { w.i32("tokenizer.ggml.eos_token_id", -1) }, -1, -1},
		{"eot -1", func(w *ggufWriter) { w.u32("tokenizer.ggml.eot_token_id", 0xffffffff) }, -1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ck, err := parseCheckpoint(tinyLlamaWith(tc.set))
			if err != nil {
				t.Fatal(err)
			}
			if ck.Vocab.PAD != tc.pad || ck.Vocab.EOS != tc.eos || len(ck.Config.StopTokens) != 0 {
				t.Errorf("pad %d eos %d stop %v, want pad %d eos %d", ck.Vocab.PAD, ck.Vocab.EOS, ck.Config.StopTokens, tc.pad, tc.eos)
			}
		})
	}
	_, err := parseCheckpoint(tinyLlamaWith(func(w *ggufWriter) { w.string("tokenizer.ggml.padding_token_id", "none") }))
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "padding_token_id") {
		t.Errorf("string padding id: err = %v, want ErrFormat naming the key", err)
	}
}

// TestLlama2cConverterFile loads a file written by llama.cpp's llama2.c
// converter (then quantized to Q4_K_M): its padding_token_id is -1.
func TestLlama2cConverterFile(t *testing.T) {
	path := filepath.Join(testmodels.Root(t), "testdata", "gguf", "k256-Q4_K_M.gguf")
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := f.Get("tokenizer.ggml.padding_token_id"); !ok || v.String() != "4294967295" {
		t.Fatalf("padding_token_id = %v (present %v); the test needs the converter's -1", v, ok)
	}
	ck, err := f.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if ck.Vocab.PAD != -1 || ck.Vocab.BOS != 1 || ck.Vocab.EOS != 2 {
		t.Errorf("pad %d bos %d eos %d", ck.Vocab.PAD, ck.Vocab.BOS, ck.Vocab.EOS)
	}
}
