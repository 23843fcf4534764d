package pipeline

import (
	"context"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/sampler"
)

// windowProgram adds StartSteps to a stepsProgram: a window hands out
// the toy model's picks, per a submission, up to its steps or a stop id.
// windows records each window's steps and positions, closes its Close
// calls; refuse makes StartSteps fail with ErrUnsupported.
type windowProgram struct {
	*stepsProgram
	windows [][2]int // steps, position
	closes  int
	refuse  bool
}

func (p *windowProgram) StartSteps(_ context.Context, token int32, pos, steps, per int, stops []int32, _ bool) (gpu.StepWindow, error) {
	if p.refuse {
		return nil, gpu.ErrUnsupported
	}
	p.windows = append(p.windows, [2]int{steps, pos})
	return &fakeWindow{p: p, token: token, left: steps, per: per, stops: stops}, nil
}

type fakeWindow struct {
	p     *windowProgram
	token int32
	left  int
	per   int
	stops []int32
	over  bool
}

func (w *fakeWindow) Next(context.Context) ([]int32, error) {
	var ids []int32
	for !w.over && w.left > 0 && len(ids) < w.per {
		w.token = int32(w.p.picked(w.token))
		ids = append(ids, w.token)
		w.left--
		w.over = slices.Contains(w.stops, w.token)
	}
	return ids, nil
}

func (w *fakeWindow) Close(context.Context) (uint64, error) { w.p.closes++; return 0, nil }

// TestWindowStep: windowStep hands out a window's ids one per call, the
// first token from the prefill's logits; a window is sized by the tokens
// left and the cache, a device stop id ends it and the next call starts
// another from there; a program that runs no windows leaves the steps to
// multiStep; close closes the window still open; and the cache's tokens
// are those before each id handed out or queued.
func TestWindowStep(t *testing.T) {
	stopAt := chain(2, 3)[2]
	for _, tc := range []struct {
		name    string
		left    int     // tokens the generation may produce
		n       int     // tokens asked for
		stops   []int32 // the device's stop ids
		refuse  bool
		windows [][2]int // steps and position of each window
		submits []int    // multiStep's submissions
	}{
		// The first token from the prefill's logits, then a window of the
		// 19 tokens left; 6 handed out.
		{name: "window", left: 20, n: 7, windows: [][2]int{{19, 2}}},
		// The cache (32) bounds the window: positions 2..31.
		{name: "cache", left: 60, n: 7, windows: [][2]int{{30, 2}}},
		// The window ends at the stop id (the third id); the next starts
		// from it.
		{name: "stop id", left: 20, n: 7, stops: []int32{int32(stopAt)}, windows: [][2]int{{19, 2}, {17, 4}}},
		// No windows: multiStep's submissions of 4.
		{name: "refused", left: 20, n: 7, refuse: true, submits: []int{4, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, sl, dec, row := toyModel([]int{5, 2})
			m.caps = multiStepCaps
			fp := &fakeProgram{pick: true}
			h := &hostPick{m: m, sl: sl, row: row, fresh: true, sampler: sampler.New(sampler.Options{}), filter: anyToken{}}
			sp := &stepsProgram{fakeProgram: fp}
			wp := &windowProgram{stepsProgram: sp, refuse: tc.refuse}
			d := &deviceStep{host: h, prog: newPickProgram(wp, fusion.Sampling{}, multiStepCaps)}
			w := &windowStep{multi: &multiStep{single: d, most: 4, stops: tc.stops}}
			got := drive(t, w, []int{5, 2}, tc.n, tc.left)
			if want := chain(2, tc.n); !slices.Equal(got, want) {
				t.Errorf("ids %v, want %v", got, want)
			}
			if !slices.Equal(wp.windows, tc.windows) || !slices.Equal(sp.submits, tc.submits) || len(fp.runs) != 0 || len(dec.runs) != 0 {
				t.Errorf("windows %v, submissions %v, single steps %d, host steps %d; want %v, %v, 0, 0", wp.windows, sp.submits, len(fp.runs), len(dec.runs), tc.windows, tc.submits)
			}
			// The cache holds the tokens before each id handed out or queued.
			all := append([]int{5, 2}, got...)
			all = append(all, w.multi.queue...)
			if want := all[:len(all)-1]; !slices.Equal(sl.cached, want) {
				t.Errorf("cache holds %v, want %v", sl.cached, want)
			}
			var mt Metrics
			w.close(&mt)
			if wp.closes != len(tc.windows) {
				t.Errorf("%d windows closed of %d", wp.closes, len(tc.windows))
			}
			if mt.DevicePicked != tc.n-1 {
				t.Errorf("device picked %d, want %d", mt.DevicePicked, tc.n-1)
			}
		})
	}
}
