package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/pipeline/arch"
)

// ErrDeviceID reports a token id from the device's argmax that is not a
// vocabulary id: a backend bug, reported rather than fed back.
var ErrDeviceID = errors.New("pipeline: device argmax returned an invalid id")

// deviceGreedy reports whether greedy decoding with opts runs its argmax on
// the device, compiling the argmax decode program on first use. The caller
// holds sl. A backend without the op falls back to host sampling.
func (m *Model) deviceGreedy(sl *slot, opts *GenerateOptions) (bool, error) {
	m.mu.Lock()
	off := m.greedyOff
	m.mu.Unlock()
	if off || (opts.Temperature > 0 && opts.TopK != 1) {
		return false, nil
	}
	if m.batch != nil {
		// Greedy sessions join the batched rounds too (their rows' logits
		// come back for the host's argmax): the rounds read the weights
		// once for every session decoding at once.
		return false, nil
	}
	if sl.greedy != nil {
		return true, nil
	}
	p, err := m.compileWith(sl, arch.BuildOptions{Tokens: 1, Argmax: true})
	if errors.Is(err, gpu.ErrUnsupported) {
		m.mu.Lock()
		m.greedyOff = true
		m.mu.Unlock()
		return false, nil
	}
	if err != nil {
		return false, err
	}
	sl.greedy = p
	return true, nil
}

// stepGreedy runs the last token of context through the argmax decode
// program and returns the next token id: one value crosses from the device
// instead of a row of logits. The cache must hold every other token of
// context, as it does between decode steps; ok is false (and nothing ran)
// otherwise, so the caller takes the general path. The caller holds sl.
func (m *Model) stepGreedy(ctx context.Context, sl *slot, context []int) (id int, ok bool, err error) {
	n := len(context)
	if n == 0 || n > m.maxCache || len(sl.cached) != n-1 || !slices.Equal(sl.cached, context[:n-1]) {
		return 0, false, nil
	}
	var out [1]float32
	if err := m.run(ctx, sl.greedy, []int32{int32(context[n-1])}, n-1, out[:]); err != nil {
		return 0, true, err
	}
	sl.cached = append(sl.cached, context[n-1])
	v := out[0]
	if !(v >= 0 && v < float32(m.cfg.VocabSize)) || v != float32(math.Trunc(float64(v))) {
		return 0, true, fmt.Errorf("%w: %v for a vocabulary of %d", ErrDeviceID, v, m.cfg.VocabSize)
	}
	return int(v), true, nil
}
