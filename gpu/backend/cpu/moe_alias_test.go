package cpu

import (
	"context"
	"testing"
	"unsafe"

	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors/gguf"
	"github.com/gpurun/gpurun/tensors/model"
)

// TestExpertsStayMapped: the expert views of a GGUF's 3-D expert tensors
// point into the file's memory mapping (expert e at its byte offset), so
// loading a MoE model copies no expert weights.
func TestExpertsStayMapped(t *testing.T) {
	f, err := gguf.Open(testmodels.Path(t, "arch2", "qwen3moe.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	ck, err := f.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	w, err := New(Options{}).LoadWeights(context.Background(), ck.Tensors)
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
			if got, want := unsafe.Pointer(unsafe.SliceData(s.f32)), unsafe.Pointer(&mapped[e*per]); got != want {
				t.Errorf("%s expert %d at %p, the mapping holds it at %p", x.gguf, e, got, want)
			}
			if len(s.f32)*4 != per {
				t.Errorf("%s expert %d views %d bytes, want %d", x.gguf, e, len(s.f32)*4, per)
			}
		}
	}
}
