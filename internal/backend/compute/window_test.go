package compute

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// windowIDs runs a window and returns its ids, submission by submission.
func windowIDs(t *testing.T, p *program, tok int32, pos, steps, per int, stops []int32, timed bool) ([][]int32, uint64) {
	t.Helper()
	ctx := context.Background()
	w, err := p.StartSteps(ctx, tok, pos, steps, per, stops, timed)
	if err != nil {
		t.Fatal(err)
	}
	var subs [][]int32
	for {
		ids, err := w.Next(ctx)
		if err != nil {
			w.Close(context.Background())
			t.Fatal(err)
		}
		if len(ids) == 0 {
			break
		}
		subs = append(subs, ids)
	}
	nanos, err := w.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return subs, nanos
}

// stepsIDs runs total steps from pos with RunSteps, per a submission:
// the unpipelined path windows must reproduce.
func stepsIDs(t *testing.T, p *program, tok int32, pos, total, per int) []int32 {
	t.Helper()
	var out []int32
	for len(out) < total {
		n := min(per, total-len(out))
		ids, err := p.RunSteps(context.Background(), tok, pos+len(out), n, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ids...)
		tok = ids[len(ids)-1]
	}
	return out
}

// submissionSizes is how many ids each submission of a window handed out.
func submissionSizes(subs [][]int32) []int {
	n := make([]int, len(subs))
	for i, s := range subs {
		n[i] = len(s)
	}
	return n
}

// TestWindowEnds: a window's submissions grow from one step, doubling up
// to perSubmit, the last what is left.
func TestWindowEnds(t *testing.T) {
	for _, tc := range []struct {
		steps, per int
		want       []int
	}{
		{1, 1, []int{1}},
		{5, 1, []int{1, 2, 3, 4, 5}},
		{2, 2, []int{1, 2}},
		{7, 2, []int{1, 3, 5, 7}},
		{20, 8, []int{1, 3, 7, 15, 20}},
		{16, 8, []int{1, 3, 7, 15, 16}},
		{15, 8, []int{1, 3, 7, 15}},
		{64, 6, []int{1, 3, 7, 13, 19, 25, 31, 37, 43, 49, 55, 61, 64}},
		{64, 64, []int{1, 3, 7, 15, 31, 63, 64}},
	} {
		if got := windowEnds(tc.steps, tc.per); !slices.Equal(got, tc.want) {
			t.Errorf("windowEnds(%d, %d) = %v, want %v", tc.steps, tc.per, got, tc.want)
		}
	}
}

// TestStepWindows: a window of decode steps (StartSteps, the next
// submission queued before the host reads the one before) picks the ids
// RunSteps' one-at-a-time submissions pick, greedy and sampled, for
// whole windows (with the picking kernel advancing the step tensor, and
// with the advance kernel after an op that follows the pick), a window
// ending in a stop id mid-submission (nothing
// after it is handed out), and a window the host closes after its first
// submission (one step), whose queued next ones wrote cache positions
// past the ids taken: steps from the accepted position then still pick RunSteps' ids.
// A timed window reports device time. A device that does not read ahead
// refuses windows with ErrUnsupported.
func TestStepWindows(t *testing.T) {
	ck, err := llama2c.Load(testmodels.Path(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const per, total = 8, 80 // a window of 64 and one of 16 (positions 64-79 cross into a longer span)
	rule := fusion.Sampling{Temperature: 0.9, TopK: 40, TopP: 0.95, Seed: 7}
	for _, d := range TestDevices {
		for _, pick := range []string{"argmax", "sample", "advance kernel"} {
			t.Run(d.Name+"/"+pick, func(t *testing.T) {
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
				o := arch.BuildOptions{Tokens: 1, MaxLen: 256, Argmax: true}
				if pick == "sample" {
					o = arch.BuildOptions{Tokens: 1, MaxLen: 256, Sample: &rule}
				}
				g := mustBuild(t, &ck.Config, o)
				if pick == "advance kernel" {
					// An op after the Argmax: the advance kernel (wgsl/step.wgsl)
					// advances the step tensor, at each step's index in the
					// window (its parameters' slot), not the picking kernel.
					am := g.Ops[len(g.Ops)-1].(*fusion.ArgmaxOp)
					in := g.Bufs[am.In]
					g.Add(&fusion.ActivationOp{Out: g.NewBuf("after", in.Rows, in.Cols), In: am.In, Act: fusion.ActSiLU})
				}
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
				if p.picksAdvance == (pick == "advance kernel") {
					t.Fatalf("%s: picksAdvance %v", pick, p.picksAdvance)
				}
				if !be.Caps().ReadAhead {
					if _, err := p.StartSteps(ctx, 1, 0, 16, per, nil, false); !errors.Is(err, gpu.ErrUnsupported) {
						t.Fatalf("StartSteps on a device that does not read ahead: %v, want ErrUnsupported", err)
					}
					t.Logf("%s does not read ahead: windows refused", d.Name)
					return
				}
				want := stepsIDs(t, p, 1, 0, total, per)

				// Whole windows, 64 steps then 16.
				subs, _ := windowIDs(t, p, 1, 0, 64, per, nil, false)
				subs2, _ := windowIDs(t, p, want[63], 64, total-64, per, nil, false)
				// Submissions of 1, 2, 4, then 8 steps (windowEnds).
				want64 := []int{1, 2, 4, 8, 8, 8, 8, 8, 8, 8, 1}
				want16 := []int{1, 2, 4, 8, 1}
				if got, got2 := submissionSizes(subs), submissionSizes(subs2); !slices.Equal(got, want64) || !slices.Equal(got2, want16) {
					t.Errorf("windows of 64 and 16 steps handed out submissions of %v and %v steps, want %v and %v", got, got2, want64, want16)
				}
				if got := slices.Concat(append(subs, subs2...)...); !slices.Equal(got, want) {
					t.Errorf("windows: %v\nRunSteps: %v", got, want)
				}

				// A stop id mid-window: the first id, past the first
				// submission, that did not come before it.
				k := per + 3
				for slices.Contains(want[:k], want[k]) {
					k++
				}
				subs, _ = windowIDs(t, p, 1, 0, 64, per, []int32{want[k]}, false)
				if got := slices.Concat(subs...); !slices.Equal(got, want[:k+1]) {
					t.Errorf("window with stop id %d (step %d): %v\nwant %v", want[k], k, got, want[:k+1])
				}

				// The host stops after the first submission; the ones
				// after it, already queued, ran past it. Closed with a live
				// ctx the window waits for them; with a cancelled one (a
				// cancelled generation) it leaves them to the device and
				// says so (nil where they had finished already). Either way
				// the steps that follow, ordered after them, pick RunSteps'
				// ids.
				cancelled, cancel := context.WithCancel(ctx)
				cancel()
				for _, closeCtx := range []context.Context{ctx, cancelled} {
					win, err := p.StartSteps(ctx, 1, 0, 64, per, nil, false)
					if err != nil {
						t.Fatal(err)
					}
					first, err := win.Next(ctx)
					if err != nil {
						t.Fatal(err)
					}
					_, err = win.Close(closeCtx)
					if err != nil && (closeCtx.Err() == nil || !errors.Is(err, context.Canceled)) {
						t.Errorf("window closed after its first submission (ctx error %v): %v", closeCtx.Err(), err)
					}
					if !slices.Equal(first, want[:1]) {
						t.Errorf("first submission of a window: %v, want %v (one step)", first, want[:1])
					}
					if got := stepsIDs(t, p, want[0], 1, 2*per, per); !slices.Equal(got, want[1:1+2*per]) {
						t.Errorf("steps from position 1 after a window closed there (ctx error %v): %v\nwant %v", closeCtx.Err(), got, want[1:1+2*per])
					}
				}

				// Timed.
				if be.Caps().Timestamps {
					subs, nanos := windowIDs(t, p, 1, 0, 20, per, nil, true)
					if got := slices.Concat(subs...); !slices.Equal(got, want[:20]) {
						t.Errorf("timed window: %v\nwant %v", got, want[:20])
					}
					if nanos == 0 {
						t.Errorf("timed window of 20 steps: no device time")
					}
				}
			})
		}
	}
}
