package cpu

import (
	"context"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/gpurun/gpurun/internal/backend/cpu/internal/simd"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// TestExpertsStayMapped: the expert views of a GGUF's 3-D expert tensors
// point into the file's memory mapping (expert e at its byte offset), so
// loading a MoE model copies no expert weights: F32 experts, Q8_0 ones and
// gpt-oss's MXFP4 ones (kept in their blocks), under either arithmetic.
func TestExpertsStayMapped(t *testing.T) {
	for _, path := range []string{testmodels.Path(t, "arch2", "qwen3moe.gguf"), // F32 experts
		filepath.Join(testmodels.Root(t), "testdata", "moe", "qwen3moe-q8_0.gguf"),      // Q8_0 blocks
		filepath.Join(testmodels.Root(t), "testdata", "gptoss", "gpt-oss-mxfp4.gguf")} { // MXFP4 blocks
		t.Run(filepath.Base(path), func(t *testing.T) { expertsStayMapped(t, path) })
	}
}

func expertsStayMapped(t *testing.T, path string) {
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := f.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	for _, math := range []Math{MathExact, MathDynamic} {
		w, err := New(Options{Math: math}).LoadWeights(context.Background(), ck.Tensors)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range []struct{ gguf, ours string }{{"ffn_gate_exps", model.ExpertsGate},
			{"ffn_up_exps", model.ExpertsUp}, {"ffn_down_exps", model.ExpertsDown}} {
			info := f.Tensor("blk.1." + x.gguf + ".weight")
			if info == nil {
				t.Fatalf("no %s", x.gguf)
			}
			mapped, err := f.TensorData(info)
			if err != nil {
				t.Fatal(err)
			}
			m := w.(*weights).byName[model.Layer(1, x.ours)]
			slabs, err := m.slabs(ck.Config.Experts)
			if err != nil {
				t.Fatal(err)
			}
			per := len(mapped) / len(slabs)
			for e, s := range slabs {
				p, n := unsafe.Pointer(unsafe.SliceData(s.blk)), len(s.blk)
				if s.f32 != nil {
					p, n = unsafe.Pointer(unsafe.SliceData(s.f32)), 4*len(s.f32)
				}
				if want := unsafe.Pointer(&mapped[e*per]); p != want {
					t.Errorf("%s (%s) expert %d at %p, the mapping holds it at %p", x.gguf, m.dtype, e, p, want)
				}
				if n != per {
					t.Errorf("%s expert %d views %d bytes, want %d", x.gguf, e, n, per)
				}
			}
		}
	}
}

// TestExpertsNotPackedForGemm: under dynamic math an int8 matrix gets a
// second copy repacked for the prefill GEMM (where the CPU has the
// kernel), but stacked experts, whose products run one row at a time,
// do not: a MoE model's experts are most of its bytes.
func TestExpertsNotPackedForGemm(t *testing.T) {
	if !simd.HasGemm(simd.GemmQ8) {
		t.Skip("no int8 GEMM kernel on this CPU: nothing is packed")
	}
	vals := make([]float32, 4*64*64)
	for i := range vals {
		vals[i] = float32(i%13) - 6
	}
	dense, err := tensors.Quantize("dense", []int{256, 64}, vals, tensors.I8, 32, tensors.F16)
	if err != nil {
		t.Fatal(err)
	}
	experts, err := tensors.Quantize("experts", []int{4, 64, 64}, vals, tensors.I8, 32, tensors.F16)
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(Options{Math: MathDynamic}).LoadWeights(context.Background(), []*tensors.Tensor{dense, experts})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	if m := w.(*weights).byName["dense"]; m.gemm == nil {
		t.Error("dense int8 matrix not packed for the GEMM")
	}
	if m := w.(*weights).byName["experts"]; m.gemm != nil {
		t.Errorf("stacked experts packed for the GEMM (%d bytes)", len(m.gemm))
	}
}
