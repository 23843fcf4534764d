package gguf

import "fmt"

// GGMLType is a tensor element type of llama.cpp's ggml.
type GGMLType uint32

// The ggml types this package understands. Others (K-quants, IQ types, ...)
// parse as tensor infos but cannot be imported.
const (
	GGMLF32  GGMLType = 0
	GGMLF16  GGMLType = 1
	GGMLQ4_0 GGMLType = 2
	GGMLQ8_0 GGMLType = 8
	GGMLBF16 GGMLType = 30
)

// QK is the block length of Q4_0 and Q8_0: 32 elements share one f16 scale.
const QK = 32

// typeInfo is the block geometry of a type: blockLen elements take
// blockBytes bytes.
type typeInfo struct {
	name       string
	blockLen   int
	blockBytes int
}

var ggmlTypes = map[GGMLType]typeInfo{
	GGMLF32:  {"F32", 1, 4},
	GGMLF16:  {"F16", 1, 2},
	GGMLBF16: {"BF16", 1, 2},
	GGMLQ4_0: {"Q4_0", QK, 2 + QK/2},
	GGMLQ8_0: {"Q8_0", QK, 2 + QK},
}

func (t GGMLType) String() string {
	if ti, ok := ggmlTypes[t]; ok {
		return ti.name
	}
	return fmt.Sprintf("ggml_type(%d)", uint32(t))
}

// Known reports whether the package can size and import tensors of type t.
func (t GGMLType) Known() bool {
	_, ok := ggmlTypes[t]
	return ok
}
