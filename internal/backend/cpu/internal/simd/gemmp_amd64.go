package simd

// gemmPanelAVX2 are the panel GEMM's register tiles (gen/gemmp.go).
var gemmPanelAVX2 = gemmPanelKernels{
	c8:  [6]gemmPanelKernel{gemmP1x8AVX2, gemmP2x8AVX2, gemmP3x8AVX2, gemmP4x8AVX2, gemmP5x8AVX2, gemmP6x8AVX2},
	c16: [6]gemmPanelKernel{gemmP1x16AVX2, gemmP2x16AVX2, gemmP3x16AVX2, gemmP4x16AVX2, gemmP5x16AVX2, gemmP6x16AVX2},
	c24: [4]gemmPanelKernel{gemmP1x24AVX2, gemmP2x24AVX2, gemmP3x24AVX2, gemmP4x24AVX2},
	max: maxF32AVX2,
	sum: sumF64AVX2,
}
