package compute_test

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/shaders"
	"github.com/gpurun/gpurun/tensors"
)

// TestSubgroupVariantChosen: decode takes matvec_sg exactly where
// the device reports a usable subgroup size (Vulkan on lavapipe: 8;
// SwiftShader in the rerun) unless Options turn subgroups off, and the
// portable matvec_lanes elsewhere (WebGPU); the kernel a profiled step
// names is the one that ran. TestMatMul and TestFusedConformance check the
// results of both against the CPU backend.
func TestSubgroupVariantChosen(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		info, caps := dev.Info(), dev.Caps()
		if info.Backend == "vulkan" && caps.SubgroupSize == 0 {
			t.Errorf("%s: Vulkan device without basic and shuffle subgroup operations (lavapipe and SwiftShader have them)", info.Name)
		}
		if info.Backend == "webgpu" && caps.SubgroupSize != 0 {
			t.Errorf("WebGPU reports subgroup size %d; its kernels cannot use subgroups", caps.SubgroupSize)
		}
		if info.Backend == "vulkan" && strings.Contains(info.Name, "llvmpipe") && caps.SubgroupSize != 8 {
			t.Errorf("lavapipe reports subgroup size %d, want 8", caps.SubgroupSize)
		}
		for _, mode := range []compute.SubgroupMode{compute.SubgroupsAuto, compute.SubgroupsOff} {
			t.Run(mode.String(), func(t *testing.T) {
				kernel := f32MatVecKernels(t, backendOn(t, dev, compute.Options{Subgroups: mode}))
				want := "matvec_lanes.F32"
				if mode == compute.SubgroupsAuto && shaders.SubgroupVariantFits(caps.SubgroupSize) {
					want = "matvec_sg.F32_sg"
				}
				if !slices.Contains(kernel, want) {
					t.Errorf("kernels %v, want %s", kernel, want)
				}
			})
		}
	})
}

// f32MatVecKernels compiles a one-token f32 MatMul (128 columns: 32 chunks,
// lane groups of 32, so subgroups of 8 take the combining path too) and
// returns the kernels its profiled step ran.
func f32MatVecKernels(t *testing.T, be gpu.Backend) []string {
	t.Helper()
	if !be.Caps().Timestamps {
		t.Skipf("%s: no timestamps to profile with", be.Info().Name)
	}
	r := rand.New(rand.NewPCG(5, 5))
	g := &fusion.Graph{Tokens: 1}
	x := g.NewBuf("x", 1, 128)
	g.Add(&fusion.EmbedOp{Out: x, Weight: "x"})
	g.Logits = g.Add(&fusion.MatMulOp{Out: g.NewBuf("y", 1, 40), In: x, Projection: fusion.Projection{Weight: "w"}})
	return profiledKernels(t, be, g, []*tensors.Tensor{tensorOf(t, r, "x", vocab, 128, tensors.F32, 0, 0), tensorOf(t, r, "w", 40, 128, tensors.F32, 0, 0)}, []int32{3}, nil)
}
