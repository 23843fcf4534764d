package pipeline

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/tensors/model"
)

// TestActF16 is the resolution table of the activation policy for the
// activations between kernels (actF16): --activations f16 forces them
// anywhere, f32 keeps f32, and auto (or a file's f16) gives f16 on a GPU
// backend whose device reports f16 storage and arithmetic, for
// architectures other than Falcon and Phi-2, and f32 on the CPU backend
// (gpu.Caps.Host), whatever it reports.
func TestActF16(t *testing.T) {
	gpuF16 := gpu.Caps{F16Storage: true, F16Math: true} // Vulkan on most GPUs, lavapipe
	storage16 := gpu.Caps{F16Storage: true}             // 16-bit storage, no f16 arithmetic
	noF16 := gpu.Caps{}                                 // SwiftShader, WebGPU here
	cpuB := gpu.Caps{Host: true, F16Storage: true, F16Math: true}
	for _, tc := range []struct {
		override, file string
		caps           gpu.Caps
		arch           string
		want           bool
	}{
		{"", "", gpuF16, model.ArchLlama, true},
		{"", model.PolicyAuto, storage16, model.ArchLlama, false},
		{"", model.PolicyAuto, noF16, model.ArchLlama, false},
		{"", model.PolicyAuto, cpuB, model.ArchLlama, false},
		{"", model.PolicyF16, gpuF16, model.ArchGemma, true},
		{"", model.PolicyF16, cpuB, model.ArchGemma, false},
		{"", model.PolicyF16, noF16, model.ArchStableLM, false},
		{"", model.PolicyF32, gpuF16, model.ArchPhi2, false},
		{"", model.PolicyAuto, gpuF16, model.ArchFalcon, false},
		{model.PolicyAuto, model.PolicyF32, gpuF16, model.ArchPhi2, false},
		{model.PolicyAuto, model.PolicyF32, gpuF16, model.ArchLlama, true},
		{model.PolicyF16, model.PolicyF32, cpuB, model.ArchLlama, true},
		{model.PolicyF16, "", noF16, model.ArchFalcon, true},
		{model.PolicyF32, model.PolicyF16, gpuF16, model.ArchGemma, false},
	} {
		t.Run(fmt.Sprintf("%s/%s/host=%v_f16=%v,%v/%s", tc.override, tc.file, tc.caps.Host, tc.caps.F16Storage, tc.caps.F16Math, tc.arch), func(t *testing.T) {
			got, err := actF16(tc.override, tc.file, tc.caps, tc.arch)
			if err != nil || got != tc.want {
				t.Errorf("actF16 = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	for _, bad := range [][2]string{{"fp16", ""}, {"", "half"}} {
		if _, err := actF16(bad[0], bad[1], gpuF16, model.ArchLlama); !errors.Is(err, ErrActivations) {
			t.Errorf("actF16(%q, %q): error %v, want ErrActivations", bad[0], bad[1], err)
		}
	}
}
