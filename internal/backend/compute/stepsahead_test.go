package compute

import (
	"context"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestStepsRecordAhead: a RunSteps whose next submission crosses into a
// longer span (lenlists.go) records that submission's list while the
// device runs, and the submissions that use it pick the ids single Runs
// pick (greedy, so the model's ids) across the span boundary.
func TestStepsRecordAhead(t *testing.T) {
	ck, err := llama2c.Load(testmodels.Path(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const n, total = 8, 80 // positions 56-63 and 64-71 lie in spans 1 and 2
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
			g := mustBuild(t, &ck.Config, arch.BuildOptions{Tokens: 1, MaxLen: 256, Argmax: true})
			kv, err := be.NewKVCache(g.KV)
			if err != nil {
				t.Fatal(err)
			}
			defer kv.Release()
			pr, err := be.Compile(gpu.Fuse(be, w, g), w, kv)
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Release()
			p := pr.(*program)
			if p.span(n*8) == p.span(n*9) {
				t.Fatalf("positions %d and %d share span %d: the test crosses no boundary", n*8, n*9, p.span(n*8))
			}
			var want []int32
			tok := int32(1)
			for pos := range total {
				if err := p.Run(ctx, []int32{tok}, pos); err != nil {
					t.Fatal(err)
				}
				var id [1]float32
				if _, err := p.Logits(id[:]); err != nil {
					t.Fatal(err)
				}
				tok = int32(id[0])
				want = append(want, tok)
			}
			var got []int32
			tok = 1
			for pos := 0; pos < total; pos += n {
				ids, err := p.RunSteps(ctx, tok, pos, n, nil)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, ids...)
				tok = ids[len(ids)-1]
				if next := p.span(pos + 2*n); next != p.span(pos+n) {
					if _, ok := p.multi.lists[stepsKey{n: n, span: next}]; !ok {
						t.Errorf("after %d steps at position %d: no list of %d steps for the next span %d", n, pos, n, next)
					}
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("RunSteps of %d steps: %v\nsingle Runs: %v", n, got, want)
			}
		})
	}
}
