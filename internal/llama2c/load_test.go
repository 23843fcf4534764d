package llama2c

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLoadStoriesConfig(t *testing.T) {
	dir := testmodels.Dir(t)
	g := testmodels.LoadStories(t).SourceModel.Header
	raw := readFile(t, filepath.Join(dir, "stories260K.bin"))
	var hdr [7]int32
	if err := binary.Read(bytes.NewReader(raw), binary.LittleEndian, &hdr); err != nil {
		t.Fatal(err)
	}
	ck, err := Load(filepath.Join(dir, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	c := ck.Config
	if err := c.Validate(); err != nil {
		t.Fatalf("config does not validate: %v", err)
	}
	for _, tc := range []struct {
		field    string
		got      any
		fromFile any
		fromJSON any
	}{
		{"dim", c.Dim, int(hdr[0]), g.Dim},
		{"hidden_dim", c.HiddenDim, int(hdr[1]), g.HiddenDim},
		{"layers", c.Layers, int(hdr[2]), g.Layers},
		{"heads", c.Heads, int(hdr[3]), g.Heads},
		{"kv_heads", c.KVHeads, int(hdr[4]), g.KVHeads},
		{"vocab", c.VocabSize, int(max(hdr[5], -hdr[5])), g.VocabSize},
		{"max_seq_len", c.MaxSeqLen, int(hdr[6]), g.SeqLen},
		{"tied", c.Tied, hdr[5] > 0, g.SharedClassifier},
		{"head_dim", c.HeadDim, int(hdr[0] / hdr[3]), g.Dim / g.Heads},
		{"rope_dims", c.RopeDims, int(hdr[0] / hdr[3]), g.Dim / g.Heads},
	} {
		if tc.got != tc.fromFile || tc.got != tc.fromJSON {
			t.Errorf("%s = %v, file header says %v, golden JSON %v", tc.field, tc.got, tc.fromFile, tc.fromJSON)
		}
	}
	// The fixed part of llama2.c's architecture (run.c).
	for _, tc := range []struct {
		field     string
		got, want any
	}{
		{"arch", c.Arch, "llama"},
		{"norm", c.Norm, "rms"},
		{"norm_eps", c.NormEps, float32(1e-5)},
		{"rope_style", c.RopeStyle, "interleaved"},
		{"rope_base", c.RopeBase, float32(10000)},
		{"act", c.Act, "silu"},
		{"gated", c.GatedFFN, true},
		{"bos", c.BOS, 1},
		{"eos", c.EOS, 2},
		{"add_bos", c.AddBOS, true},
		{"parallel", c.Parallel, false},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.field, tc.got, tc.want)
		}
	}
}

// TestLoadStoriesWeights compares every tensor with the file bytes at offsets
// computed here from the llama2.c export order.
func TestLoadStoriesWeights(t *testing.T) {
	path := filepath.Join(testmodels.Dir(t), "stories260K.bin")
	raw := readFile(t, path)
	ck, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var h [7]int32
	binary.Read(bytes.NewReader(raw), binary.LittleEndian, &h)
	dim, hid, nl, nh, nkv, vocab, seq := int(h[0]), int(h[1]), int(h[2]), int(h[3]), int(h[4]), int(h[5]), int(h[6])
	shared := vocab > 0
	vocab = max(vocab, -vocab)
	hd := dim / nh
	type want struct {
		name  string
		shape []int
		off   int
	}
	var wants []want
	off := 28
	add := func(name string, shape ...int) {
		wants = append(wants, want{name, shape, off})
		n := 1
		for _, d := range shape {
			n *= d
		}
		off += 4 * n
	}
	add(model.TokenEmbedding, vocab, dim)
	perLayer := func(suffix string, shape ...int) {
		for l := 0; l < nl; l++ {
			add(model.Layer(l, suffix), shape...)
		}
	}
	perLayer(model.AttnNorm, dim)
	perLayer(model.WQ, nh*hd, dim)
	perLayer(model.WK, nkv*hd, dim)
	perLayer(model.WV, nkv*hd, dim)
	perLayer(model.WO, dim, nh*hd)
	perLayer(model.FFNNorm, dim)
	perLayer(model.WGate, hid, dim)
	perLayer(model.WDown, dim, hid)
	perLayer(model.WUp, hid, dim)
	add(model.FinalNorm, dim)
	off += 2 * 4 * seq * hd / 2
	if !shared {
		add(model.LMHead, vocab, dim)
	}
	if off != len(raw) {
		t.Fatalf("test layout ends at %d, file has %d bytes", off, len(raw))
	}
	if len(ck.Tensors) != len(wants) {
		t.Errorf("%d tensors, want %d", len(ck.Tensors), len(wants))
	}
	for _, w := range wants {
		tt := ck.Tensor(w.name)
		if tt == nil {
			t.Errorf("missing %s", w.name)
			continue
		}
		if err := tt.Check(); err != nil {
			t.Error(err)
		}
		n := 1
		for _, d := range w.shape {
			n *= d
		}
		if tt.DType != tensors.F32 || !slices.Equal(tt.Shape, w.shape) {
			t.Errorf("%s: %s%v, want f32%v", w.name, tt.DType, tt.Shape, w.shape)
			continue
		}
		if !bytes.Equal(tt.Data, raw[w.off:w.off+4*n]) {
			t.Errorf("%s: data differs from file bytes at %d", w.name, w.off)
		}
	}
}

// tinyCheckpoint builds a valid checkpoint with the given header; the body
// holds the float32 index of each element so misplaced arrays show.
func tinyCheckpoint(dim, hidden, layers, heads, kvHeads, vocab, seq int) []byte {
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, [7]int32{int32(dim), int32(hidden), int32(layers), int32(heads), int32(kvHeads), int32(vocab), int32(seq)})
	v := max(vocab, -vocab)
	hd := dim / heads
	n := v*dim + layers*(dim+dim*dim+2*kvHeads*hd*dim+dim*dim+dim+3*dim*hidden) + dim + seq*hd
	if vocab < 0 {
		n += v * dim
	}
	for i := range n {
		binary.Write(&buf, binary.LittleEndian, float32(i))
	}
	return buf.Bytes()
}

func TestParseUnsharedClassifier(t *testing.T) {
	data := tinyCheckpoint(8, 12, 2, 2, 1, -10, 4)
	ck, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if ck.Config.Tied || ck.Config.VocabSize != 10 {
		t.Fatalf("tied=%v vocab=%d, want untied 10", ck.Config.Tied, ck.Config.VocabSize)
	}
	head := ck.Tensor(model.LMHead)
	if head == nil {
		t.Fatal("no LM head")
	}
	// The classifier is the last vocab*dim floats of the file.
	if !bytes.Equal(head.Data, data[len(data)-4*10*8:]) {
		t.Error("classifier is not the tail of the file")
	}
	tied, err := Parse(tinyCheckpoint(8, 12, 2, 2, 1, 10, 4))
	if err != nil {
		t.Fatal(err)
	}
	if !tied.Config.Tied || tied.Tensor(model.LMHead) != nil {
		t.Error("shared classifier must give a tied config without an LM head tensor")
	}
}

func TestParseBadInput(t *testing.T) {
	good := tinyCheckpoint(8, 12, 2, 2, 1, 10, 4)
	withHeader := func(vals ...int32) []byte {
		b := append([]byte(nil), good...)
		for i, v := range vals {
			binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		data  []byte
		extra error
	}{
		{"empty", nil, io.ErrUnexpectedEOF},
		{"short header", good[:27], io.ErrUnexpectedEOF},
		{"header only", good[:28], io.ErrUnexpectedEOF},
		{"truncated by one byte", good[:len(good)-1], io.ErrUnexpectedEOF},
		{"one extra byte", append(append([]byte(nil), good...), 0), ErrTrailingData},
		{"zero dim", withHeader(0), nil},
		{"negative layers", withHeader(8, 12, -2), nil},
		{"huge dims", withHeader(1<<20, 1<<20, 1<<20, 1<<10, 1<<10, 1<<20, 1<<20), nil},
		{"dim not divisible by heads", withHeader(8, 12, 2, 3, 1), nil},
		{"kv heads above heads", withHeader(8, 12, 2, 2, 4), nil},
		{"odd head dim", withHeader(6, 12, 2, 2, 1), nil},
		{"min int vocab", withHeader(8, 12, 2, 2, 1, -1<<31), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.data)
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("err = %v, want ErrFormat", err)
			}
			if tc.extra != nil && !errors.Is(err, tc.extra) {
				t.Fatalf("err = %v, want it to wrap %v", err, tc.extra)
			}
		})
	}
}
