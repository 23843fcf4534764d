package compute

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
)

// noRow is the position of a row a batched step leaves unused: past every
// cache, so the kernels store and attend nothing for it.
const noRow = math.MaxUint32

// CompileBatch compiles a batched decode step (gpu.Backend.CompileBatch). Program
// row r is always sequence r, so each row's KV-cache store and attention
// are dispatches of their own binding that sequence's cache (recorded
// once, like every command list here); every other op runs all the rows
// at once, reading the weights once per step. It needs a row per
// sequence: len(kvs) <= g.Tokens.
func (b *backend) CompileBatch(g *fusion.Graph, w gpu.Weights, kvs []gpu.KVCache) (gpu.BatchProgram, error) {
	if g == nil {
		return nil, fmt.Errorf("compute: compile: nil graph")
	}
	ws, ok := w.(*weights)
	if !ok || ws == nil || ws.byName == nil {
		return nil, fmt.Errorf("compute: compile: weights %T not loaded by this backend", w)
	}
	shape := func(name string) ([]int, bool) {
		t, ok := ws.byName[name]
		if !ok {
			return nil, false
		}
		return t.shape, true
	}
	if err := g.ValidateBatch(shape); err != nil {
		return nil, fmt.Errorf("compute: compile: %w", err)
	}
	if len(kvs) == 0 {
		return nil, fmt.Errorf("compute: compile: a batched graph without sequences: %w", fusion.ErrInvalid)
	}
	if len(kvs) > g.Tokens {
		return nil, fmt.Errorf("compute: compile: %d sequences for a batched graph of %d rows (one row per sequence): %w", len(kvs), g.Tokens, gpu.ErrUnsupported)
	}
	p := &program{b: b, g: g}
	if g.UsesKV() {
		for i, kv := range kvs {
			c, ok := kv.(*kvCache)
			if !ok || c == nil || c.k == nil {
				return nil, fmt.Errorf("compute: compile: kv cache %d: %T not made by this backend", i, kv)
			}
			if !c.spec.Equal(g.KV) {
				return nil, fmt.Errorf("compute: compile: %w: graph needs kv cache %+v, cache %d is %+v", fusion.ErrInvalid, g.KV, i, c.spec)
			}
			p.caches = append(p.caches, c)
		}
		p.maxLen = g.KV.MaxLen
	}
	if err := p.build(ws, p.caches); err != nil {
		p.Release()
		return nil, fmt.Errorf("compute: compile: %w", err)
	}
	return p, nil
}

// RunBatch writes the step buffer (each row's token, position and adapter
// set at the row of its sequence, the rows no sequence uses at noRow) and submits the
// recorded list. Rows past the highest sequence named are not computed.
func (p *program) RunBatch(ctx context.Context, rows []gpu.Row) error {
	if p.cmds == nil {
		return fmt.Errorf("%w: program released", ErrRun)
	}
	g := p.g
	if !g.Batch {
		return fmt.Errorf("%w: RunBatch of a graph without Batch", ErrRun)
	}
	p.lastT = 0
	maxLen := p.maxLen
	if len(p.caches) == 0 {
		maxLen = math.MaxInt32
	}
	if err := gpu.CheckBatch(g, rows, max(len(p.caches), 1), maxLen); err != nil {
		return fmt.Errorf("%w: %w", ErrRun, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("compute: run: %w", err)
	}
	T := g.Tokens
	used := 0
	for _, r := range rows {
		used = max(used, r.Seq+1)
	}
	sw := stepWords{Rows: uint32(used), Tokens: make([]uint32, T), Positions: make([]uint32, T), Sets: make([]uint32, T)}
	for t := range T {
		sw.Positions[t], sw.Sets[t] = noRow, noRow
	}
	for i, r := range rows {
		if p.vocab > 0 && (r.Token < 0 || int(r.Token) >= p.vocab) {
			return fmt.Errorf("%w: token %d at row %d outside the vocabulary of %d", ErrRun, r.Token, i, p.vocab)
		}
		sw.Tokens[r.Seq], sw.Positions[r.Seq] = uint32(r.Token), uint32(r.Pos)
		sw.Sets[r.Seq] = uint32(min(r.Adapter, math.MaxUint32-1))
	}
	// The list of the span of the furthest row's positions.
	valid := 0
	for _, r := range rows {
		valid = max(valid, r.Pos+1)
	}
	if p.states != nil {
		for i, r := range rows {
			if err := checkState(p.states[r.Seq], r.Pos); err != nil {
				return fmt.Errorf("%w: row %d (sequence %d): %w", ErrRun, i, r.Seq, err)
			}
		}
	}
	cmds, err := p.spanList(p.span(valid))
	if err != nil {
		return fmt.Errorf("compute: run: %w", err)
	}
	step := p.encodeStep(sw)
	if err := p.b.dev.Write(p.step, 0, step); err != nil {
		return fmt.Errorf("compute: run: %w", err)
	}
	if p.states != nil {
		for _, r := range rows {
			p.states[r.Seq].statePos = -1 // unknown until the step ran
		}
	}
	if err := p.b.dev.Submit(cmds); err != nil {
		return fmt.Errorf("compute: run: %w", err)
	}
	if err := waitSubmitted(ctx, p.b.dev); err != nil {
		return fmt.Errorf("compute: run: %w", err)
	}
	if p.states != nil {
		// Each row ran its sequence one position on; the other
		// sequences' states are untouched (their rows are at noRow).
		for _, r := range rows {
			p.states[r.Seq].statePos = r.Pos + 1
		}
	}
	p.lastRows = append(p.lastRows[:0], rows...)
	p.lastT = len(rows)
	return nil
}

// batchLogits copies the logits of the last RunBatch's rows, in the order
// of its rows, from the program rows of their sequences.
func (p *program) batchLogits(dst []float32) (int, error) {
	cols := p.g.Bufs[p.g.Logits].Cols
	n := len(p.lastRows) * cols
	if len(dst) < n {
		return 0, fmt.Errorf("%w: logits: destination holds %d values, need %d", ErrRun, len(dst), n)
	}
	used := 0
	for _, r := range p.lastRows {
		used = max(used, r.Seq+1)
	}
	raw := make([]byte, 4*used*cols)
	if err := p.b.dev.Read(p.bufs[p.g.Logits], 0, raw); err != nil {
		return 0, fmt.Errorf("compute: logits: %w", err)
	}
	for i, r := range p.lastRows {
		src := raw[4*r.Seq*cols:]
		for j := range cols {
			dst[i*cols+j] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*j:]))
		}
	}
	return n, nil
}
