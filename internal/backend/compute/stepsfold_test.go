package compute

import (
	"context"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestStepsAdvanceKernel holds RunSteps' two ways of advancing the step
// tensor to each other: a decode program whose last op is its Argmax
// advances in the picking kernel (lib/step_advance.wgsl), one with an op
// after the Argmax dispatches the advance kernel (wgsl/step.wgsl) after
// it. From the same token and position both must pick the ids that single
// Runs pick (greedy, so the ids are the model's), with and without a stop
// id among them.
func TestStepsAdvanceKernel(t *testing.T) {
	ck, err := llama2c.Load(testmodels.Path(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, d := range TestDevices {
		t.Run(d.Name, func(t *testing.T) {
			dev, err := d.Open(ctx)
			gputest.NoDevice(t, d.Name, err)
			defer dev.Close()
			be := New(dev)
			defer be.Close()
			w, err := be.LoadWeights(ctx, ck.Tensors)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Release()
			compile := func(after bool) *program {
				t.Helper()
				g := mustBuild(t, &ck.Config, arch.BuildOptions{Tokens: 1, MaxLen: 64, Argmax: true})
				if after {
					// An op after the pick, reading the logits row.
					am, ok := g.Ops[len(g.Ops)-1].(*fusion.ArgmaxOp)
					if !ok {
						t.Fatalf("the greedy graph ends in %T", g.Ops[len(g.Ops)-1])
					}
					in := g.Bufs[am.In]
					g.Add(&fusion.ActivationOp{Out: g.NewBuf("after", in.Rows, in.Cols), In: am.In, Act: fusion.ActSiLU})
				}
				kv, err := be.NewKVCache(g.KV)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(kv.Release)
				pr, err := be.Compile(gpu.Fuse(be, w, g), w, kv)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(pr.Release)
				return pr.(*program)
			}
			folded, kernel := compile(false), compile(true)
			if !folded.picksAdvance || kernel.picksAdvance {
				t.Fatalf("picksAdvance: %v for a last Argmax, %v for one with an op after it", folded.picksAdvance, kernel.picksAdvance)
			}
			// The ids single Runs pick from token 1 at position 0.
			const n = 6
			var want []int32
			tok := int32(1)
			for pos := range n {
				if err := folded.Run(ctx, []int32{tok}, pos); err != nil {
					t.Fatal(err)
				}
				var id [1]float32
				if _, err := folded.Logits(id[:]); err != nil {
					t.Fatal(err)
				}
				tok = int32(id[0])
				want = append(want, tok)
			}
			for _, p := range []*program{folded, kernel} {
				got, err := p.RunSteps(ctx, 1, 0, n, nil)
				if err != nil || !slices.Equal(got, want) {
					t.Errorf("picksAdvance %v: RunSteps %v, %v; single Runs %v", p.picksAdvance, got, err, want)
				}
				// A stop id at the fourth step ends the submission there.
				got, err = p.RunSteps(ctx, 1, 0, n, []int32{want[3]})
				if stop := slices.Index(want, want[3]); err != nil || !slices.Equal(got, want[:stop+1]) {
					t.Errorf("picksAdvance %v: RunSteps to stop id %d: %v, %v; want %v", p.picksAdvance, want[3], got, err, want[:stop+1])
				}
			}
		})
	}
}
