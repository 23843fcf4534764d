package testmodels

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// GGUFWithString writes a copy of the GGUF file at path with one more
// string metadata entry, key = value, and returns its path. The entry goes
// first, followed by a padding entry ("gpurun.test.padding") that makes the
// two a multiple of 32 bytes (GGUF's default alignment), so every later
// offset moves by that multiple and the tensor data stays aligned.
func GGUFWithString(t testing.TB, path, key, value string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) < 24 || string(data[:4]) != "GGUF" {
		t.Fatalf("%s is not a GGUF file", path)
	}
	kv := ggufString(nil, key, value)
	const padKey = "gpurun.test.padding"
	pad := 32 - (len(kv)+len(ggufString(nil, padKey, "")))%32
	kv = ggufString(kv, padKey, strings.Repeat(" ", pad%32))
	out := append(append([]byte(nil), data[:24]...), kv...)
	out = append(out, data[24:]...)
	binary.LittleEndian.PutUint64(out[16:], binary.LittleEndian.Uint64(data[16:])+2)
	dst := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(dst, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// ggufString appends a string metadata entry.
func ggufString(b []byte, key, value string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.LittleEndian.AppendUint32(b, 8) // string
	b = binary.LittleEndian.AppendUint64(b, uint64(len(value)))
	return append(b, value...)
}

// LlamaShape is the shape of a random-weight llama GGUF (LlamaGGUF).
type LlamaShape struct {
	Layers, Dim, FFN, Heads int
}

// Bytes is the size of its f32 weights.
func (s LlamaShape) Bytes() int64 {
	d, f, v := int64(s.Dim), int64(s.FFN), int64(len(llamaTokens))
	return 4 * (2*v*d + d + int64(s.Layers)*(2*d+4*d*d+3*d*f))
}

// llamaTokens is LlamaGGUF's vocabulary.
var llamaTokens = []string{"<unk>", "<s>", "</s>", "▁a", "▁b", "▁c", "▁d", "▁e"}

// LlamaGGUF writes a llama GGUF of the given shape with small
// pseudo-random f32 weights and an 8-piece vocabulary into a temporary
// directory and returns its path: a file as large as a test needs (the
// browser test's memory check), with nothing to compare its output to.
func LlamaGGUF(t testing.TB, s LlamaShape) string {
	t.Helper()
	var kv, infos []byte
	nkv, nt := 0, 0
	str := func(b []byte, v string) []byte {
		return append(binary.LittleEndian.AppendUint64(b, uint64(len(v))), v...)
	}
	u32 := func(key string, v uint32) {
		kv = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(str(kv, key), 4), v)
		nkv++
	}
	kv = str(binary.LittleEndian.AppendUint32(str(kv, "general.architecture"), 8), "llama")
	kv = str(binary.LittleEndian.AppendUint32(str(kv, "tokenizer.ggml.model"), 8), "llama")
	kv = binary.LittleEndian.AppendUint32(str(kv, "tokenizer.ggml.tokens"), 9)
	kv = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint32(kv, 8), uint64(len(llamaTokens)))
	for _, tok := range llamaTokens {
		kv = str(kv, tok)
	}
	nkv += 3
	u32("llama.embedding_length", uint32(s.Dim))
	u32("llama.feed_forward_length", uint32(s.FFN))
	u32("llama.block_count", uint32(s.Layers))
	u32("llama.attention.head_count", uint32(s.Heads))
	u32("llama.context_length", 64)
	kv = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(str(kv, "llama.attention.layer_norm_rms_epsilon"), 6), math.Float32bits(1e-5))
	nkv++

	var data []byte
	seed := uint32(1)
	tensor := func(name string, dims ...int) {
		for len(data)%32 != 0 {
			data = append(data, 0)
		}
		infos = binary.LittleEndian.AppendUint32(str(infos, name), uint32(len(dims)))
		n := 1
		for _, d := range dims {
			infos = binary.LittleEndian.AppendUint64(infos, uint64(d))
			n *= d
		}
		infos = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint32(infos, 0), uint64(len(data))) // f32
		for range n {
			seed = seed*1664525 + 1013904223
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(int32(seed>>16)-32768)/(1<<20)))
		}
		nt++
	}
	d, f, v := s.Dim, s.FFN, len(llamaTokens)
	tensor("token_embd.weight", d, v)
	tensor("output.weight", d, v)
	tensor("output_norm.weight", d)
	for l := range s.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		tensor(p+"attn_norm.weight", d)
		tensor(p+"ffn_norm.weight", d)
		for _, n := range []string{"attn_q", "attn_k", "attn_v", "attn_output"} {
			tensor(p+n+".weight", d, d)
		}
		tensor(p+"ffn_gate.weight", d, f)
		tensor(p+"ffn_up.weight", d, f)
		tensor(p+"ffn_down.weight", f, d)
	}
	out := binary.LittleEndian.AppendUint32([]byte("GGUF"), 3)
	out = binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(out, uint64(nt)), uint64(nkv))
	out = append(append(out, kv...), infos...)
	for len(out)%32 != 0 {
		out = append(out, 0)
	}
	out = append(out, data...)
	path := filepath.Join(t.TempDir(), "llama-synthetic.gguf")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
