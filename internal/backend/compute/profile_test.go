package compute_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/tensors"
)

// TestProfile: a profiled step computes what Run computes and reports one
// time per op that dispatches work, in graph order.
func TestProfile(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		ctx := context.Background()
		be := backendOn(t, dev, compute.Options{})
		r := rand.New(rand.NewPCG(12, 12))
		g := &fusion.Graph{Tokens: 2}
		x := embedInput(g, "x", 16)
		y := g.Add(&fusion.MatMulOp{Out: g.NewBuf("y", 2, 16), In: x, Projection: fusion.Projection{Weight: "w"}})
		g.Add(&fusion.AddOp{Out: y, A: y, B: x})
		last := g.Add(&fusion.LastRowOp{Out: g.NewBuf("l", 1, 16), In: y})
		g.Logits = last
		w, err := be.LoadWeights(ctx, []*tensors.Tensor{tensorOf(t, r, "x", vocab, 16, tensors.F32, 0, 0), tensorOf(t, r, "w", 16, 16, tensors.I8, 0, tensors.F32)})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Release()
		p, err := be.Compile(g, w, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release()
		tokens := []int32{3, 8}
		if err := p.Run(ctx, tokens, 0); err != nil {
			t.Fatal(err)
		}
		want := make([]float32, 16)
		if _, err := p.Logits(want); err != nil {
			t.Fatal(err)
		}
		times, err := p.Profile(ctx, tokens, 0)
		if !dev.Caps().Timestamps {
			if !errors.Is(err, gpu.ErrUnsupported) {
				t.Fatalf("no timestamps: %v", err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float32, 16)
		if _, err := p.Logits(got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("profiled step gave %v, Run %v", got, want)
		}
		var ops []int
		var total uint64
		for _, ot := range times {
			ops = append(ops, ot.Op)
			if ot.Kind != g.Ops[ot.Op].Kind() {
				t.Errorf("op %d: kind %s, graph %s", ot.Op, ot.Kind, g.Ops[ot.Op].Kind())
			}
			if len(ot.Kernels) == 0 {
				t.Errorf("op %d: no kernels named", ot.Op)
			}
			// The work of each op (f32 activations, 2 tokens of 16):
			var wantBytes, wantFLOPs int64
			switch ot.Kind {
			case fusion.Embed: // 2 table rows read, 2 rows written
				wantBytes = 2*16*4 + 2*16*4
			case fusion.MatMul: // 16x16 int8 weights, 16 f32 scales, inputs and outputs; 2x16x16 multiply-adds per token
				wantBytes, wantFLOPs = 16*16+16*4+2*(16+16)*4, 2*2*16*16
			case fusion.Add: // two inputs and the output, one add per value
				wantBytes, wantFLOPs = 3*2*16*4, 2*16
			case fusion.LastRow: // the step's rows of y read, one row written
				wantBytes = 2*16*4 + 16*4
			}
			if ot.Bytes != wantBytes || ot.FLOPs != wantFLOPs {
				t.Errorf("op %d (%s): %d bytes %d FLOPs, want %d and %d", ot.Op, ot.Kind, ot.Bytes, ot.FLOPs, wantBytes, wantFLOPs)
			}
			total += ot.Nanos
		}
		if !slices.Equal(ops, []int{0, 1, 2, 3}) {
			t.Errorf("profiled ops %v, want 0..3", ops)
		}
		if total == 0 {
			t.Errorf("no device time measured: %+v", times)
		}
	})
}

// profiledKernels loads ts, compiles g over them (no KV cache) and returns
// the kernels one profiled step over ids at position 0 ran, in order: of
// every op, or of the ops keep reports where keep is not nil.
func profiledKernels(t *testing.T, be gpu.Backend, g *fusion.Graph, ts []*tensors.Tensor, ids []int32, keep func(gpu.OpTime) bool) []string {
	t.Helper()
	ctx := context.Background()
	p := compiled(t, be, g, ts, nil)
	ops, err := p.Profile(ctx, ids, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, op := range ops {
		if keep == nil || keep(op) {
			out = append(out, op.Kernels...)
		}
	}
	return out
}
