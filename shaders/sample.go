package shaders

import "fmt"

// SampleShortRow is the longest row (logits) the sample kernel's short-row
// module takes (SampleVariant).
const SampleShortRow = 4096

// SampleVariant is the module of wgsl/sample.wgsl for rows of n logits:
// its workgroup size WG (CPI = 256 / WG chunks per invocation). Rows up to
// SampleShortRow get 8 invocations, longer ones 64. A CPU driver runs a
// workgroup as coroutines of its vector width (8 on lavapipe), and Mesa
// 22.3's llvmpipe runs each coroutine through the kernel's code whether a
// branch is taken or not (masked lanes): the short-row module's one
// coroutine ran a stories260K (512-id) pick in about 2/3 of the
// 64-invocation module's time there (issue 39). Long rows keep 64: more
// invocations to share the passes over the row, and llvmpipe cuts long
// loops short (gallivm's loop limiter): one coroutine's 31 top-p
// passes over a 32000-id row gave wrong ids (TestSampleConformance);
// 4096 ids pass. A choice by the work's shape, the same on every device.
func SampleVariant(n int) Variant {
	wg := 64
	if n <= SampleShortRow {
		wg = 8
	}
	return sampleVariant(wg)
}

// SampleVariants lists the sample family's modules.
func SampleVariants() []Variant {
	return []Variant{sampleVariant(8), sampleVariant(64)}
}

func sampleVariant(wg int) Variant {
	return Variant{Key: fmt.Sprintf("w%d", wg), Consts: []Const{
		{"WG", "u32", fmt.Sprintf("%du", wg)},
		{"CPI", "u32", fmt.Sprintf("%du", 256/wg)},
	}}
}
