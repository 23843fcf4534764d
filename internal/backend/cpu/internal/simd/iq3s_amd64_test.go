package simd

import (
	"fmt"
	"testing"

	"golang.org/x/sys/cpu"
)

// TestIQ3SRows4Forms: both forms of the four-row IQ3_S kernel, the AVX2
// one and the PDEP one (the package runs one of them, by CPU: fastPDEP),
// give every row the pure-Go kernel's bits, with ordinary and extreme
// scales and activations, on rows of one to three blocks.
func TestIQ3SRows4Forms(t *testing.T) {
	forms := map[string]func(w *byte, x *int8, xd *float32, xs *int16, nb, groups int, out *float32){}
	if cpu.X86.HasAVX2 {
		forms["avx2"] = dotIQ3SRows4AVX2
		if cpu.X86.HasBMI2 {
			forms["bmi2"] = dotIQ3SRows4BMI2
		}
	}
	t.Logf("forms run on this CPU: %d of 2 (family %#x, fast PDEP %v)", len(forms), cpuFamilyAMD64(), fastPDEP())
	r := rngFor(t)
	for name, f := range forms {
		for _, extreme := range []bool{false, true} {
			for nb := 1; nb <= 3; nb++ {
				t.Run(fmt.Sprintf("%s/extreme=%v/nb=%d", name, extreme, nb), func(t *testing.T) {
					const rows = 8
					ext := 0.0
					if extreme {
						ext = 0.3
					}
					w := randKBlocks(r, IQ3S, rows*nb, ext)
					q, d, s := quantK(randActs(r, nb*QK, extreme))
					out := make([]float32, rows)
					f(&w[0], &q[0], &d[0], &s[0], nb, rows/4, &out[0])
					rb := nb * IQ3S.BlockBytes()
					for i := range rows {
						want := Generic.DotK(IQ3S, w[i*rb:(i+1)*rb], q, d, s)
						if out[i] != want && (out[i] == out[i] || want == want) {
							t.Errorf("row %d: %g, want exactly %g", i, out[i], want)
						}
					}
				})
			}
		}
	}
}
