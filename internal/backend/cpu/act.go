package cpu

import (
	"math"
	"sync"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/backend/cpu/internal/simd"

	"github.com/x448/float16"
)

// Activation functions of the GLU, Activation and MatMulGLU ops.
var activations = map[fusion.Act]func(float32) float32{
	fusion.ActSiLU:     silu,
	fusion.ActGELUTanh: geluTanhF16,
	fusion.ActGELU:     geluErf,
	fusion.ActReLU:     relu,
}

// silu is x·σ(x) in f32 (simd.SiLU: the vector kernels give the same bits).
func silu(x float32) float32 { return simd.SiLU(x) }

func relu(x float32) float32 { return max(x, 0) }

// geluErf is the exact GELU, x * Phi(x).
func geluErf(x float32) float32 {
	return float32(0.5 * float64(x) * (1 + math.Erf(float64(x)/math.Sqrt2)))
}

// geluTanh is the tanh approximation of GELU, evaluated in f32 the way
// llama.cpp's ggml_gelu_f32 does.
func geluTanh(x float32) float32 {
	const sqrt2OverPi = 0.79788456080286535587989211986876
	const coef = 0.044715
	inner := sqrt2OverPi * x * (1 + coef*x*x)
	return 0.5 * x * (1 + float32(math.Tanh(float64(inner))))
}

// geluTanhF16 is "gelu_tanh" as llama.cpp's CPU backend evaluates it, which
// is what the GGUF reference logits were produced with: the input is rounded
// to binary16 and looked up in a table of fp16(geluTanh(x)) over every
// binary16 value; inputs <= -10 give 0 and inputs >= 10 pass through. An
// exact f32 tanh-GELU differs from it by up to ~1.6e-4 in the test models'
// logits, so the reference backend matches llama.cpp rather than the formula.
func geluTanhF16(x float32) float32 {
	switch {
	case x <= -10:
		return 0
	case x >= 10:
		return x
	case x != x: // NaN stays NaN rather than reading a NaN slot of the table
		return x
	}
	return geluTable()[halfBits(x)]
}

// geluTable maps every binary16 input to fp16(geluTanh(x)), widened to f32.
var geluTable = sync.OnceValue(func() *[1 << 16]float32 {
	var t [1 << 16]float32
	for i := range t {
		x := float16.Frombits(uint16(i)).Float32()
		t[i] = float16.Fromfloat32(geluTanh(x)).Float32()
	}
	return &t
})
