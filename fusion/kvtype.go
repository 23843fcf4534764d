package fusion

import (
	"errors"
	"fmt"
	"math/bits"
)

// KVType is the element type of a cache's keys (KVSpec.K) or values
// (KVSpec.V). The zero value, KVFloat, is the float cache: f32, or binary16
// with KVSpec.F16. The others are llama.cpp's block formats of 32 values
// (ggml's block_q8_0 ... block_iq4_nl, byte for byte), which a backend's
// stores quantize as llama.cpp's CPU backend does (quantize_row_*_ref; for
// q8_0 its x86 quantize_row_q8_0, halves rounded to even) and its
// attention reads directly: llama.cpp's `-ctk` / `-ctv` types.
//
// A quantized cache changes what attention computes, as it does in
// llama.cpp (its CPU flash attention, the anchor): with quantized keys the
// scores are the block dot products of the keys with the query quantized
// to q8_0 (q8_1 for KVQ4_1 and KVQ5_1), d_k*d_q*Σ k_i q_i per block
// (+ m_k*s_q for the _1 types); with quantized values each value row is
// dequantized (d*q, d*q+m, or d*kvalues_iq4nl[q]) before it is weighted.
// Keys and values are rotated first where KVSpec.KRotation and
// KVSpec.VRotation say.
type KVType uint8

const (
	KVFloat KVType = iota // f32, or binary16 with KVSpec.F16
	KVQ8_0                // 34 bytes: f16 d, 32 int8; d*q
	KVQ4_0                // 18 bytes: f16 d, 16 bytes of nibbles; d*(q-8)
	KVQ4_1                // 20 bytes: f16 d, f16 m, nibbles; d*q + m
	KVQ5_0                // 22 bytes: f16 d, u32 high bits, nibbles; d*(q-16)
	KVQ5_1                // 24 bytes: f16 d, f16 m, u32 high bits, nibbles; d*q + m
	KVIQ4NL               // 18 bytes: f16 d, nibbles; d*kvalues_iq4nl[q]
	numKVTypes
)

// KVBlock is the number of values of one block of a quantized cache type.
const KVBlock = 32

var kvTypeNames = [numKVTypes]string{"float", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"}

var kvBlockBytes = [numKVTypes]int{0, 34, 18, 20, 22, 24, 18}

func (t KVType) String() string {
	if t < numKVTypes {
		return kvTypeNames[t]
	}
	return fmt.Sprintf("KVType(%d)", uint8(t))
}

// Quantized reports whether t is a block type.
func (t KVType) Quantized() bool { return t > KVFloat && t < numKVTypes }

// BlockBytes is the size of one block of KVBlock values (0 for KVFloat).
func (t KVType) BlockBytes() int {
	if t < numKVTypes {
		return kvBlockBytes[t]
	}
	return 0
}

// KVBytes is the memory of n values (a multiple of KVBlock for a block
// type) of keys or values of type t, a float one binary16 when f16.
func KVBytes(t KVType, f16 bool, n int64) int64 {
	switch {
	case t.Quantized():
		return n / KVBlock * int64(t.BlockBytes())
	case f16:
		return 2 * n
	}
	return 4 * n
}

// ErrKVType reports a cache type name, or a combination of cache types,
// that is not supported.
var ErrKVType = errors.New("fusion: unsupported KV cache type")

// KVTypeNames lists the names ParseKVType accepts for quantized types
// (llama.cpp's); "f32" and "f16" name the float cache.
var KVTypeNames = []string{"f32", "f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"}

// ParseKVType parses a llama.cpp cache type name (`-ctk`/`-ctv`): "f32" and
// "f16" give KVFloat with f16 telling which, the others their block type.
func ParseKVType(s string) (t KVType, f16 bool, err error) {
	switch s {
	case "f32":
		return KVFloat, false, nil
	case "f16":
		return KVFloat, true, nil
	}
	for i := KVQ8_0; i < numKVTypes; i++ {
		if kvTypeNames[i] == s {
			return i, false, nil
		}
	}
	return 0, false, fmt.Errorf("%w: %q (want one of %v)", ErrKVType, s, KVTypeNames)
}

// Quantized reports whether the keys or the values are quantized.
func (s KVSpec) Quantized() bool { return s.K.Quantized() || s.V.Quantized() }

// groupHeadDim is llama.cpp's n_embd_head_k_all for the cache holding
// layer l: the head dim shared by every layer of l's group that keeps keys
// and values of its own (layers reading another's cache and recurrent
// layers are not counted), -1 when they differ, 0 when there are none. The
// groups are llama.cpp's caches: one for every layer, or with SWA one for
// the sliding-window layers and one for the others (its iSWA cache).
func (s KVSpec) groupHeadDim(l int) int {
	sliding := func(i int) bool { return i >= 0 && i < len(s.SWA) && s.SWA[i] }
	hd := 0
	for i := range s.Layers {
		if s.LayerState(i).Recurrent() || sliding(i) != sliding(l) {
			continue
		}
		d := s.LayerHeadDim(i)
		switch {
		case d == 0:
		case hd == 0:
			hd = d
		case hd != d:
			return -1
		}
	}
	return hd
}

// rotates is llama.cpp's condition for rotating the cache of layer l's
// group (llama_kv_cache: attn_rot_k, attn_rot_v): the type is quantized,
// the group's layers share a head dim, and layer 0's head dim (its
// hparams.n_embd_head_k(), whichever cache) is a multiple of 64; and here
// also the group's own, so that every rotated run lies within a head.
func (s KVSpec) rotates(t KVType, l int) int {
	hd := s.groupHeadDim(l)
	if s.NoRotation || !t.Quantized() || hd <= 0 || hd%64 != 0 || s.LayerHeadDim(0)%64 != 0 {
		return 0
	}
	return hd
}

// KRotation is the size n of the Walsh-Hadamard rotation applied to the
// queries and keys of the cache holding layer l (0: none), llama.cpp's
// rule (#21038, llama_kv_cache; see rotates): each run of n values of a
// query or key row is multiplied by H_n, the Sylvester Hadamard matrix
// scaled by 1/sqrt(n) (orthonormal and symmetric, its own inverse), n the
// largest power of two that divides the head dim. Queries and keys are
// rotated alike, so the scores are unchanged but for the quantization the
// rotation spreads across each block. NoRotation turns it off (llama.cpp's
// LLAMA_ATTN_ROT_DISABLE).
func (s KVSpec) KRotation(l int) int {
	hd := s.rotates(s.K, l)
	if hd == 0 {
		return 0
	}
	return 1 << bits.TrailingZeros(uint(hd))
}

// VRotation is the size of the rotation of the values of the cache holding
// layer l (0: none): 64 where KRotation's rule holds for quantized values
// (llama.cpp uses the smallest matrix for values). Attention then sums
// rotated values, and its output (each head's) is rotated back by the
// same H_64.
func (s KVSpec) VRotation(l int) int {
	if s.rotates(s.V, l) == 0 {
		return 0
	}
	return 64
}

// CheckTypes checks the cache's element types: known ones, and for a
// quantized K or V every layer's head dim a multiple of KVBlock (a block
// never spans two heads). Backends call it in NewKVCache.
func (s KVSpec) CheckTypes() error {
	if s.K >= numKVTypes || s.V >= numKVTypes {
		return fmt.Errorf("%w: K %v, V %v", ErrKVType, s.K, s.V)
	}
	if !s.Quantized() {
		return nil
	}
	for l := range s.Layers {
		if s.LayerState(l).Recurrent() {
			continue
		}
		if d := s.LayerHeadDim(l); d%KVBlock != 0 {
			return fmt.Errorf("%w: K %v, V %v: layer %d's head dim %d is not a multiple of %d", ErrKVType, s.K, s.V, l, d, KVBlock)
		}
	}
	return nil
}

// KVTypeSet is a set of block types (gpu.Caps.QuantKVTypes: the ones a
// backend's caches keep).
type KVTypeSet uint16

// KVTypes is the set of ts.
func KVTypes(ts ...KVType) KVTypeSet {
	var s KVTypeSet
	for _, t := range ts {
		if t < numKVTypes {
			s |= 1 << t
		}
	}
	return s
}

// AllKVTypes is every block type.
func AllKVTypes() KVTypeSet {
	var s KVTypeSet
	for t := KVQ8_0; t < numKVTypes; t++ {
		s |= 1 << t
	}
	return s
}

// Has reports whether t is in s.
func (s KVTypeSet) Has(t KVType) bool { return t < numKVTypes && s&(1<<t) != 0 }

// Keeps reports whether a cache of keys k and values v needs no type
// outside s (float keys or values always fit).
func (s KVTypeSet) Keeps(k, v KVType) bool {
	return (!k.Quantized() || s.Has(k)) && (!v.Quantized() || s.Has(v))
}

func (s KVTypeSet) String() string {
	var names []string
	for t := KVQ8_0; t < numKVTypes; t++ {
		if s.Has(t) {
			names = append(names, t.String())
		}
	}
	return fmt.Sprint(names)
}
