package conformance

import (
	"math"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/backend/cpu"
)

// TestUnfuse: a graph with every fused op unfuse takes apart gives, on the
// CPU reference, the fused graph's logits (at the case's tolerance), for
// every case with such an op; so a GPU backend that runs the parts is held
// to what the fused op computes.
func TestUnfuse(t *testing.T) {
	parted := func(op fusion.Op) bool {
		switch op := op.(type) {
		case *fusion.MatMulOp:
			return op.Prologue != nil
		case *fusion.MultiMatMulOp:
			return op.Prologue != nil
		case *fusion.MatMulGLUOp, *fusion.MatMulRopeKVOp:
			return true
		}
		return false
	}
	n := 0
	for _, set := range [][]Case{Cases(), FusedCases(), WideCases(), HalfCases(), BlockCases(), RingCases()} {
		for _, c := range set {
			g, ws := c.Build()
			if !hasOp(g, parted) {
				continue
			}
			n++
			t.Run(c.Name, func(t *testing.T) {
				full := *g
				full.KV.Ring = nil
				u := unfuse(&full, parted)
				if hasOp(u, parted) || len(u.Ops) <= len(full.Ops) {
					t.Fatalf("unfused graph of %d ops (fused %d) still holds a fused op", len(u.Ops), len(full.Ops))
				}
				want := runSteps(t, cpu.New(cpu.Options{Threads: 1}), &full, ws, c.Steps, c.Masks)
				got := runSteps(t, cpu.New(cpu.Options{Threads: 1}), u, ws, c.Steps, c.Masks)
				for s := range want {
					for i := range want[s] {
						d := math.Abs(float64(got[s][i]) - float64(want[s][i]))
						if lim := c.Tol.Abs + c.Tol.Rel*math.Abs(float64(want[s][i])); !(d <= lim) {
							t.Fatalf("step %d: value %d: parts %v, fused %v (diff %.3g > %.3g)", s, i, got[s][i], want[s][i], d, lim)
						}
					}
				}
			})
		}
	}
	if n < 20 {
		t.Errorf("only %d cases hold a fused op to take apart", n)
	}
}

func hasOp(g *fusion.Graph, f func(fusion.Op) bool) bool {
	for _, op := range g.Ops {
		if f(op) {
			return true
		}
	}
	return false
}
