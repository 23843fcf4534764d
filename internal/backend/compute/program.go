package compute

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// ErrRun reports bad Run or Logits arguments.
var ErrRun = errors.New("compute: bad run arguments")

const (
	paramSlot  = 256                    // uniform offsets must be multiples of 256 on WebGPU
	paramBytes = shaders.MaxParamsBytes // every params struct fits
	maxHeadDim = 512                    // attention.wgsl: 4 output dims per invocation and pass, two passes at most (Gemma 4's global heads)
)

// program is a compiled graph: its buffers, its recorded command list and
// the parameters that list reads. Not safe for concurrent use.
type program struct {
	b     *backend
	g     *fusion.Graph
	bufs  []gpu.Buffer // activations, by fusion.Buf
	step  gpu.Buffer   // the step buffer: stepWords, as encodeStep lays them out
	owned []gpu.Buffer // everything Release frees
	cmds  gpu.Commands // the list of the whole cache (span 0)
	items []item       // the planned commands, for re-recording with timestamps
	// spans holds the lists recorded for valid lengths below the cache's
	// (lenlists.go), by span; chunks is the most attn_split chunks an
	// item dispatches (0: none, one list serves every step).
	spans  map[int]gpu.Commands
	chunks int
	params gpu.Buffer // every dispatch's parameters
	vocab  int        // smallest embedding table, for token checks; 0 without Embed
	maxLen int        // cache positions, 0 when the graph uses no cache
	lastT  int

	// A batched step (fusion.Graph.Batch, CompileBatch): program row r is
	// always sequence r, whose cache is caches[r]; the step buffer holds
	// [0, rows used, tokens[Tokens], positions[Tokens]] (posAt is the word
	// of the first position), unused rows at position noRow.
	caches []*kvCache
	posAt  int
	// states are the caches whose recurrent states the program's steps
	// update (it runs a ShortConv or a Mamba2): the program's cache, or a batched
	// step's caches by sequence; nil otherwise (shortconv.go).
	states []*kvCache
	// setAt is the word of row 0's adapter set (gpu.Row.Adapter) in a
	// batched step, after the positions (fusion.RowLoRAOp).
	setAt    int
	lastRows []gpu.Row

	profiles     map[int]gpu.Commands // recorded with timestamps on first Profile, by span
	profileSlots []int

	multi multiStep // RunSteps' lists (steps.go)
	// rule is the sampling rule of a decode program ending in
	// fusion.Sample, written into its step tensor (SetSampling).
	rule *fusion.Sampling
	// picksAdvance: the program's picking kernel (its last op, an Argmax
	// or a Sample, in a decode program) advances the step tensor itself
	// (wgsl/lib/step_advance.wgsl), so RunSteps' lists dispatch no
	// advance kernel after it.
	picksAdvance bool
	// mask is the token mask of a program ending in fusion.Argmax or
	// fusion.Sample (SetTokenMask) over a vocabulary of maskN tokens;
	// masked: one is set.
	mask      gpu.Buffer
	maskN     int
	masked    bool
	maskBytes []byte // the last mask written, reused for the next

	// input holds the rows of a graph's fusion.InputOp (f32, Tokens rows
	// of inputCols; inputCols 0: none), of which SetInput wrote
	// inputRows; poolRows is the rows a fusion.AvgPoolOp's step must have
	// (0: none). vision.go.
	input     gpu.Buffer
	inputCols int
	inputRows int
	poolRows  int
}

// Compile validates g against the weights and cache and records its
// command list.
func (b *backend) Compile(g *fusion.Graph, w gpu.Weights, kv gpu.KVCache) (gpu.Program, error) {
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
	if err := g.Validate(shape); err != nil {
		return nil, fmt.Errorf("compute: compile: %w", err)
	}
	p := &program{b: b, g: g}
	var cache *kvCache
	if g.UsesKV() {
		c, ok := kv.(*kvCache)
		if !ok || c == nil || c.k == nil {
			return nil, fmt.Errorf("compute: compile: kv cache %T not made by this backend", kv)
		}
		if !c.spec.Equal(g.KV) {
			return nil, fmt.Errorf("compute: compile: %w: graph needs kv cache %+v, have %+v", fusion.ErrInvalid, g.KV, c.spec)
		}
		cache, p.maxLen = c, c.spec.MaxLen
	}
	var caches []*kvCache
	if cache != nil {
		caches = []*kvCache{cache}
	}
	if err := p.build(ws, caches); err != nil {
		p.Release()
		return nil, fmt.Errorf("compute: compile: %w", err)
	}
	return p, nil
}

func (p *program) newBuf(size int64) (gpu.Buffer, error) {
	buf, err := p.b.dev.NewBuffer(max(align16(size), 16)) // whole vec4s for the matmul kernels
	if err != nil {
		return nil, err
	}
	p.owned = append(p.owned, buf)
	return buf, nil
}

// actBytes is the size of an activation buffer: f32 words, or for an f16
// activation (fusion.BufInfo.F16) binary16 halves packed two per u32 word,
// the flat buffer packed (a row of odd width starts mid-word).
func actBytes(bi fusion.BufInfo) int64 {
	n := int64(bi.Rows) * int64(bi.Cols)
	if bi.F16 {
		return (n + 1) / 2 * 4
	}
	return n * 4
}

// build allocates the buffers, plans every op and records the list.
func (p *program) build(ws *weights, caches []*kvCache) error {
	g := p.g
	p.bufs = make([]gpu.Buffer, len(g.Bufs))
	var largest int64
	for i, bi := range g.Bufs {
		size := actBytes(bi)
		if size > p.b.devBinding {
			return fmt.Errorf("buffer %q of %d bytes exceeds one binding: %w", bi.Name, size, gpu.ErrUnsupported)
		}
		buf, err := p.newBuf(size)
		if err != nil {
			return err
		}
		p.bufs[i] = buf
		largest = max(largest, size) // the scratch buffer holds a copy of any of them
	}
	var err error
	nWords := shaders.StepToken + g.Tokens
	if g.Batch {
		p.posAt = nWords
		p.setAt = nWords + g.Tokens
		nWords += 2 * g.Tokens
	}
	stepBytes := int64(nWords) * 4
	if stepTensor(g) {
		// A decode program's step buffer is the step tensor (RunSteps).
		stepBytes = int64(binary.Size(shaders.DecodeStep{}))
	}
	if p.b.devCaps.HostBuffers {
		// Written and read every step: in place, waiting for no other
		// program's work.
		if p.step, err = p.b.dev.NewHostBuffer(max(align16(stepBytes), 16)); err != nil {
			return err
		}
		p.owned = append(p.owned, p.step)
	} else if p.step, err = p.newBuf(stepBytes); err != nil {
		return err
	}
	pl := &planner{p: p, ws: ws, caches: caches, half: map[gpu.Buffer]bool{}}
	for i, bi := range g.Bufs {
		pl.half[p.bufs[i]] = bi.F16
	}
	if pl.dummy, err = p.newBuf(16); err != nil {
		return err
	}
	if pl.scratch, err = p.newBuf(largest); err != nil {
		return err
	}
	for i := range g.Ops {
		pl.cur = i
		if err := pl.op(g.Ops[i]); err != nil {
			return fmt.Errorf("op %d (%s): %w", i, g.Ops[i].Kind(), err)
		}
	}
	return pl.record()
}

// Run writes the step buffer and submits the recorded list.
func (p *program) Run(ctx context.Context, tokens []int32, pos int) error {
	return p.run(ctx, tokens, pos, p.spanList)
}

// run writes the step buffer and submits the list that list returns for
// the step's span.
func (p *program) run(ctx context.Context, tokens []int32, pos int, list func(span int) (gpu.Commands, error)) error {
	if p.cmds == nil {
		return fmt.Errorf("%w: program released", ErrRun)
	}
	n := len(tokens)
	if err := gpu.CheckStep(p.g, n, pos, p.maxLen); err != nil {
		return fmt.Errorf("%w: %w", ErrRun, err)
	}
	if p.g.Batch {
		return fmt.Errorf("%w: Run of a batched graph (RunBatch runs it)", ErrRun)
	}
	if err := p.checkVisionStep(n); err != nil {
		return fmt.Errorf("%w: %w", ErrRun, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("compute: run: %w", err)
	}
	words := make([]uint32, n)
	for i, t := range tokens {
		if p.vocab > 0 && (t < 0 || int(t) >= p.vocab) {
			return fmt.Errorf("%w: token %d at row %d outside the vocabulary of %d", ErrRun, t, i, p.vocab)
		}
		words[i] = uint32(t)
	}
	for _, c := range p.states {
		if err := checkState(c, pos); err != nil {
			return fmt.Errorf("%w: %w", ErrRun, err)
		}
	}
	cmds, err := list(p.span(pos + n))
	if err != nil {
		return fmt.Errorf("compute: run: %w", err)
	}
	step := p.encodeStep(stepWords{Pos: uint32(pos), Rows: uint32(n), Tokens: words})
	p.lastT = 0
	if err := p.b.dev.Write(p.step, 0, step); err != nil {
		return fmt.Errorf("compute: run: %w", err)
	}
	setStates(p.states, -1) // unknown until the step ran
	if err := p.b.dev.Submit(cmds); err != nil {
		return fmt.Errorf("compute: run: %w", err)
	}
	if err := waitSubmitted(ctx, p.b.dev); err != nil {
		return fmt.Errorf("compute: run: %w", err)
	}
	setStates(p.states, pos+n)
	p.lastT = n
	return nil
}

// Logits waits for the last Run and copies its logits rows into dst.
func (p *program) Logits(dst []float32) (int, error) {
	if p.cmds == nil {
		return 0, fmt.Errorf("%w: program released", ErrRun)
	}
	if p.lastT == 0 {
		return 0, fmt.Errorf("%w: logits: no successful run yet", ErrRun)
	}
	if p.g.Batch {
		return p.batchLogits(dst)
	}
	info := p.g.Bufs[p.g.Logits]
	n := min(p.lastT, info.Rows) * info.Cols
	if len(dst) < n {
		return 0, fmt.Errorf("%w: logits: destination holds %d values, need %d", ErrRun, len(dst), n)
	}
	raw := make([]byte, 4*n)
	if err := p.b.dev.Read(p.bufs[p.g.Logits], 0, raw); err != nil {
		return 0, fmt.Errorf("compute: logits: %w", err)
	}
	for i := range n {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return n, nil
}

// Release frees the program's buffers and command list (not the weights or
// the cache).
func (p *program) Release() {
	p.releaseSteps()
	if p.cmds != nil {
		p.cmds.Release()
		p.cmds = nil
	}
	for _, c := range p.spans {
		c.Release()
	}
	for _, c := range p.profiles {
		c.Release()
	}
	p.spans, p.profiles = nil, nil
	for _, b := range p.owned {
		b.Release()
	}
	p.owned, p.bufs, p.lastT, p.caches, p.states = nil, nil, 0, nil, nil
}
