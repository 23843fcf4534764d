package pipeline

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
)

// A context at a depth: what a benchmark sets up before it measures a
// test "at depth D" (llama-bench's -d), the conversation holding D
// positions that the measured prompt and decode steps attend to. Prefill
// runs the D tokens as a prompt would; FillRandom writes random keys and
// values instead, which costs a fraction of a long prefill and changes
// nothing in what a later step costs: attention reads every cached
// position whatever it holds.

// fillRows is the most positions one step of FillRandom's store program
// writes.
const fillRows = 512

// Prefill appends ids to the conversation and runs them into the cache
// as Generate runs a prompt (reusing what the slot or the prefix cache
// holds), without generating: the next Generate continues after them.
// Metrics describe the prefill (PromptTokens, PrefillTokens, PrefillTime).
func (s *Session) Prefill(ctx context.Context, ids []int) error {
	s.metrics, s.prompt = Metrics{}, nil
	if len(ids) == 0 {
		return fmt.Errorf("%w: nothing to prefill", ErrPrompt)
	}
	if err := s.checkIDs(ids); err != nil {
		return err
	}
	m := s.m
	if len(s.history)+len(ids) > m.maxCache {
		return fmt.Errorf("%w: %d tokens with the conversation so far, cache holds %d", ErrPromptTooLong, len(s.history)+len(ids), m.maxCache)
	}
	s.prompt = append([]int(nil), ids...)
	s.metrics.PromptTokens = len(ids)
	context := append(append([]int(nil), s.history...), ids...)
	sl, err := m.acquire(ctx, context)
	if err != nil {
		return err
	}
	defer m.release(sl)
	return s.prefill(ctx, sl, context, make([]float32, m.cfg.VocabSize))
}

// FillRandom makes ids the conversation of the session, which must be
// empty, with random keys and values at their positions rather than the
// model's: the cache's first len(ids) positions are written with normal
// random values (from seed) by a program of StoreKV ops on the model's
// backend, which stores (and quantizes, rotates) them as a prompt's keys
// and values are stored. The next Generate continues after them, its
// steps attending to every filled position: a benchmark's stand-in for
// a long prefill (decode cost does not depend on the values). What it
// generates then means nothing, and so does what a later session whose
// context starts with ids generates while the slot still holds them
// (the slot reuses them as any cached prefix). It refuses a model with a prefix cache
// (the random keys and values would be kept as ids'), a model whose
// layers keep recurrent states, and one whose layers' head sizes differ
// (ErrUnsupported).
func (s *Session) FillRandom(ctx context.Context, ids []int, seed uint64) error {
	s.metrics, s.prompt = Metrics{}, nil
	m := s.m
	switch {
	case len(s.history) > 0:
		return fmt.Errorf("%w: a random fill starts a conversation (this one holds %d tokens)", ErrPrompt, len(s.history))
	case len(ids) == 0:
		return fmt.Errorf("%w: nothing to fill", ErrPrompt)
	case len(ids) > m.maxCache:
		return fmt.Errorf("%w: a fill of %d positions, cache holds %d", ErrPromptTooLong, len(ids), m.maxCache)
	case m.prefix != nil:
		return fmt.Errorf("%w: a random fill with a prefix cache, which would keep its keys and values as the ids'", ErrOptions)
	}
	if err := s.checkIDs(ids); err != nil {
		return err
	}
	g, err := m.fillGraph(min(fillRows, len(ids)))
	if err != nil {
		return err
	}
	sl, err := m.acquire(ctx, nil)
	if err != nil {
		return err
	}
	defer m.release(sl)
	sl.cut(0)
	m.lockDevice()
	prog, err := m.backend.Compile(g, m.weights, sl.kv)
	m.unlockDevice()
	if err != nil {
		return fmt.Errorf("pipeline: random fill: compile: %w", err)
	}
	defer prog.Release()
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	cols := g.InputCols()
	rows := make([]float32, g.Tokens*cols)
	for pos := 0; pos < len(ids); {
		n := min(g.Tokens, len(ids)-pos)
		for i := range rows[:n*cols] {
			rows[i] = float32(rng.NormFloat64())
		}
		if err := m.fillStep(ctx, prog, rows[:n*cols], n, pos); err != nil {
			sl.distrust(pos)
			return err
		}
		pos += n
	}
	sl.cached = append(sl.cached[:0], ids...)
	s.history = append([]int(nil), ids...)
	s.prompt = append([]int(nil), ids...)
	s.metrics.PromptTokens = len(ids)
	return nil
}

// fillStep stores rows (n of them) at positions pos.. through prog.
func (m *Model) fillStep(ctx context.Context, prog gpu.Program, rows []float32, n, pos int) error {
	m.lockDevice()
	defer m.unlockDevice()
	if err := prog.SetInput(rows); err != nil {
		return fmt.Errorf("pipeline: random fill: %w", err)
	}
	if err := prog.Run(ctx, make([]int32, n), pos); err != nil {
		return fmt.Errorf("pipeline: random fill of %d positions at %d: %w", n, pos, err)
	}
	return nil
}

// fillGraph is FillRandom's program: one input row per position (the
// keys, also taken as the values) stored into every layer's cache.
func (m *Model) fillGraph(tokens int) (*fusion.Graph, error) {
	spec := m.kvSpec
	if spec.Recurrent() {
		return nil, fmt.Errorf("pipeline: random fill of a model with recurrent layers: %w", gpu.ErrUnsupported)
	}
	hd := 0
	for l := range spec.Layers {
		d := spec.LayerHeadDim(l)
		if d == 0 {
			continue // reads another layer's cache
		}
		if hd != 0 && d != hd {
			return nil, fmt.Errorf("pipeline: random fill of caches of head sizes %d and %d: %w", hd, d, gpu.ErrUnsupported)
		}
		hd = d
	}
	if hd == 0 || spec.KVHeads <= 0 {
		return nil, fmt.Errorf("pipeline: random fill of a model without KV caches: %w", gpu.ErrUnsupported)
	}
	g := &fusion.Graph{Tokens: tokens, KV: spec}
	in := g.NewBuf("fill", tokens, spec.KVHeads*hd)
	g.Add(&fusion.InputOp{Out: in})
	for l := range spec.Layers {
		if spec.LayerHeadDim(l) == 0 {
			continue
		}
		g.Add(&fusion.StoreKVOp{K: in, V: in, Layer: l, KVHeads: spec.KVHeads, HeadDim: hd})
	}
	g.Logits = in
	return g, nil
}

// checkIDs checks that every id is in the vocabulary.
func (s *Session) checkIDs(ids []int) error {
	for i, id := range ids {
		if id < 0 || id >= s.m.cfg.VocabSize {
			return fmt.Errorf("%w: id %d at %d outside the vocabulary of %d", ErrPrompt, id, i, s.m.cfg.VocabSize)
		}
	}
	return nil
}
