package gguf

import (
	"bytes"
	"encoding/binary"
	"io"
	"math"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// archDir is ../shared/models/arch beside the repository root.
func archDir(t testing.TB) string {
	t.Helper()
	return testmodels.Path(t, "arch")
}

// rawTensor is a tensor as located by the test's own GGUF walker.
type rawTensor struct {
	name  string
	dims  []uint64
	typ   uint32
	start int64 // absolute offset in the file
}

// walkGGUF is an independent, minimal GGUF reader for the tests: it streams
// through the header with encoding/binary and returns each tensor's absolute
// data offset and the general.alignment it found.
func walkGGUF(t *testing.T, data []byte) ([]rawTensor, int64) {
	t.Helper()
	r := bytes.NewReader(data)
	var hdr struct {
		Magic   [4]byte
		Version uint32
		NT, NKV uint64
	}
	must := func(err error) {
		if err != nil {
			t.Helper()
			t.Fatal(err)
		}
	}
	must(binary.Read(r, binary.LittleEndian, &hdr))
	readStr := func() string {
		var n uint64
		must(binary.Read(r, binary.LittleEndian, &n))
		b := make([]byte, n)
		_, err := io.ReadFull(r, b)
		must(err)
		return string(b)
	}
	sizes := map[uint32]int64{0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
	var skip func(typ uint32) uint64
	skip = func(typ uint32) uint64 {
		switch typ {
		case 8:
			readStr()
			return 0
		case 9:
			var et uint32
			var n uint64
			must(binary.Read(r, binary.LittleEndian, &et))
			must(binary.Read(r, binary.LittleEndian, &n))
			for range n {
				skip(et)
			}
			return 0
		}
		b := make([]byte, sizes[typ])
		_, err := io.ReadFull(r, b)
		must(err)
		var v uint64
		for i := len(b) - 1; i >= 0; i-- {
			v = v<<8 | uint64(b[i])
		}
		return v
	}
	align := int64(32)
	for range hdr.NKV {
		key := readStr()
		var typ uint32
		must(binary.Read(r, binary.LittleEndian, &typ))
		v := skip(typ)
		if key == "general.alignment" {
			align = int64(v)
		}
	}
	var out []rawTensor
	for range hdr.NT {
		var rt rawTensor
		rt.name = readStr()
		var nd uint32
		must(binary.Read(r, binary.LittleEndian, &nd))
		rt.dims = make([]uint64, nd)
		must(binary.Read(r, binary.LittleEndian, rt.dims))
		must(binary.Read(r, binary.LittleEndian, &rt.typ))
		var off uint64
		must(binary.Read(r, binary.LittleEndian, &off))
		rt.start = int64(off)
		out = append(out, rt)
	}
	pos := int64(len(data)) - int64(r.Len())
	base := (pos + align - 1) / align * align
	for i := range out {
		out[i].start += base
	}
	return out, align
}

// halfToFloat decodes IEEE binary16, written here independently of the
// package and its dependencies.
func halfToFloat(h uint16) float32 {
	sign := float32(1)
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * float32(math.Ldexp(frac, -24))
	case 0x1f:
		if frac != 0 {
			return float32(math.NaN())
		}
		return sign * float32(math.Inf(1))
	}
	return sign * float32(math.Ldexp(1+frac/1024, exp-15))
}

// ggufWriter builds small GGUF files for the error and fuzz tests.
type ggufWriter struct {
	kv      bytes.Buffer
	nkv     int
	infos   bytes.Buffer
	nt      int
	payload bytes.Buffer
}

func (w *ggufWriter) str(b *bytes.Buffer, s string) {
	binary.Write(b, binary.LittleEndian, uint64(len(s)))
	b.WriteString(s)
}

func (w *ggufWriter) u32(key string, v uint32) {
	w.str(&w.kv, key)
	binary.Write(&w.kv, binary.LittleEndian, [2]uint32{uint32(TypeUint32), v})
	w.nkv++
}

func (w *ggufWriter) i32(key string, v int32) {
	w.str(&w.kv, key)
	binary.Write(&w.kv, binary.LittleEndian, [2]int32{int32(TypeInt32), v})
	w.nkv++
}

func (w *ggufWriter) f32(key string, v float32) {
	w.str(&w.kv, key)
	binary.Write(&w.kv, binary.LittleEndian, uint32(TypeFloat32))
	binary.Write(&w.kv, binary.LittleEndian, v)
	w.nkv++
}

func (w *ggufWriter) string(key, v string) {
	w.str(&w.kv, key)
	binary.Write(&w.kv, binary.LittleEndian, uint32(TypeString))
	w.str(&w.kv, v)
	w.nkv++
}

func (w *ggufWriter) strings(key string, vs []string) {
	w.str(&w.kv, key)
	binary.Write(&w.kv, binary.LittleEndian, [2]uint32{uint32(TypeArray), uint32(TypeString)})
	binary.Write(&w.kv, binary.LittleEndian, uint64(len(vs)))
	for _, s := range vs {
		w.str(&w.kv, s)
	}
	w.nkv++
}

// tensor appends an F32 tensor with ggml dims and the given values.
func (w *ggufWriter) tensor(name string, typ GGMLType, dims []uint64, data []byte) {
	for w.payload.Len()%32 != 0 {
		w.payload.WriteByte(0)
	}
	w.str(&w.infos, name)
	binary.Write(&w.infos, binary.LittleEndian, uint32(len(dims)))
	binary.Write(&w.infos, binary.LittleEndian, dims)
	binary.Write(&w.infos, binary.LittleEndian, uint32(typ))
	binary.Write(&w.infos, binary.LittleEndian, uint64(w.payload.Len()))
	w.payload.Write(data)
	w.nt++
}

func (w *ggufWriter) bytes() []byte {
	var b bytes.Buffer
	b.WriteString("GGUF")
	binary.Write(&b, binary.LittleEndian, uint32(3))
	binary.Write(&b, binary.LittleEndian, [2]uint64{uint64(w.nt), uint64(w.nkv)})
	b.Write(w.kv.Bytes())
	b.Write(w.infos.Bytes())
	for b.Len()%32 != 0 {
		b.WriteByte(0)
	}
	b.Write(w.payload.Bytes())
	return b.Bytes()
}

// f32Bytes encodes n float32 values start, start+step, ...
func f32Bytes(n int, start, step float32) []byte {
	b := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(start+float32(i)*step))
	}
	return b
}

// tinyLlama writes a complete one-layer llama GGUF (dim 32, 2 heads, ffn 64,
// vocab 4) including a Q8_0 and a Q4_0 tensor.
func tinyLlama() []byte { return tinyLlamaWith(nil) }

// tinyLlamaWith is tinyLlama with extra metadata written by set.
func tinyLlamaWith(set func(*ggufWriter)) []byte {
	w := &ggufWriter{}
	if set != nil {
		set(w)
	}
	w.string("general.architecture", "llama")
	for k, v := range map[string]uint32{"llama.embedding_length": 32, "llama.feed_forward_length": 64, "llama.block_count": 1,
		"llama.attention.head_count": 2, "llama.context_length": 16} {
		w.u32(k, v)
	}
	w.f32("llama.attention.layer_norm_rms_epsilon", 1e-5)
	if !bytes.Contains(w.kv.Bytes(), []byte("tokenizer.ggml.model")) { // set may write its own vocabulary
		w.string("tokenizer.ggml.model", "llama")
		w.strings("tokenizer.ggml.tokens", []string{"<unk>", "<s>", "</s>", "▁a"})
	}
	d, f := uint64(32), uint64(64)
	w.tensor("token_embd.weight", GGMLF32, []uint64{d, 4}, f32Bytes(int(d*4), 0, 0.01))
	w.tensor("output_norm.weight", GGMLF32, []uint64{d}, f32Bytes(int(d), 1, 0))
	w.tensor("blk.0.attn_norm.weight", GGMLF32, []uint64{d}, f32Bytes(int(d), 1, 0))
	w.tensor("blk.0.ffn_norm.weight", GGMLF32, []uint64{d}, f32Bytes(int(d), 1, 0))
	for _, n := range []string{"attn_q", "attn_k", "attn_output"} {
		w.tensor("blk.0."+n+".weight", GGMLF32, []uint64{d, d}, f32Bytes(int(d*d), -1, 0.001))
	}
	w.tensor("blk.0.attn_v.weight", GGMLBF16, []uint64{d, d}, bytes.Repeat([]byte{0x80, 0x3f}, int(d*d)))
	q8 := bytes.Repeat(append([]byte{0x00, 0x3c}, bytes.Repeat([]byte{0x81, 0x7f}, 16)...), int(d*f/32))
	q4 := bytes.Repeat(append([]byte{0x00, 0x38}, bytes.Repeat([]byte{0x0f, 0xf0}, 8)...), int(d*f/32))
	w.tensor("blk.0.ffn_gate.weight", GGMLQ8_0, []uint64{d, f}, q8)
	w.tensor("blk.0.ffn_up.weight", GGMLQ4_0, []uint64{d, f}, q4)
	w.tensor("blk.0.ffn_down.weight", GGMLF16, []uint64{f, d}, make([]byte, 2*d*f))
	return w.bytes()
}
