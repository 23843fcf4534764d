// Package llama2c reads Andrej Karpathy's llama2.c checkpoints (the legacy
// "version 0" export: a 7-int32 header followed by raw f32 arrays) and its
// tokenizer.bin vocabulary files.
package llama2c

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrFormat reports a file that is not a well-formed llama2.c checkpoint or
// tokenizer. Size mismatches also wrap io.ErrUnexpectedEOF (truncated) or
// ErrTrailingData (oversized).
var ErrFormat = errors.New("llama2c: malformed file")

// ErrTrailingData reports bytes after the last array the header describes.
var ErrTrailingData = errors.New("llama2c: trailing data")

// HeaderSize is the byte size of the legacy header: seven int32 values.
const HeaderSize = 7 * 4

// maxDim bounds every header value. Real llama2.c models are far smaller; the
// bound keeps every product below 2^62 before it is compared with the file
// size.
const maxDim = 1 << 20

// Header is the legacy llama2.c checkpoint header.
type Header struct {
	Dim       int
	HiddenDim int
	Layers    int
	Heads     int
	KVHeads   int
	VocabSize int // always positive here; SharedClassifier carries the sign
	SeqLen    int
	// SharedClassifier is true when the file stored a positive vocab size: the
	// output projection reuses the token embedding.
	SharedClassifier bool
}

// HeadDim is the per-head width.
func (h Header) HeadDim() int { return h.Dim / h.Heads }

// KVDim is the width of the K and V projections.
func (h Header) KVDim() int { return h.KVHeads * h.HeadDim() }

// ParseHeader decodes and validates the first HeaderSize bytes of data.
func ParseHeader(data []byte) (Header, error) {
	if len(data) < HeaderSize {
		return Header{}, fmt.Errorf("%w: %w: %d bytes is shorter than the %d-byte header", ErrFormat, io.ErrUnexpectedEOF, len(data), HeaderSize)
	}
	var v [7]int
	for i := range v {
		v[i] = int(int32(binary.LittleEndian.Uint32(data[4*i:])))
	}
	h := Header{Dim: v[0], HiddenDim: v[1], Layers: v[2], Heads: v[3], KVHeads: v[4], VocabSize: v[5], SeqLen: v[6]}
	h.SharedClassifier = h.VocabSize > 0
	if h.VocabSize < 0 {
		h.VocabSize = -h.VocabSize
	}
	return h, h.validate()
}

func (h Header) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"dim", h.Dim}, {"hidden_dim", h.HiddenDim}, {"n_layers", h.Layers}, {"n_heads", h.Heads},
		{"n_kv_heads", h.KVHeads}, {"vocab_size", h.VocabSize}, {"seq_len", h.SeqLen}} {
		if f.v <= 0 || f.v > maxDim {
			return fmt.Errorf("%w: header %s = %d outside [1, %d]", ErrFormat, f.name, f.v, maxDim)
		}
	}
	if h.Dim%h.Heads != 0 {
		return fmt.Errorf("%w: dim %d not divisible by n_heads %d", ErrFormat, h.Dim, h.Heads)
	}
	if h.KVHeads > h.Heads || h.Heads%h.KVHeads != 0 {
		return fmt.Errorf("%w: n_heads %d not a multiple of n_kv_heads %d", ErrFormat, h.Heads, h.KVHeads)
	}
	if h.HeadDim()%2 != 0 {
		return fmt.Errorf("%w: odd head_dim %d cannot be rotated in pairs", ErrFormat, h.HeadDim())
	}
	return nil
}

// array is one f32 array of the file body, in file order.
type array struct {
	name  string // our tensor name, "" for the skipped RoPE tables
	shape []int  // shape of one tensor (per layer when perLayer)
	// perLayer arrays hold Layers consecutive tensors of shape.
	perLayer bool
}

// layout lists the arrays of the body in file order.
func (h Header) layout() []array {
	kv := h.KVDim()
	rope := h.SeqLen * h.HeadDim() / 2
	a := []array{
		{name: "token_embedding", shape: []int{h.VocabSize, h.Dim}},
		{name: "attn_norm", shape: []int{h.Dim}, perLayer: true},
		{name: "wq", shape: []int{h.Dim, h.Dim}, perLayer: true},
		{name: "wk", shape: []int{kv, h.Dim}, perLayer: true},
		{name: "wv", shape: []int{kv, h.Dim}, perLayer: true},
		{name: "wo", shape: []int{h.Dim, h.Dim}, perLayer: true},
		{name: "ffn_norm", shape: []int{h.Dim}, perLayer: true},
		{name: "w1", shape: []int{h.HiddenDim, h.Dim}, perLayer: true},
		{name: "w2", shape: []int{h.Dim, h.HiddenDim}, perLayer: true},
		{name: "w3", shape: []int{h.HiddenDim, h.Dim}, perLayer: true},
		{name: "final_norm", shape: []int{h.Dim}},
		{name: "", shape: []int{rope}}, // freq_cis_real
		{name: "", shape: []int{rope}}, // freq_cis_imag
	}
	if !h.SharedClassifier {
		a = append(a, array{name: "classifier", shape: []int{h.VocabSize, h.Dim}})
	}
	return a
}

// elements is the element count of one tensor of the array.
func (a array) elements() int64 {
	n := int64(1)
	for _, d := range a.shape {
		n *= int64(d)
	}
	return n
}

// maxFileSize bounds the size a header may imply (1 PiB), far beyond any real
// checkpoint, so that sums of array sizes cannot overflow.
const maxFileSize = 1 << 50

// FileSize is the exact byte size a checkpoint with this header has. It fails
// when that size exceeds maxFileSize (header values are at most 2^20, so each
// product is below 2^62 and is checked before it is summed).
func (h Header) FileSize() (int64, error) {
	total := int64(HeaderSize)
	for _, a := range h.layout() {
		n := a.elements()
		if a.perLayer {
			n *= int64(h.Layers)
		}
		if n > maxFileSize/4 || total+4*n > maxFileSize {
			return 0, fmt.Errorf("%w: header implies more than %d bytes", ErrFormat, int64(maxFileSize))
		}
		total += 4 * n
	}
	return total, nil
}
