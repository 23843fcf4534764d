package compute_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/conformance"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/tensors"
)

// TestMoEConformance runs the MoE op's parity cases (conformance.MoECases:
// router, top-k, renormalization and the expert products on the device)
// against internal/backend/cpu on WebGPU and Vulkan.
func TestMoEConformance(t *testing.T) {
	cases := conformance.MoECases()
	if gputest.RerunDriver() != "" {
		cases = moeRerunCases(cases)
	}
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		conformance.RunCases(t, cases, func(t testing.TB) gpu.Backend {
			return sharedBackend{backendOn(t, dev, compute.Options{})}
		})
	})
}

// TestMoERuleSwapFails shows the MoE cases can fail: the device running
// the op with its renormalization switched, or one expert fewer or more
// than the CPU reference, is past the tolerance on every case (while the
// op as built is within it); and on gpt-oss's cases (_oai_), the device
// running qwen3moe's gating, dropping one of the biases or taking silu
// for swiglu_oai. On the first device only (onFirstDevice): the rule is
// the shared WGSL's, and TestMoEConformance holds every device to it.
func TestMoERuleSwapFails(t *testing.T) {
	const both, qwen, oai = 0, 1, 2 // the cases an edit applies to
	edits := []struct {
		name  string
		cases int
		edit  func(*fusion.MoEOp)
		far   bool
	}{
		{"as built", both, func(*fusion.MoEOp) {}, false},
		// softmax_weight's weights already sum to 1.
		{"renormalization switched", qwen, func(o *fusion.MoEOp) { o.NormTopK = !o.NormTopK }, true},
		{"one expert fewer", both, func(o *fusion.MoEOp) { o.Used-- }, true},
		{"one expert more", both, func(o *fusion.MoEOp) { o.Used++ }, true},
		{"qwen3moe gating", oai, func(o *fusion.MoEOp) { o.Gating = fusion.GatingSoftmax }, true},
		{"no router bias", oai, func(o *fusion.MoEOp) { o.RouterBias = "" }, true},
		{"no gate bias", oai, func(o *fusion.MoEOp) { o.GateBias = "" }, true},
		{"no up bias", oai, func(o *fusion.MoEOp) { o.UpBias = "" }, true},
		{"no down bias", oai, func(o *fusion.MoEOp) { o.DownBias = "" }, true},
		{"silu for swiglu_oai", oai, func(o *fusion.MoEOp) { o.Act, o.SwiGLUOAI = fusion.ActSiLU, fusion.SwiGLUOAIParams{} }, true},
	}
	onFirstDevice(t, func(t *testing.T, dev gpu.Device) {
		for _, c := range conformance.MoECases() {
			isOAI := strings.Contains(c.Name, "_oai_")
			if !strings.HasPrefix(c.Name, "moe/f32_") && !strings.HasPrefix(c.Name, "moe/int4_") && !isOAI {
				continue // the rule is the kernels' whatever the weight type: two types keep the test short
			}
			// Cases where the edit is a valid op of another rule: top-1
			// has no fewer, top-8 of 8 no more, and renormalizing all 8
			// changes nothing.
			var op *fusion.MoEOp
			g, _ := c.Build()
			for _, o := range g.Ops {
				if m, ok := o.(*fusion.MoEOp); ok {
					op = m
				}
			}
			for _, e := range edits {
				if e.cases == qwen && isOAI || e.cases == oai && !isOAI {
					continue
				}
				probe := *op
				e.edit(&probe)
				if probe.Used < 1 || probe.Used > probe.Experts || (e.far && op.Used == op.Experts) || (e.far && probe == *op) {
					continue // not a valid op, or the same (a bias the case has not)
				}
				t.Run(c.Name+"/"+e.name, func(t *testing.T) {
					w := conformance.Worst(t, c, func(t testing.TB) gpu.Backend {
						return sharedBackend{backendOn(t, dev, compute.Options{})}
					}, func(g *fusion.Graph) {
						for _, o := range g.Ops {
							if m, ok := o.(*fusion.MoEOp); ok {
								e.edit(m)
							}
						}
					})
					t.Logf("worst |Δ| / tolerance: %.3g", w)
					if e.far != (w > 1) {
						t.Errorf("worst |Δ| / tolerance %.3g: want past the tolerance: %t", w, e.far)
					}
				})
			}
		}
	})
}

// TestMoEKernelsChosen: a decode step (1 row) and a batched-size step of
// 3 rows run the per-slot expert kernels; a prefill of 4+ rows groups the
// slots by expert (moe_sum adds each row's products). Read from a profile
// of the op's kernels.
func TestMoEKernelsChosen(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		be := backendOn(t, dev, compute.Options{})
		for _, tc := range []struct {
			tokens int
			want   []string
		}{
			{1, []string{"moe_route", "moe_glu", "moe_down"}},
			{3, []string{"moe_route", "moe_glu", "moe_down"}},
			{4, []string{"moe_route", "moe_glu", "moe_down", "moe_sum"}},
			{40, []string{"moe_route", "moe_glu", "moe_down", "moe_sum"}},
		} {
			t.Run(fmt.Sprintf("t%d", tc.tokens), func(t *testing.T) {
				g, ws := conformance.MoEGraph(tc.tokens)
				moe := func(op gpu.OpTime) bool { return op.Kind == fusion.MoE }
				var ran []string
				for _, k := range profiledKernels(t, be, g, ws, make([]int32, tc.tokens), moe) {
					if strings.HasPrefix(k, "moe_") {
						ran = append(ran, k)
					}
				}
				if !slices.Equal(ran, tc.want) {
					t.Errorf("moe kernels %v, want %v", ran, tc.want)
				}
			})
		}
	})
}

// TestMoEBiasTypes: expert biases that are not f32 values in one binding
// (here f16, as a converter might store a 2-D tensor) are refused with
// ErrUnsupported at compile, naming the tensor; f32 ones compile.
func TestMoEBiasTypes(t *testing.T) {
	ctx := context.Background()
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		be := backendOn(t, dev, compute.Options{})
		for _, name := range []string{"", "gate_b", "up_b", "down_b"} {
			sub := "f16_" + name
			if name == "" {
				sub = "all_f32"
			}
			t.Run(sub, func(t *testing.T) {
				g, ws := conformance.MoEOAIGraph(5)
				for i, w := range ws {
					if w.Name == name {
						v, err := w.Float32()
						if err != nil {
							t.Fatal(err)
						}
						if ws[i], err = tensors.FromF32(name, w.Shape, v, tensors.F16); err != nil {
							t.Fatal(err)
						}
					}
				}
				w, err := be.LoadWeights(ctx, ws)
				if err != nil {
					t.Fatal(err)
				}
				defer w.Release()
				p, err := be.Compile(g, w, nil)
				if name == "" {
					if err != nil {
						t.Fatalf("f32 biases: %v", err)
					}
					p.Release()
					return
				}
				if !errors.Is(err, gpu.ErrUnsupported) || !strings.Contains(err.Error(), name) {
					t.Fatalf("err = %v, want ErrUnsupported naming %q", err, name)
				}
			})
		}
	})
}

// moeRerunCases is the MoE cases a driver rerun (SwiftShader) repeats:
// every case of f32 weights (each rule and shape once) and of gpt-oss,
// and the first case of every other weight type (each type's block
// decoding in the MoE kernels once); the rules on those types are the
// same kernels' code, run on lavapipe for every type. It takes the rerun's
// MoE cases from 103 s to about a third.
func moeRerunCases(all []conformance.Case) []conformance.Case {
	var out []conformance.Case
	seen := map[string]bool{}
	for _, c := range all {
		typ, _, _ := strings.Cut(strings.TrimPrefix(c.Name, "moe/"), "_e")
		if strings.HasPrefix(c.Name, "moe/f32_") || strings.Contains(c.Name, "_oai_") || !seen[typ] {
			out = append(out, c)
		}
		seen[typ] = true
	}
	return out
}
