package compute_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/shaders"
	"github.com/gpurun/gpurun/tensors"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/conformance"
)

// TestBlockTypeConformance runs the block-type parity cases (llama.cpp's
// Q2_K ... Q6_K, Q4_1, Q5_0, Q5_1 weights) against internal/backend/cpu on WebGPU and Vulkan, also with
// weights split into row blocks of at most 4 KiB (Q5_0 rows of 110 bytes
// do not end on words) and, there, subgroups off, so Vulkan runs both
// qmatvec_sg and qmatvec.
func TestBlockTypeConformance(t *testing.T) {
	for i, d := range devices {
		t.Run(d.Name, func(t *testing.T) {
			dev := deviceAt(t, i)
			// Split bindings are the planner's (shared Go) choice over the
			// same WGSL: the first device runs them, every device the
			// default; with 19 block types the split run on both devices
			// cost more CI time than it could catch.
			optss := []compute.Options{{}}
			if i == 0 {
				optss = append(optss, compute.Options{MaxBinding: 4096, Subgroups: compute.SubgroupsOff})
			}
			for _, opts := range optss {
				t.Run(fmt.Sprintf("split%d", opts.MaxBinding), func(t *testing.T) {
					conformance.RunCases(t, conformance.BlockCases(), func(t testing.TB) gpu.Backend {
						return sharedBackend{backendOn(t, dev, opts)}
					})
				})
			}
		})
	}
}

// BenchmarkMatVecBlocks and BenchmarkMatMulBlocks time one 2048x2048 MatMul
// (decode and a 32-token prefill) with llama.cpp's block types on each
// device, beside f32 and int4 block 32 for ratios within one run.
func BenchmarkMatVecBlocks(b *testing.B) { benchBlocksOnDevices(b, 1) }

func BenchmarkMatMulBlocks(b *testing.B) { benchBlocksOnDevices(b, 32) }

func benchBlocksOnDevices(b *testing.B, tokens int) {
	const rows, cols = 2048, 2048
	types := []tensors.DType{tensors.F32, tensors.I4, tensors.Q4K, tensors.Q5K, tensors.Q6K, tensors.Q5_0}
	for i, d := range devices {
		b.Run(d.Name, func(b *testing.B) {
			dev := deviceAt(b, i)
			for _, dt := range types {
				b.Run(fmt.Sprintf("%s/t%d", dt, tokens), func(b *testing.B) {
					r := rand.New(rand.NewPCG(9, 9))
					var w *tensors.Tensor
					switch {
					case dt.Block():
						w = conformance.BlockMatrix(r, "w", rows, cols, dt)
					case dt == tensors.I4:
						w = tensorOf(b, r, "w", rows, cols, dt, 32, tensors.F16)
					default:
						w = tensorOf(b, r, "w", rows, cols, dt, 0, 0)
					}
					benchWeights(b, dev, compute.Options{}, r, w, tokens, rows, cols, false)
				})
			}
		})
	}
}

// TestBlockVariantChosen: a block-type product runs in its layout's module
// of qblocks.wgsl: qmatmul for prefill, qmatvec_sg for decode where the
// device reports a usable subgroup size and Options allow subgroups,
// qmatvec otherwise (WebGPU); the kernel a profiled step names is the one
// that ran. TestBlockTypeConformance checks the results of each against
// the CPU backend.
func TestBlockVariantChosen(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		for _, tc := range []struct {
			dt     tensors.DType
			layout string
		}{{tensors.Q4K, "K45"}, {tensors.Q6K, "K6"}, {tensors.Q3K, "K23"}, {tensors.Q5_0, "B32"}} {
			for _, mode := range []compute.SubgroupMode{compute.SubgroupsAuto, compute.SubgroupsOff} {
				for _, tokens := range []int{1, 8} {
					t.Run(fmt.Sprintf("%s/%s/t%d", tc.dt, mode, tokens), func(t *testing.T) {
						be := backendOn(t, dev, compute.Options{Subgroups: mode})
						want := "qmatvec." + tc.layout
						switch {
						case tokens >= 4:
							want = "qmatmul." + tc.layout
						case mode == compute.SubgroupsAuto && shaders.SubgroupVariantFits(dev.Caps().SubgroupSize):
							want = "qmatvec_sg." + tc.layout + "_sg"
						}
						if k := blockKernels(t, be, tc.dt, tokens); !slices.Contains(k, want) {
							t.Errorf("kernels %v, want %s", k, want)
						}
					})
				}
			}
		}
	})
}

// blockKernels compiles a MatMul of 512 columns of block type dt over
// tokens tokens and returns the kernels its profiled step ran.
func blockKernels(t *testing.T, be gpu.Backend, dt tensors.DType, tokens int) []string {
	t.Helper()
	if !be.Caps().Timestamps {
		t.Skipf("%s: no timestamps to profile with", be.Info().Name)
	}
	const cols = 512
	r := rand.New(rand.NewPCG(6, 6))
	g := &fusion.Graph{Tokens: tokens}
	x := g.NewBuf("x", tokens, cols)
	g.Add(&fusion.EmbedOp{Out: x, Weight: "x"})
	g.Logits = g.Add(&fusion.MatMulOp{Out: g.NewBuf("y", tokens, 40), In: x, Projection: fusion.Projection{Weight: "w"}})
	return profiledKernels(t, be, g, []*tensors.Tensor{tensorOf(t, r, "x", vocab, cols, tensors.F32, 0, 0), conformance.BlockMatrix(r, "w", 40, cols, dt)}, make([]int32, tokens), nil)
}

// TestIQ4NLTableMatchesTensors: the IQ4_NL values the WGSL carries
// (shaders.IQ4NLValues, below tensors in the layering) are the ones tensors
// generated from llama.cpp's header.
func TestIQ4NLTableMatchesTensors(t *testing.T) {
	if shaders.IQ4NLValues != tensors.IQ4NLValues() {
		t.Errorf("shaders.IQ4NLValues %v, tensors' (from ggml-common.h) %v", shaders.IQ4NLValues, tensors.IQ4NLValues())
	}
}
