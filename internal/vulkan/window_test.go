//go:build cgo

package vulkan

import (
	"context"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestDecodeWindows: stories260K's sampled decode steps in windows
// (gpu.Program.StartSteps over this device's SubmitRead: submissions of
// 1, 2, 4, then 8 steps, queued before the host reads one) pick the ids
// of 8-step RunSteps submissions, on the mapped and the staging path;
// timed, the window reports device time. The device-level checks of the
// read ahead are TestSubmitRead's; this runs the decode path the pipeline
// takes, here also under the validation layer (TestValidationClean).
func TestDecodeWindows(t *testing.T) {
	ck, err := llama2c.Load(testmodels.Path(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	rule := fusion.Sampling{Temperature: 0.9, TopK: 40, TopP: 0.95, Seed: 3}
	memoryModes(t, func(t *testing.T, d *Device) {
		ctx := context.Background()
		be := compute.New(d)
		defer be.Close()
		if !be.Caps().ReadAhead || be.Caps().MaxSteps < 8 {
			t.Fatalf("backend caps: ReadAhead %v, MaxSteps %d; want windows of 8-step submissions", be.Caps().ReadAhead, be.Caps().MaxSteps)
		}
		w, err := be.LoadWeights(ctx, ck.Tensors)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Release()
		g, err := arch.Build(&ck.Config, arch.BuildOptions{Tokens: 1, MaxLen: 128, Sample: &rule})
		if err != nil {
			t.Fatal(err)
		}
		kv, err := be.NewKVCache(g.KV)
		if err != nil {
			t.Fatal(err)
		}
		defer kv.Release()
		p, err := be.Compile(gpu.Fuse(be, w, g), w, kv)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Release()
		const per, total = 8, 40
		var want []int32
		tok := int32(1)
		for len(want) < total {
			ids, err := p.RunSteps(ctx, tok, len(want), per, nil)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, ids...)
			tok = ids[len(ids)-1]
		}
		for _, timed := range []bool{false, true} {
			if timed && !be.Caps().Timestamps {
				continue
			}
			win, err := p.StartSteps(ctx, 1, 0, total, per, nil, timed)
			if err != nil {
				t.Fatal(err)
			}
			var got []int32
			for {
				ids, err := win.Next(ctx)
				if err != nil {
					win.Close(context.Background())
					t.Fatal(err)
				}
				if len(ids) == 0 {
					break
				}
				got = append(got, ids...)
			}
			nanos, err := win.Close(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("timed %v: window ids\n got %v\nwant %v (8-step submissions one at a time)", timed, got, want)
			}
			if timed && nanos == 0 {
				t.Errorf("a timed window reports no device time")
			}
		}
	})
}
