package cpu

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu/internal/simd"
	"github.com/gpurun/gpurun/internal/sampler"
	"github.com/gpurun/gpurun/tensors"
)

// program is a validated graph with its buffers allocated and its weights
// resolved. A program is not safe for concurrent use; programs compiled
// against the same weights and cache share them.
type program struct {
	pool       *pool
	activation actTask // the running fusion.ActivationOp, split across the pool
	math       Math
	graph      *fusion.Graph
	half       bool // the graph has f16 activations (roundHalves)
	bufs       [][]float32
	steps      []step
	kv         *kvCache
	logits     fusion.Buf
	lastT      int // tokens of the last successful Run, 0 before any

	// inputCols is the width of the graph's fusion.InputOp (0: none) and
	// input the rows SetInput gave it.
	inputCols int
	input     []float32

	// Per-thread scratch memory and the reusable loop bodies: a step
	// allocates nothing.
	scratch []scratch
	mm      mmTask
	at      attnTask
	qt      quantTask
	qbufs   [numLayouts]qbuf // dynamic math: the input quantized in each layout
	stepID  int              // counts executed steps; tells qbufs' contents apart

	// A batched program (fusion.Graph.Batch) has the caches of its
	// sequences, and during a RunBatch its rows' positions and caches.
	seqs   []*kvCache
	rowPos []int
	rowSeq []*kvCache
	// rowAdapter is each row's gpu.Row.Adapter during a RunBatch.
	rowAdapter []int
	loraT      []float32 // RowLoRA: a row's A·x
	tokens     []int32

	// allowed is the token mask of a program ending in fusion.Argmax or
	// fusion.Sample (SetTokenMask); nil: none.
	allowed []uint64

	// selfKV holds the keys and transposed values of a fusion.SelfAttnOp
	// step, packed per KV head (selfGemm).
	selfKV []float32
}

// scratch is one thread's working memory.
type scratch struct {
	rows, upRows      []float32                  // a prefill tile's rows as f32 (gate, up)
	row               []float32                  // a decode row of a block-type matrix as f32
	rowViews, upViews [][]float32                // the tile's rows
	sc                []float32                  // a row's block scales as f32
	scores            []float32                  // attention scores of one query or one tile
	gs, us            [4]float32                 // four tokens' products (gate, up)
	rg, ru            [rowRun]float32            // a run of decode rows' products (gate, up)
	tg, tu            [tokTile * rowTile]float32 // a prefill tile's products (gate, up)
	g2                [8]float32                 // two rows' products with four tokens
	gr                [simd.GemmRows]float32     // a packed group's products (gemmRows)
	qrot              []float32                  // a query rotated for a quantized cache (growQuery)
	qq                q8Query                    // a query quantized for quantized keys
	vrows, vsum       []float32                  // quantized values dequantized, and their sum (growValues)
	gw                []float32                  // a group's attention weights (groupRows)
	wide, wideUp      []float32                  // a chunk of weight rows unpacked to f32 (runUnpacked)
}

// qbuf holds a step's input quantized by simd.QuantizeQ8 or QuantizeQ8K
// (s: the sums of every 16 values).
type qbuf struct {
	q    []int8
	d    []float32
	s    []int16
	xs   []int32 // layoutQ8: simd.BlockSums of q, for the GEMM
	step int     // the step q holds
	// xsStep is the step xs holds: the sums are made only for a GEMM.
	xsStep int
}

// step is one op with everything it reads resolved.
type step struct {
	op  fusion.Op
	out fusion.Buf   // the op's first output (-1: none, StoreKV)
	ins []fusion.Buf // its inputs (op.Inputs())
	eps float32      // the norm prologue's epsilon
	w   *matrix      // Embed, MatMul, MatMulGLU (the gate)
	// positions are an Embed by position's row ids (EmbedOp.Positions).
	positions []int32
	up        *matrix     // MatMulGLU
	ws        []*matrix   // MultiMatMul
	bs        [][]float32 // MultiMatMul biases (nil entries: none)
	upBias    []float32   // MatMulGLU
	vec       []float32   // Norm scale, ShortConv kernel
	bias      []float32   // Norm (layer), MatMul
	act       func(float32) float32
	silu      bool       // act is silu: the vector SwiGLU kernel may run it (GLU, MatMulGLU)
	rope      ropeParams // Rope, RopeStoreKV (q)
	ropeK     ropeParams // RopeStoreKV (k)
	kbuf      []float32  // RopeStoreKV: the rotated k rows, stored but not written back; MatMulRopeKV: the k rows; ShortConv: its window
	vbuf      []float32  // MatMulRopeKV: the v rows
	norm      []float32  // the norm prologue's scale (MatMul kinds with a Prologue)
	normed    []float32  // the norm prologue's output
	attn      attnParams
	moe       *moeStep     // MoE
	delta     *deltaStep   // DeltaNet
	ssm       *mamba2Step  // Mamba2
	lora      [][]loraMats // RowLoRA: each adapter set's pairs
}

// Compile validates g against the weights and cache and prepares it.
func (b *backend) Compile(g *fusion.Graph, w gpu.Weights, kv gpu.KVCache) (gpu.Program, error) {
	return b.compile(g, w, []gpu.KVCache{kv}, false)
}

// CompileBatch validates the batched graph g against the weights and the
// caches of its sequences and prepares it (gpu.Backend.CompileBatch).
func (b *backend) CompileBatch(g *fusion.Graph, w gpu.Weights, kvs []gpu.KVCache) (gpu.BatchProgram, error) {
	if len(kvs) == 0 {
		return nil, fmt.Errorf("cpu: compile: a batched graph without sequences: %w", fusion.ErrInvalid)
	}
	p, err := b.compile(g, w, kvs, true)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (b *backend) compile(g *fusion.Graph, w gpu.Weights, kvs []gpu.KVCache, batch bool) (*program, error) {
	if g == nil {
		return nil, fmt.Errorf("cpu: compile: nil graph")
	}
	ws, ok := w.(*weights)
	if !ok || ws == nil || ws.byName == nil {
		return nil, fmt.Errorf("cpu: compile: weights %T not loaded by this backend", w)
	}
	shape := func(name string) ([]int, bool) {
		m, ok := ws.byName[name]
		if !ok {
			return nil, false
		}
		return m.shape, true
	}
	validate := g.Validate
	if batch {
		validate = g.ValidateBatch
	}
	if err := validate(shape); err != nil {
		return nil, fmt.Errorf("cpu: compile: %w", err)
	}
	p := &program{pool: b.pool, math: b.math, graph: g, logits: g.Logits, half: g.HasHalfActivations()}
	if g.UsesKV() {
		for _, kv := range kvs {
			c, ok := kv.(*kvCache)
			if !ok || c == nil || c.layers == nil {
				return nil, fmt.Errorf("cpu: compile: kv cache %T not made by this backend", kv)
			}
			if !c.spec.Equal(g.KV) {
				return nil, fmt.Errorf("cpu: compile: %w: graph needs kv cache %+v, have %+v", fusion.ErrInvalid, g.KV, c.spec)
			}
			p.seqs = append(p.seqs, c)
		}
		p.kv = p.seqs[0]
		if !batch {
			p.seqs = nil
		}
	}
	if batch {
		p.rowPos, p.rowSeq, p.tokens = make([]int, 0, g.Tokens), make([]*kvCache, 0, g.Tokens), make([]int32, 0, g.Tokens)
	}
	p.bufs = make([][]float32, len(g.Bufs))
	for i, bi := range g.Bufs {
		p.bufs[i] = make([]float32, bi.Rows*bi.Cols)
	}
	// vector resolves an optional vector weight (checked by Validate).
	vector := func(name string) []float32 {
		if name == "" {
			return nil
		}
		return ws.byName[name].vector()
	}
	for _, op := range g.Ops {
		s := step{op: op, out: -1, ins: op.Inputs()}
		if outs := op.Outputs(); len(outs) > 0 {
			s.out = outs[0]
		}
		var pro *fusion.RMSPrologue
		switch op := op.(type) {
		case *fusion.EmbedOp:
			s.w = ws.byName[op.Weight]
			if op.Positions {
				s.positions = make([]int32, g.Tokens)
			}
		case *fusion.MatMulOp:
			s.w, s.bias, pro = ws.byName[op.Weight], vector(op.Bias), op.Prologue
		case *fusion.NormOp:
			s.vec, s.bias = vector(op.Weight), vector(op.Bias)
			if op.Unit {
				n := g.Bufs[op.Out].Cols
				if op.HeadDim > 0 {
					n = op.HeadDim
				}
				s.vec = ones(n)
			}
		case *fusion.ScaleOp:
			s.vec = vector(op.Weight)
		case *fusion.ColumnsOp:
		case *fusion.GLUOp:
			s.act, s.silu = activations[op.Act], op.Act == fusion.ActSiLU
		case *fusion.ActivationOp:
			s.act = activations[op.Act]
		case *fusion.MatMulGLUOp:
			s.w, s.up, s.act = ws.byName[op.Gate.Weight], ws.byName[op.Up.Weight], activations[op.Act]
			s.bias, s.upBias = vector(op.Gate.Bias), vector(op.Up.Bias)
			s.silu = op.Act == fusion.ActSiLU
			pro = op.Prologue
		case *fusion.MultiMatMulOp:
			for _, pr := range op.Outs {
				s.ws = append(s.ws, ws.byName[pr.Weight])
				s.bs = append(s.bs, vector(pr.Bias))
			}
			pro = op.Prologue
		case *fusion.RopeOp:
			s.rope = newRope(op.Heads, op.HeadDim, op.RopeParams)
		case *fusion.RopeStoreKVOp:
			s.rope = newRope(op.Heads, op.HeadDim, op.RopeParams)
			s.ropeK = s.rope
			s.ropeK.heads = op.KVHeads
			s.kbuf = make([]float32, g.Tokens*op.KVHeads*op.HeadDim)
		case *fusion.MatMulRopeKVOp:
			for _, pr := range []fusion.Projection{op.Q, op.K, op.V} {
				s.ws = append(s.ws, ws.byName[pr.Weight])
				s.bs = append(s.bs, vector(pr.Bias))
			}
			pro = op.Prologue
			s.rope = newRope(op.Heads, op.HeadDim, op.RopeParams)
			s.ropeK = s.rope
			s.ropeK.heads = op.KVHeads
			s.kbuf = make([]float32, g.Tokens*op.KVHeads*op.HeadDim)
			s.vbuf = make([]float32, g.Tokens*op.KVHeads*op.HeadDim)
		case *fusion.AttentionOp:
			s.attn = attnParams{heads: op.Heads, kvHeads: op.KVHeads, headDim: op.HeadDim,
				scale: op.Scale, cap: op.Cap, window: op.Window, sinks: vector(op.Sinks), nonCausal: op.NonCausal, symmetric: op.SymmetricWindow}
		case *fusion.MoEOp:
			s.act, s.silu = activations[op.Act], op.Act == fusion.ActSiLU
			var err error
			if s.moe, err = newMoEStep(ws, op, g.Tokens, g.Bufs[op.In].Cols); err != nil {
				return nil, err
			}
			s.ws = []*matrix{s.moe.router, s.moe.gate[0], s.moe.down[0]} // sizes the scratch
		case *fusion.RowLoRAOp:
			s.lora = newRowLoRA(ws, op)
			for _, set := range s.lora {
				for _, m := range set {
					s.ws = append(s.ws, m.a, m.b) // sizes the scratch
				}
			}
		case *fusion.ShortConvOp:
			// The kernel as f32 [Channels][Width]; kbuf, the window of
			// the state and the step's inputs.
			s.vec = vector(op.Weight)
			s.kbuf = make([]float32, (op.Width-1+g.Tokens)*op.Channels)
		case *fusion.InputOp:
			p.inputCols = g.Bufs[op.Out].Cols
		case *fusion.SelfAttnOp: // each thread's scores of a row: scratch.scores (allocScratch)
		case *fusion.DeltaNetOp:
			s.delta = newDeltaStep(op, vector(op.Conv), vector(op.DtBias), vector(op.A), g.Tokens, b.pool.threads)
		case *fusion.SigmoidGateOp:
		case *fusion.Mamba2Op:
			s.ssm = newMamba2Step(op, vector, g.Tokens)
		case *fusion.StoreKVOp, *fusion.AddOp, *fusion.SoftCapOp, *fusion.LastRowOp, *fusion.ArgmaxOp, *fusion.SampleOp, *fusion.AvgPoolOp:
		default:
			return nil, fmt.Errorf("cpu: compile: %w: op kind %s", gpu.ErrUnsupported, op.Kind())
		}
		if pro != nil {
			in := g.Bufs[s.ins[0]]
			s.norm, s.eps = vector(pro.Weight), pro.Eps
			s.normed = make([]float32, in.Rows*in.Cols)
		}
		p.steps = append(p.steps, s)
	}
	p.allocScratch()
	return p, nil
}

// allocScratch sizes the per-thread scratch and the quantized-input buffers
// for the largest step.
func (p *program) allocScratch() {
	g := p.graph
	maxCols, maxIn := 1, 1
	prefill := false
	selfRows := 0 // a SelfAttn step's scores of a tile (selfGemm)
	for _, s := range p.steps {
		if op, ok := s.op.(*fusion.SelfAttnOp); ok {
			selfRows = max(selfRows, selfAttnScratch(g.Tokens, op.HeadDim))
			p.selfKV = make([]float32, max(len(p.selfKV), selfAttnBufs(g.Tokens, op)))
		}
		for _, w := range append([]*matrix{s.w, s.up}, s.ws...) {
			if w != nil {
				maxCols = max(maxCols, w.cols)
			}
		}
		switch s.op.(type) {
		case *fusion.MatMulOp, *fusion.MultiMatMulOp, *fusion.MatMulGLUOp, *fusion.MatMulRopeKVOp:
			in := g.Bufs[s.ins[0]]
			maxIn = max(maxIn, in.Rows*in.Cols)
			prefill = prefill || in.Rows >= prefillMin
		case *fusion.MoEOp:
			in := g.Bufs[s.ins[0]]
			maxIn = max(maxIn, in.Rows*in.Cols, s.moe.down[0].cols)
			prefill = prefill || in.Rows >= prefillMin
		}
	}
	maxLen := 1
	if p.kv != nil {
		maxLen = p.kv.spec.MaxLen
	}
	p.scratch = make([]scratch, p.pool.threads)
	for i := range p.scratch {
		s := &p.scratch[i]
		s.sc = make([]float32, maxCols)
		s.row = make([]float32, maxCols)
		s.scores = make([]float32, max(attnTile*maxLen, selfRows)) // a prompt tile's rows, or a self-attention row
		if prefill {
			s.rows, s.upRows = make([]float32, rowTile*maxCols), make([]float32, rowTile*maxCols)
			s.rowViews, s.upViews = make([][]float32, 0, rowTile), make([][]float32, 0, rowTile)
		}
	}
	if p.math == MathDynamic {
		for i := range p.qbufs {
			p.qbufs[i] = qbuf{q: make([]int8, maxIn), d: make([]float32, maxIn/32+1), s: make([]int16, maxIn/simd.QKSum+1), xs: make([]int32, maxIn/simd.QBlock+1), step: -1, xsStep: -1}
		}
	}
	p.mm.p, p.at.p = p, p
}

// errRun reports bad Run arguments.
var errRun = errors.New("cpu: bad run arguments")

// Run executes the graph for len(tokens) tokens at positions pos, pos+1, ...
func (p *program) Run(ctx context.Context, tokens []int32, pos int) error {
	p.lastT = 0
	g := p.graph
	if g == nil {
		return fmt.Errorf("%w: program released", errRun)
	}
	n := len(tokens)
	maxLen := 0
	if p.kv != nil {
		maxLen = p.kv.spec.MaxLen
	}
	if err := gpu.CheckStep(g, n, pos, maxLen); err != nil {
		return fmt.Errorf("%w: %w", errRun, err)
	}
	for i := range p.steps {
		p.stepID++
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("cpu: run: %w", err)
		}
		if err := p.exec(&p.steps[i], tokens, pos); err != nil {
			return fmt.Errorf("cpu: op %d (%s): %w", i, p.steps[i].op.Kind(), err)
		}
		p.roundHalves(&p.steps[i], n)
	}
	p.lastT = n
	return nil
}

// RunBatch executes a batched graph for rows, each its own sequence at its
// own position (gpu.BatchProgram).
func (p *program) RunBatch(ctx context.Context, rows []gpu.Row) error {
	p.lastT = 0
	g := p.graph
	if g == nil {
		return fmt.Errorf("%w: program released", errRun)
	}
	if !g.Batch {
		return fmt.Errorf("%w: RunBatch of a graph without Batch", errRun)
	}
	maxLen := g.KV.MaxLen
	if p.kv == nil {
		maxLen = math.MaxInt32
	}
	if err := gpu.CheckBatch(g, rows, max(len(p.seqs), 1), maxLen); err != nil {
		return fmt.Errorf("%w: %w", errRun, err)
	}
	p.tokens, p.rowPos, p.rowSeq, p.rowAdapter = p.tokens[:0], p.rowPos[:0], p.rowSeq[:0], p.rowAdapter[:0]
	for _, r := range rows {
		p.tokens = append(p.tokens, r.Token)
		p.rowAdapter = append(p.rowAdapter, r.Adapter)
		p.rowPos = append(p.rowPos, r.Pos)
		if p.seqs != nil {
			p.rowSeq = append(p.rowSeq, p.seqs[r.Seq])
		}
	}
	for i := range p.steps {
		p.stepID++
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("cpu: run: %w", err)
		}
		if err := p.exec(&p.steps[i], p.tokens, 0); err != nil {
			return fmt.Errorf("cpu: op %d (%s): %w", i, p.steps[i].op.Kind(), err)
		}
		p.roundHalves(&p.steps[i], len(rows))
	}
	p.lastT = len(rows)
	return nil
}

// prologue returns the input of a MatMul kind: x itself, or with a norm
// prologue its first n rows normed exactly as a Norm op norms them.
func (p *program) prologue(s *step, x []float32, cols, n int) []float32 {
	if s.norm == nil {
		return x
	}
	rmsNorm(s.normed, x, cols, n, s.norm, s.eps)
	return s.normed
}

// exec runs one op. Rows past n (the step's token count, or the buffer's one
// row after LastRow) are not touched.
func (p *program) exec(s *step, tokens []int32, pos int) error {
	g := p.graph
	n := len(tokens)
	var out []float32
	var outInfo fusion.BufInfo
	if s.out >= 0 {
		out, outInfo = p.bufs[s.out], g.Bufs[s.out]
		n = min(n, outInfo.Rows)
	}
	in := func(i int) []float32 { return p.bufs[s.ins[i]] }
	inCols := func(i int) int { return g.Bufs[s.ins[i]].Cols }
	cols := outInfo.Cols
	switch op := s.op.(type) {
	case *fusion.EmbedOp:
		if op.Positions {
			ids := s.positions[:n]
			for t := range ids {
				ids[t] = int32(pos + t)
			}
			return embed(out, cols, ids, s.w, op.Scale)
		}
		return embed(out, cols, tokens, s.w, op.Scale)
	case *fusion.NormOp:
		if op.Norm == fusion.NormLayer {
			layerNorm(out, in(0), cols, n, s.vec, s.bias, op.Eps)
		} else if op.HeadDim > 0 {
			// Rows are contiguous: n rows of cols are n*cols/HeadDim heads.
			rmsNorm(out, in(0), op.HeadDim, n*cols/op.HeadDim, s.vec, op.Eps)
		} else {
			rmsNorm(out, in(0), cols, n, s.vec, op.Eps)
		}
	case *fusion.MatMulOp:
		x := p.prologue(s, in(0), inCols(0), n)
		p.mm = mmTask{p: p, out: out, outCols: cols, in: x, inCols: inCols(0), n: n, w: s.w, bias: s.bias, acc: op.Accumulate}
		p.quantize(&p.mm, x, inCols(0), n)
		p.matMul(&p.mm)
	case *fusion.MultiMatMulOp:
		x := p.prologue(s, in(0), inCols(0), n)
		for i, pr := range op.Outs {
			o := pr.Out
			p.mm = mmTask{p: p, out: p.bufs[o], outCols: g.Bufs[o].Cols, in: x, inCols: inCols(0), n: n, w: s.ws[i], bias: s.bs[i]}
			p.quantize(&p.mm, x, inCols(0), n)
			p.matMul(&p.mm)
		}
	case *fusion.MatMulGLUOp:
		x := p.prologue(s, in(0), inCols(0), n)
		p.mm = mmTask{p: p, out: out, outCols: cols, in: x, inCols: inCols(0), n: n, w: s.w, up: s.up,
			bias: s.bias, upBias: s.upBias, act: s.act, silu: s.silu, glu: true}
		if s.w.layout() == s.up.layout() {
			p.quantize(&p.mm, x, inCols(0), n)
		}
		p.matMul(&p.mm)
	case *fusion.RopeOp:
		if op.Out != op.In {
			copy(out[:n*cols], in(0)[:n*cols])
		}
		if g.Batch {
			for t := range n {
				rope(out[t*cols:(t+1)*cols], cols, 1, p.rowPos[t], s.rope)
			}
			break
		}
		rope(out, cols, n, pos, s.rope)
	case *fusion.StoreKVOp:
		if g.Batch {
			c := inCols(0)
			for t := range n {
				storeKV(&p.rowSeq[t].layers[op.Layer], in(0)[t*c:], in(1)[t*c:], c, 1, p.rowPos[t])
			}
			break
		}
		storeKV(&p.kv.layers[op.Layer], in(0), in(1), inCols(0), n, pos)
	case *fusion.RopeStoreKVOp:
		// Validation made it unbatched with distinct q, k and v: Rope of q
		// in place, then StoreKV of the rotated copy of k.
		rope(out, cols, n, pos, s.rope)
		kc := inCols(1)
		copy(s.kbuf[:n*kc], in(1)[:n*kc])
		rope(s.kbuf, kc, n, pos, s.ropeK)
		storeKV(&p.kv.layers[op.Layer], s.kbuf, in(2), kc, n, pos)
	case *fusion.MatMulRopeKVOp:
		// Validation made it unbatched: the three products as MatMul
		// computes them (q into out, k and v into the step's buffers),
		// then RopeStoreKV's rope and store.
		x := p.prologue(s, in(0), inCols(0), n)
		kc := op.KVHeads * op.HeadDim
		for i, o := range [][]float32{out, s.kbuf, s.vbuf} {
			oc := []int{cols, kc, kc}[i]
			p.mm = mmTask{p: p, out: o, outCols: oc, in: x, inCols: inCols(0), n: n, w: s.ws[i], bias: s.bs[i]}
			p.quantize(&p.mm, x, inCols(0), n)
			p.matMul(&p.mm)
		}
		rope(out, cols, n, pos, s.rope)
		rope(s.kbuf, kc, n, pos, s.ropeK)
		storeKV(&p.kv.layers[op.Layer], s.kbuf, s.vbuf, kc, n, pos)
	case *fusion.AttentionOp:
		p.at = attnTask{p: p, out: out, q: in(0), n: n, pos: pos, c: &p.kv.layers[op.Layer], ap: s.attn}
		if g.Batch {
			p.at.layer, p.at.rowPos, p.at.rowSeq = op.Layer, p.rowPos[:n], p.rowSeq[:n]
		}
		p.attention(&p.at)
	case *fusion.ShortConvOp:
		return p.shortConvStep(s, op, out, in(0), n, pos)
	case *fusion.InputOp:
		if len(p.input) < n*cols {
			return fmt.Errorf("%w: input of %d rows for a step of %d (gpu.Program.SetInput)", gpu.ErrStep, len(p.input)/cols, n)
		}
		copy(out[:n*cols], p.input[:n*cols])
	case *fusion.SelfAttnOp:
		p.selfAttention(out, in(0), in(1), in(2), n, op)
	case *fusion.AvgPoolOp:
		return avgPool(out, in(0), cols, n, op)
	case *fusion.DeltaNetOp:
		return p.deltaNetStep(s, op, out, in(0), in(1), in(2), n, pos)
	case *fusion.SigmoidGateOp:
		sigmoidGate(out, in(0), in(1), n, cols, inCols(1))
	case *fusion.Mamba2Op:
		return p.runMamba2(s, op, out, in(0), n, pos)
	case *fusion.MoEOp:
		p.moe(s, op, out, in(0), cols, n)
	case *fusion.RowLoRAOp:
		p.rowLoRA(s, out, in(0), inCols(0), cols, n)
	case *fusion.GLUOp:
		if s.silu {
			simd.SwiGLU(out[:n*cols], in(0)[:n*cols], in(1)[:n*cols]) // silu's bits
			break
		}
		glu(out, in(0), in(1), n*cols, s.act)
	case *fusion.ActivationOp:
		p.activation = actTask{out: out, in: in(0), act: s.act}
		p.pool.run(n*cols, n*cols*actWork, actGrain, &p.activation)
		p.activation = actTask{}
	case *fusion.AddOp:
		add(out, in(0), in(1), n*cols)
	case *fusion.ScaleOp:
		f := op.Scale
		if f == 0 {
			f = 1
		}
		if s.vec != nil {
			f *= s.vec[0]
		}
		x := in(0)
		for i := range out[:n*cols] {
			out[i] = x[i] * f
		}
	case *fusion.ColumnsOp:
		x, xc := in(0), inCols(0)
		for t := range n {
			copy(out[t*cols:(t+1)*cols], x[t*xc+op.Offset:])
		}
	case *fusion.SoftCapOp:
		softCap(out, in(0), n*cols, op.Cap)
	case *fusion.LastRowOp:
		lastRow(out, in(0), cols, len(tokens))
	case *fusion.ArgmaxOp:
		out[0] = float32(argmax(p.maskLogits(in(0)[:inCols(0)])))
	case *fusion.SampleOp:
		r := op.Sampling
		sm := sampler.New(sampler.Options{Temperature: r.Temperature, TopK: r.TopK, TopP: r.TopP, Seed: r.Seed})
		out[0] = float32(sm.SampleAt(p.maskLogits(in(0)[:inCols(0)]), uint32(pos+len(tokens))))
	default:
		return fmt.Errorf("%w: unknown op kind %s", gpu.ErrUnsupported, s.op.Kind())
	}
	return nil
}

// roundHalves rounds the rows < n of the f16 activations (fusion.BufInfo.F16)
// op s wrote, as the GPU kernels store them.
func (p *program) roundHalves(s *step, n int) {
	if !p.half {
		return
	}
	for _, o := range s.op.Outputs() {
		p.roundBuf(o, n)
	}
}

func (p *program) roundBuf(b fusion.Buf, n int) {
	if info := p.graph.Bufs[b]; info.F16 {
		roundHalf(p.bufs[b][:min(n, info.Rows)*info.Cols])
	}
}

// roundHalf rounds every value of x to binary16 (nearest, ties to even),
// saturating at ±maxHalf: an f16 activation's store.
func roundHalf(x []float32) {
	for i, v := range x {
		x[i] = tensors.F16Float(tensors.F16Bits(min(max(v, -maxHalf), maxHalf)))
	}
}

// SetInput keeps a copy of the rows the graph's fusion.InputOp reads.
func (p *program) SetInput(rows []float32) error {
	if p.inputCols == 0 {
		return fmt.Errorf("cpu: set input: the graph has no %s op: %w", fusion.Input, gpu.ErrUnsupported)
	}
	if len(rows)%p.inputCols != 0 {
		return fmt.Errorf("cpu: set input: %w: %d values are not rows of %d", fusion.ErrInvalid, len(rows), p.inputCols)
	}
	p.input = append(p.input[:0], rows...)
	return nil
}

// Logits copies the rows of the logits buffer the last Run wrote.
func (p *program) Logits(dst []float32) (int, error) {
	if p.lastT == 0 {
		return 0, fmt.Errorf("cpu: logits: no successful run yet")
	}
	info := p.graph.Bufs[p.logits]
	n := min(p.lastT, info.Rows) * info.Cols
	if len(dst) < n {
		return 0, fmt.Errorf("cpu: logits: destination holds %d values, need %d", len(dst), n)
	}
	return copy(dst, p.bufs[p.logits][:n]), nil
}

func (p *program) Release() {
	p.graph, p.bufs, p.steps, p.lastT = nil, nil, nil, 0
	p.scratch, p.qbufs, p.mm, p.at, p.qt = nil, [numLayouts]qbuf{}, mmTask{}, attnTask{}, quantTask{}
	p.kv, p.seqs, p.rowSeq = nil, nil, nil
}

// pickedCols is the vocabulary of the token a program picks (the row its
// fusion.Argmax or fusion.Sample reads); ok is false for other programs.
func (p *program) pickedCols() (int, bool) {
	for _, op := range p.graph.Ops {
		switch op := op.(type) {
		case *fusion.ArgmaxOp:
			return p.graph.Bufs[op.In].Cols, true
		case *fusion.SampleOp:
			return p.graph.Bufs[op.In].Cols, true
		}
	}
	return 0, false
}

// RunSteps fails with gpu.ErrUnsupported: the backend picks one token per
// Run (Caps().MaxSteps is 0).
func (p *program) RunSteps(context.Context, int32, int, int, []int32) ([]int32, error) {
	return nil, fmt.Errorf("cpu: several decode steps per run: %w", gpu.ErrUnsupported)
}

// TimeSteps fails with gpu.ErrUnsupported: no multi-step submissions and
// no timestamps (Caps().MaxSteps is 0, Caps().Timestamps false).
func (p *program) TimeSteps(context.Context, int32, int, int, []int32) ([]int32, uint64, error) {
	return nil, 0, fmt.Errorf("cpu: timed decode steps: %w", gpu.ErrUnsupported)
}

// StartSteps fails with gpu.ErrUnsupported: the CPU backend runs one step
// per Run and has no queue to read ahead of (Caps().ReadAhead is false).
func (p *program) StartSteps(context.Context, int32, int, int, int, []int32, bool) (gpu.StepWindow, error) {
	return nil, fmt.Errorf("cpu: decode step windows: %w", gpu.ErrUnsupported)
}

// SetSampling fails with gpu.ErrUnsupported: a sampling rule is compiled
// into the graph (Caps().Sampling is false).
func (p *program) SetSampling(fusion.Sampling) error {
	return fmt.Errorf("cpu: set sampling: %w", gpu.ErrUnsupported)
}

// Profile fails with gpu.ErrUnsupported: the backend keeps no timestamps
// (Caps().Timestamps is false).
func (p *program) Profile(context.Context, []int32, int) ([]gpu.OpTime, error) {
	return nil, fmt.Errorf("cpu: profile: %w", gpu.ErrUnsupported)
}

// SetTokenMask (gpu.Program) for a program ending in fusion.Argmax or
// fusion.Sample.
func (p *program) SetTokenMask(allowed []uint64) error {
	n, ok := p.pickedCols()
	if !ok {
		return fmt.Errorf("cpu: set token mask: the program picks no token: %w", gpu.ErrUnsupported)
	}
	if allowed == nil {
		p.allowed = nil
		return nil
	}
	if len(allowed) != (n+63)/64 {
		return fmt.Errorf("cpu: set token mask: %w: %d words for a vocabulary of %d (want %d)", fusion.ErrInvalid, len(allowed), n, (n+63)/64)
	}
	p.allowed = append(p.allowed[:0], allowed...)
	return nil
}

// maskLogits sets the logits of the tokens the mask rules out to -inf, in
// place (the row is the program's own buffer), and returns the row.
func (p *program) maskLogits(row []float32) []float32 {
	if p.allowed == nil {
		return row
	}
	inf := float32(math.Inf(-1))
	for i := range row {
		if p.allowed[i/64]&(1<<(i%64)) == 0 {
			row[i] = inf
		}
	}
	return row
}

// ones is a weight of n ones: the scale of a Unit norm.
func ones(n int) []float32 {
	w := make([]float32, n)
	for i := range w {
		w[i] = 1
	}
	return w
}
