// Package conformance checks a gpu.Backend against the CPU reference
// (internal/backend/cpu), op by op, and against llama.cpp's greedy stories260K output.
// Device packages call Run from a test with a factory for their backend, e.g.
// kernels.New(dev) on a WebGPU or Vulkan device, so every device is held to
// the same tables.
package conformance

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/tensors"
)

// Factory returns a backend for one test. Run closes what it returns.
type Factory func(t testing.TB) gpu.Backend

// Run runs the per-op parity cases and the stories260K golden check (its
// graphs from build).
func Run(t *testing.T, newBackend Factory, build GraphBuilder) {
	t.Run("ops", func(t *testing.T) { RunOps(t, newBackend) })
	t.Run("stories260K", func(t *testing.T) { RunStories260K(t, newBackend, build) })
}

// RunOps runs every op case of Cases on the backend and on internal/backend/cpu and
// compares the logits of each step.
func RunOps(t *testing.T, newBackend Factory) { RunCases(t, Cases(), newBackend) }

// RunCases runs the given cases on the backend and on internal/backend/cpu and compares
// the logits of each step. A fused op the backend refuses (its
// gpu.FusionBackend support says its kernels do not run it whole) must make
// Compile fail with gpu.ErrUnsupported; the backend then runs the graph
// with that op as its parts (unfuse), as gpu.Fuse would have left it,
// against the reference's fused op. The reference of a graph with ring layers
// (fusion.KVSpec.Ring) keeps full caches: a ring must give what the full
// cache gives.
func RunCases(t *testing.T, cases []Case, newBackend Factory) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			g, ws := c.Build()
			be := newBackend(t)
			defer be.Close()
			full := *g
			full.KV.Ring = nil
			ref := runStepsInputs(t, cpu.New(cpu.Options{Threads: 1}), &full, ws, c.Steps, c.Masks, c.Inputs)
			run := g
			if refused := refusedOps(t, be, g, ws); len(refused) > 0 {
				// The backend runs these fused ops only as their parts:
				// Compile refuses them, and the parts must give what the
				// reference's fused ops give.
				checkRefused(t, be, g, ws, refused)
				run = unfuse(g, func(op fusion.Op) bool { return refused[op] })
			}
			got := runStepsInputs(t, be, run, ws, c.Steps, c.Masks, c.Inputs)
			var mask []uint64 // the token mask in effect (Case.Masks)
			for s := range c.Steps {
				if s < len(c.Masks) && c.Masks[s].Set {
					mask = c.Masks[s].Allowed
				}
				if id := int(ref[s][0]); mask != nil && (id < 0 || id/64 >= len(mask) || mask[id/64]&(1<<(id%64)) == 0) {
					t.Fatalf("step %d: the cpu reference picked %d, which the mask rules out", s, id)
				}
				if len(got[s]) != len(ref[s]) {
					t.Fatalf("step %d: %d logits, cpu %d", s, len(got[s]), len(ref[s]))
				}
				for i := range ref[s] {
					if c.Half && !(isHalf(got[s][i]) && isHalf(ref[s][i])) {
						t.Fatalf("step %d: value %d: %s %v, cpu %v: not both twice a binary16 value (f16 activations)",
							s, i, be.Info().Backend, got[s][i], ref[s][i])
					}
					d := math.Abs(float64(got[s][i]) - float64(ref[s][i]))
					if lim := c.Tol.Abs + c.Tol.Rel*math.Abs(float64(ref[s][i])); !(d <= lim) {
						t.Fatalf("step %d: value %d: %s %v, cpu %v (diff %.3g > %.3g)",
							s, i, be.Info().Backend, got[s][i], ref[s][i], d, lim)
					}
				}
			}
			if c.Ablate != nil {
				checkAblated(t, c, &full, ws, got)
			}
		})
	}
}

// refusedOps returns the ops of g that be does not run whole for weights
// ws (its FusionSupport; nil support: every op).
func refusedOps(t *testing.T, be gpu.Backend, g *fusion.Graph, ws []*tensors.Tensor) map[fusion.Op]bool {
	t.Helper()
	w, err := be.LoadWeights(context.Background(), ws)
	if err != nil {
		t.Fatalf("%s: load weights: %v", be.Info().Backend, err)
	}
	defer w.Release()
	s := be.FusionSupport(w)
	if s == nil {
		return nil
	}
	refused := map[fusion.Op]bool{}
	for _, op := range g.Ops {
		if !s.Fuses(g, op) {
			refused[op] = true
		}
	}
	return refused
}

// checkRefused fails unless compiling g on be fails with gpu.ErrUnsupported
// naming the kind of one of the refused ops: a backend never splits a
// fused op it refuses.
func checkRefused(t *testing.T, be gpu.Backend, g *fusion.Graph, ws []*tensors.Tensor, refused map[fusion.Op]bool) {
	t.Helper()
	name := be.Info().Backend
	w, err := be.LoadWeights(context.Background(), ws)
	if err != nil {
		t.Fatalf("%s: load weights: %v", name, err)
	}
	defer w.Release()
	var kv gpu.KVCache
	if g.KV.Layers > 0 {
		if kv, err = be.NewKVCache(g.KV); err != nil {
			t.Fatalf("%s: kv cache: %v", name, err)
		}
		defer kv.Release()
	}
	p, err := be.Compile(g, w, kv)
	if err == nil {
		p.Release()
		t.Fatalf("%s: compiled a graph with fused ops its FusionSupport refuses: want gpu.ErrUnsupported", name)
	}
	named := false
	for op := range refused {
		named = named || strings.Contains(err.Error(), op.Kind().String())
	}
	if !errors.Is(err, gpu.ErrUnsupported) || !named {
		t.Fatalf("%s: compile of a graph with refused fused ops: %v, want gpu.ErrUnsupported naming the op", name, err)
	}
}

// checkAblated runs the CPU reference on g with c.Ablate applied and
// fails unless some value of got is more than 10 tolerances from it.
func checkAblated(t *testing.T, c Case, g *fusion.Graph, ws []*tensors.Tensor, got [][]float32) {
	t.Helper()
	ab := *g
	ab.Ops = make([]fusion.Op, len(g.Ops))
	for i, op := range g.Ops {
		ab.Ops[i] = fusion.Clone(op)
	}
	c.Ablate(&ab)
	without := runStepsInputs(t, cpu.New(cpu.Options{Threads: 1}), &ab, ws, c.Steps, c.Masks, c.Inputs)
	worst := 0.0
	for s := range got {
		for i := range got[s] {
			d := math.Abs(float64(got[s][i]) - float64(without[s][i]))
			lim := c.Tol.Abs + c.Tol.Rel*math.Abs(float64(without[s][i]))
			worst = max(worst, d/lim)
		}
	}
	if !(worst > 10) {
		t.Fatalf("the output is within %.3g tolerances of the cpu's without the case's feature (Ablate): it does not matter", worst)
	}
}

// Step is one Program.Run: tokens at positions Pos, Pos+1, ...
type Step struct {
	Tokens []int32
	Pos    int
}

// StepMask is what a step does to the program's token mask
// (gpu.Program.SetTokenMask) before it runs: with Set, Allowed becomes the mask (nil
// clears it); without, the mask stays as it is.
type StepMask struct {
	Set     bool
	Allowed []uint64
}

// Tolerance accepts |got - cpu| <= Abs + Rel*|cpu|.
type Tolerance struct{ Abs, Rel float64 }

// Case is one parity case: a graph, its weights and the steps to run.
type Case struct {
	Name  string
	Build func() (*fusion.Graph, []*tensors.Tensor)
	Steps []Step
	Tol   Tolerance
	// Half marks an f16-activation case (HalfCases): every logit must be
	// twice a binary16 value on both backends.
	Half bool
	// Masks, when set, has one entry per step: the token mask set before
	// it (MaskCases).
	Masks []StepMask
	// Inputs, when set, has one entry per step: the rows given to the
	// program (gpu.Program.SetInput: a graph's fusion.InputOp) before it;
	// nil leaves the last rows given.
	Inputs [][]float32
	// Ablate, when set, takes out of a graph the feature the case is for
	// (sinkCases: the attention sinks). RunCases then also runs the CPU
	// reference on the ablated graph and requires the backend's output to
	// be farther than 10 tolerances from it somewhere: a backend that
	// ignored the feature fails, and the case shows it is large enough to
	// matter.
	Ablate func(g *fusion.Graph)
}

// runSteps loads, compiles and runs g on be and returns each step's logits.
func runSteps(t *testing.T, be gpu.Backend, g *fusion.Graph, ws []*tensors.Tensor, steps []Step, masks []StepMask) [][]float32 {
	t.Helper()
	return runStepsInputs(t, be, g, ws, steps, masks, nil)
}

// runStepsInputs is runSteps giving the program inputs[i] (Case.Inputs)
// before step i.
func runStepsInputs(t *testing.T, be gpu.Backend, g *fusion.Graph, ws []*tensors.Tensor, steps []Step, masks []StepMask, inputs [][]float32) [][]float32 {
	t.Helper()
	ctx := context.Background()
	name := be.Info().Backend
	w, err := be.LoadWeights(ctx, ws)
	if err != nil {
		t.Fatalf("%s: load weights: %v", name, err)
	}
	defer w.Release()
	var kv gpu.KVCache
	if g.KV.Layers > 0 {
		if kv, err = be.NewKVCache(g.KV); err != nil {
			t.Fatalf("%s: kv cache: %v", name, err)
		}
		defer kv.Release()
	}
	p, err := be.Compile(g, w, kv)
	if err != nil {
		t.Fatalf("%s: compile: %v", name, err)
	}
	defer p.Release()
	info := g.Bufs[g.Logits]
	out := make([][]float32, 0, len(steps))
	for i, s := range steps {
		if i < len(masks) && masks[i].Set {
			if err := p.SetTokenMask(masks[i].Allowed); err != nil {
				t.Fatalf("%s: step %d: set token mask: %v", name, i, err)
			}
		}
		if i < len(inputs) && inputs[i] != nil {
			if err := p.SetInput(inputs[i]); err != nil {
				t.Fatalf("%s: step %d: set input: %v", name, i, err)
			}
		}
		if err := p.Run(ctx, s.Tokens, s.Pos); err != nil {
			t.Fatalf("%s: step %d: run: %v", name, i, err)
		}
		dst := make([]float32, info.Rows*info.Cols)
		n, err := p.Logits(dst)
		if err != nil {
			t.Fatalf("%s: step %d: logits: %v", name, i, err)
		}
		out = append(out, dst[:n])
	}
	return out
}
