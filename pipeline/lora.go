package pipeline

import (
	"context"
	"sync"

	"fmt"
	"github.com/gpurun/gpurun/gpu"
	"slices"

	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/lora"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// unmergedLoRA checks the adapters against the weights and returns the
// weights with the adapters' tensors added (in the storage backend wants:
// loraStorage), and the pairs by projection.
func unmergedLoRA(cfg *model.Config, ws []*tensors.Tensor, list []lora.Applied, backend gpu.Backend) ([]*tensors.Tensor, map[string][]arch.LoRAPair, error) {
	if len(list) == 0 {
		return ws, nil, nil
	}
	ts, pairs, err := lora.Unmerged(cfg.Arch, ws, list)
	if err != nil {
		return nil, nil, fmt.Errorf("pipeline: %w", err)
	}
	if ts, err = loraStorage(ts, pairs, ws, backend); err != nil {
		return nil, nil, err
	}
	byWeight := map[string][]arch.LoRAPair{}
	for _, p := range pairs {
		byWeight[p.Target] = append(byWeight[p.Target], arch.LoRAPair{A: p.A, B: p.B, Rank: p.Rank})
	}
	return append(slices.Clip(ws), ts...), byWeight, nil
}

// loraStorage returns the f32 adapter matrices ts (lora.Unmerged's, of
// pairs over the weights ws) as backend takes them: when it is a
// backend whose Caps().HalfLoRA asks for it, the A ([rank, in]) and B ([out, rank])
// matrices of pairs whose target weight is quantized (so its products
// already approximate) become binary16, half the bytes a decode step
// reads; the pairs of f32 weights stay f32 (an f32 model stays exact).
func loraStorage(ts []*tensors.Tensor, pairs []lora.UnmergedPair, ws []*tensors.Tensor, backend gpu.Backend) ([]*tensors.Tensor, error) {
	if !backend.Caps().HalfLoRA {
		return ts, nil
	}
	dtypes := make(map[string]tensors.DType, len(ws))
	for _, w := range ws {
		dtypes[w.Name] = w.DType
	}
	half := map[string]bool{}
	for _, p := range pairs {
		switch dtypes[p.Target] {
		case tensors.F32, tensors.F16, tensors.BF16:
		default:
			half[p.A], half[p.B] = true, true
		}
	}
	out := make([]*tensors.Tensor, len(ts))
	for i, t := range ts {
		out[i] = t
		if !half[t.Name] || t.DType != tensors.F32 {
			continue
		}
		vals, err := t.Float32()
		if err != nil {
			return nil, fmt.Errorf("pipeline: adapter matrix %s: %w", t.Name, err)
		}
		if out[i], err = tensors.FromF32(t.Name, t.Shape, vals, tensors.F16); err != nil {
			return nil, fmt.Errorf("pipeline: adapter matrix %s: %w", t.Name, err)
		}
	}
	return out, nil
}

// sharedWeights are weights several variants of a model run on: released
// when the last of them closes.
type sharedWeights struct {
	w      gpu.Weights
	device *sync.Mutex                // the variants' device lock
	pairs  map[string][]arch.LoRAPair // the holder's adapter set
	refs   *sharedRefs
}

type sharedRefs struct {
	mu sync.Mutex
	n  int
	w  gpu.Weights
}

func (s *sharedWeights) hold() {
	s.refs.mu.Lock()
	s.refs.n++
	s.refs.mu.Unlock()
}

func (s *sharedWeights) drop() {
	s.refs.mu.Lock()
	defer s.refs.mu.Unlock()
	if s.refs.n--; s.refs.n == 0 && s.refs.w != nil {
		s.refs.w.Release()
		s.refs.w = nil
	}
}

// FromCheckpointVariants loads ck's weights once on opts.Backend (which
// must be set), with the tensors of every adapter set, and returns one
// Model per set over them: sets[i]'s adapters applied unmerged (an empty
// set is the bare base model). Each variant has its own slots (opts.Slots
// each), KV caches and programs; the weights are released when the last
// variant closes. opts.LoRA must be empty.
func FromCheckpointVariants(ctx context.Context, ck *model.Checkpoint, opts Options, sets [][]lora.Applied) (_ []*Model, err error) {
	if ck == nil || opts.Backend == nil || len(opts.LoRA) > 0 || len(sets) == 0 {
		return nil, fmt.Errorf("%w: variants need a checkpoint, a backend, adapter sets and no Options.LoRA", ErrOptions)
	}
	tok, err := checkpointTokenizer(ck)
	if err != nil {
		return nil, fmt.Errorf("pipeline: tokenizer: %w", err)
	}
	all := slices.Clip(ck.Tensors)
	pairs := make([]map[string][]arch.LoRAPair, len(sets))
	for i, set := range sets {
		ts, ps, err := lora.Unmerged(ck.Config.Arch, ck.Tensors, set)
		if err != nil {
			return nil, fmt.Errorf("pipeline: adapter set %d: %w", i, err)
		}
		if ts, err = loraStorage(ts, ps, ck.Tensors, opts.Backend); err != nil {
			return nil, fmt.Errorf("pipeline: adapter set %d: %w", i, err)
		}
		// Each set's tensors under its own names.
		suffix := fmt.Sprintf(".set%d", i)
		for _, t := range ts {
			c := *t
			c.Name += suffix
			all = append(all, &c)
		}
		pairs[i] = map[string][]arch.LoRAPair{}
		for _, p := range ps {
			pairs[i][p.Target] = append(pairs[i][p.Target], arch.LoRAPair{A: p.A + suffix, B: p.B + suffix, Rank: p.Rank})
		}
	}
	w, err := opts.Backend.LoadWeights(ctx, all)
	if err != nil {
		return nil, fmt.Errorf("pipeline: weights: %w", err)
	}
	refs := &sharedRefs{n: 1, w: w} // the 1 is ours until the variants hold it
	var models []*Model
	defer func() {
		if err != nil {
			for _, m := range models {
				m.Close()
			}
		}
		(&sharedWeights{refs: refs}).drop()
	}()
	device := new(sync.Mutex)
	for i := range sets {
		o := opts
		o.shared = &sharedWeights{w: w, device: device, pairs: pairs[i], refs: refs}
		m, err := newModel(ctx, &ck.Config, ck.Tensors, tok, o)
		if err != nil {
			return nil, err
		}
		models = append(models, m)
	}
	if err := batchVariants(ctx, models, pairs, opts, all); err != nil {
		return nil, err
	}
	for _, m := range models {
		if err := m.finish(ctx); err != nil {
			return nil, err
		}
	}
	return models, nil
}

// batchVariants gives the variants one batcher whose rows are all their
// slots, each applying its variant's adapter set (arch.BuildOptions.RowLoRA),
// so that requests for different adapters share decode steps. On a backend
// without those steps (gpu.ErrUnsupported), each variant of several slots
// batches its own.
func batchVariants(ctx context.Context, models []*Model, pairs []map[string][]arch.LoRAPair, opts Options, ws []*tensors.Tensor) error {
	var slots []*slot
	for i, m := range models {
		for _, sl := range m.slots {
			sl.seq, sl.adapter = len(slots), i
			slots = append(slots, sl)
		}
	}
	if len(slots) < 2 || !batching(opts, models[0].backend, ws) {
		return nil
	}
	if err := loadCancelled(ctx); err != nil {
		return err
	}
	b, err := startBatcher(models[0], slots, arch.BuildOptions{RowLoRA: pairs})
	if err != nil {
		return err
	}
	if b != nil {
		b.users.Store(int32(len(models)))
		for _, m := range models {
			m.batch = b
		}
		return nil
	}
	for _, m := range models {
		if len(m.slots) > 1 {
			if m.batch, err = m.newBatcher(); err != nil {
				return err
			}
		}
	}
	return nil
}
