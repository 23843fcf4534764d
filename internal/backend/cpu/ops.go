package cpu

import (
	"fmt"
	"math"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/backend/cpu/internal/simd"
)

// One function per op kind, each the literal reading of its contract in
// fusion/ops.go. Activations are row-major: row t of a buffer with c
// columns is x[t*c : (t+1)*c]. n is the number of rows the op touches.

// embed: out[t] = scale * W[tokens[t]].
func embed(out []float32, cols int, tokens []int32, w *matrix, scale float32) error {
	for t, id := range tokens {
		if id < 0 || int(id) >= w.rows {
			return fmt.Errorf("%w: token %d at row %d outside the vocabulary of %d", errToken, id, t, w.rows)
		}
		o := out[t*cols : (t+1)*cols]
		w.row(int(id), o)
		if scale != 0 && scale != 1 {
			for i := range o {
				o[i] *= scale
			}
		}
	}
	return nil
}

// rmsNorm: out = x / sqrt(mean(x²) + eps) * w. The sum of squares is kept in
// float64 as llama.cpp does.
func rmsNorm(out, in []float32, cols, n int, w []float32, eps float32) {
	for t := range n {
		x, o := in[t*cols:(t+1)*cols], out[t*cols:(t+1)*cols]
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		scale := float32(1 / math.Sqrt(float64(float32(ss/float64(cols))+eps)))
		for i, v := range x {
			o[i] = v * scale * w[i]
		}
	}
}

// layerNorm: out = (x - mean) / sqrt(var + eps) * w + b (b may be nil).
func layerNorm(out, in []float32, cols, n int, w, b []float32, eps float32) {
	for t := range n {
		x, o := in[t*cols:(t+1)*cols], out[t*cols:(t+1)*cols]
		var sum float64
		for _, v := range x {
			sum += float64(v)
		}
		mean := float32(sum / float64(cols))
		var vs float64
		for _, v := range x {
			d := v - mean
			vs += float64(d) * float64(d)
		}
		scale := float32(1 / math.Sqrt(float64(float32(vs/float64(cols))+eps)))
		for i, v := range x {
			o[i] = (v - mean) * scale * w[i]
			if b != nil {
				o[i] += b[i]
			}
		}
	}
}

// ropeParams is the geometry of a Rope op.
type ropeParams struct {
	heads, headDim, dims int
	freq                 []float64 // angular frequency of each pair
	scale                float32   // cos and sin multiplier (1: none)
	halves               bool      // pairs (i, i+dims/2) rather than (2i, 2i+1)
}

func newRope(heads, headDim int, r fusion.RopeParams) ropeParams {
	rp := ropeParams{heads: heads, headDim: headDim, dims: r.Dims, scale: r.Scale, halves: r.Style == fusion.RopeHalves}
	if rp.scale == 0 {
		rp.scale = 1
	}
	rp.freq = make([]float64, r.Dims/2)
	for i := range rp.freq {
		rp.freq[i] = r.Freq(i)
	}
	return rp
}

// rope rotates, in place, the first dims values of every head of row t by
// position pos+t: pair i turns by (pos+t) * freq[i], its cos and sin
// multiplied by scale.
func rope(x []float32, cols, n, pos int, rp ropeParams) {
	half := rp.dims / 2
	for t := range n {
		p := float64(pos + t)
		for i := range half {
			sin, cos := math.Sincos(p * rp.freq[i])
			c, s := float32(cos)*rp.scale, float32(sin)*rp.scale
			for h := range rp.heads {
				head := x[t*cols+h*rp.headDim : t*cols+(h+1)*rp.headDim]
				a, b := 2*i, 2*i+1
				if rp.halves {
					a, b = i, i+half
				}
				x0, x1 := head[a], head[b]
				head[a] = x0*c - x1*s
				head[b] = x0*s + x1*c
			}
		}
	}
}

// storeKV writes rows t < n of k and v (kvCols = KVHeads*HeadDim values)
// into the layer's cache at positions pos+t, each head's values into its
// own run (layerCache's head-major layout; both slots of a ring layer),
// rounded to binary16 for an f16
// cache.
func storeKV(c *layerCache, k, v []float32, kvCols, n, pos int) {
	hd := c.hd
	for t := range n {
		for kh := range kvCols / hd {
			src := t*kvCols + kh*hd
			for _, dst := range [2]int{c.at(kh, pos+t), c.mirror(kh, pos+t)} {
				if dst < 0 {
					continue
				}
				switch {
				case c.kq != nil:
					c.storeBlocks(c.kq, c.kt, c.krot, dst, k[src:src+hd])
				case c.k16 != nil:
					storeF16(c.k16[dst:dst+hd], k[src:src+hd])
				default:
					copy(c.k[dst:dst+hd], k[src:src+hd])
				}
				switch {
				case c.vq != nil:
					c.storeBlocks(c.vq, c.vt, c.vrot, dst, v[src:src+hd])
				case c.v16 != nil:
					storeF16(c.v16[dst:dst+hd], v[src:src+hd])
				default:
					copy(c.v[dst:dst+hd], v[src:src+hd])
				}
			}
		}
	}
}

// storeBlocks quantizes one head's row x into the blocks of type t of q at
// value index dst, rotated first by H_rot when rot > 0.
func (c *layerCache) storeBlocks(q []byte, t fusion.KVType, rot, dst int, x []float32) {
	if rot > 0 {
		r := c.tmp[:len(x)]
		copy(r, x)
		hadamard(r, rot)
		x = r
	}
	bs := t.BlockBytes()
	quantizeBlocks(t, q[dst/qk*bs:(dst+len(x))/qk*bs], x)
}

// attnParams is the geometry of an Attention op.
type attnParams struct {
	heads, kvHeads, headDim int
	scale, cap              float32
	window                  int
	sinks                   []float32 // per query head sink logits (nil: none)
	nonCausal               bool      // every row sees the step's positions (fusion.AttentionOp.NonCausal)
	symmetric               bool      // fusion.AttentionOp.SymmetricWindow
}

// attention: for query row t (position pos+t) and head h, a softmax over the
// cached keys p <= pos+t (and pos+t-p < window when window > 0) of the
// scaled, optionally soft-capped scores, weighting the cached values. Query
// heads share kv head h / (heads/kvHeads). The jobs are split across the
// threads: (row, head) pairs, or for a prompt on an f32 cache (query
// tile, head) pairs, where a tile of attnTile consecutive query rows reads
// each cached key once for all its rows.
func (p *program) attention(a *attnTask) {
	ap := a.ap
	span := a.pos + a.n
	if a.rowPos != nil {
		span = 0
		for _, pos := range a.rowPos {
			span = max(span, pos+1)
		}
	}
	a.tiled = a.rowPos == nil && a.c.k != nil && a.c.vrot == 0 && a.n >= attnTile && !ap.nonCausal
	jobs := a.n * ap.heads
	if a.tiled {
		jobs = (a.n + attnTile - 1) / attnTile * ap.heads
	}
	// Grouped jobs where there are at least two of them (one KV head
	// decoding would leave a thread idle) or only one head.
	gjobs := (a.n + groupTile - 1) / groupTile * ap.kvHeads
	a.grouped = groupedAttention && a.rowPos == nil && a.c.vq != nil && !ap.nonCausal && ap.window == 0 && a.c.ring == 0 &&
		(gjobs >= 2 || ap.heads == 1)
	if a.grouped {
		jobs = gjobs
	}
	p.pool.run(jobs, a.n*ap.heads*span*ap.headDim*2, 1, a)
}

// attnTile is the number of prompt rows whose scores one pass over the
// keys computes (simd.DotF32x4: one key against four query rows).
const attnTile = 4

// attnTask is one Attention step.
type attnTask struct {
	p      *program
	out, q []float32
	n, pos int
	c      *layerCache
	ap     attnParams
	tiled  bool // jobs are (tile of attnTile rows, head)
	// grouped: jobs are (tile of groupTile rows, KV head), quantized
	// values dequantized once for all of them (kvquant_fast.go).
	grouped bool
	// A batched step: row t is at position rowPos[t] of the cache
	// rowSeq[t] (layer's); pos and c are then unused.
	layer  int
	rowPos []int
	rowSeq []*kvCache
}

func (a *attnTask) run(wk, lo, hi int) {
	ap, c := a.ap, a.c
	for job := lo; job < hi; job++ {
		if a.grouped {
			t0 := job / ap.kvHeads * groupTile
			a.groupRows(wk, t0, min(a.n, t0+groupTile), job%ap.kvHeads)
			continue
		}
		t, h := job/ap.heads, job%ap.heads
		if a.tiled {
			t *= attnTile
			if t+attnTile <= a.n {
				a.tile(wk, t, h)
				continue
			}
			for ; t < a.n; t++ { // the last, partial tile row by row
				a.row(wk, t, h, c, a.pos+t)
			}
			continue
		}
		qpos := a.pos + t
		if a.rowPos != nil {
			qpos, c = a.rowPos[t], &a.rowSeq[t].layers[a.layer]
		}
		a.row(wk, t, h, c, qpos)
	}
}

// first returns the first cached position a query at qpos attends to.
func (ap *attnParams) first(qpos int) int {
	if ap.window > 0 {
		return max(0, qpos-ap.window+1)
	}
	return 0
}

// span returns the first and last cached positions a query at qpos
// attends to: causally, those up to qpos (first); without the causal
// mask, every position of the step (end is its last), from first on, or
// within window/2 on either side when the window is symmetric.
func (ap *attnParams) span(qpos, end int) (first, last int) {
	if !ap.nonCausal {
		return ap.first(qpos), qpos
	}
	if !ap.symmetric {
		return ap.first(qpos), end
	}
	if ap.window > 0 {
		half := ap.window / 2
		return max(0, qpos-half), min(end, qpos+half)
	}
	return 0, end
}

// row is attention for query row t, head h, at position qpos of cache c.
func (a *attnTask) row(wk, t, h int, c *layerCache, qpos int) {
	ap := a.ap
	cols := ap.heads * ap.headDim
	hd := ap.headDim
	kh := h / (ap.heads / ap.kvHeads)
	first, last := ap.span(qpos, a.pos+a.n-1)
	qh := a.q[t*cols+h*ap.headDim : t*cols+(h+1)*ap.headDim]
	sc := &a.p.scratch[wk]
	s := sc.scores[:last+1-first]
	c.scores(sc, qh, kh, first, s)
	ap.softmax(s, h)
	o := a.out[t*cols+h*hd : t*cols+(h+1)*hd]
	c.weightedValues(o, s, c.at(kh, first), hd, sc)
	if c.vrot > 0 {
		// The values were stored rotated: the sum is too; H is its own
		// inverse.
		hadamard(o, c.vrot)
	}
}

// scores sets s[i] to the raw score of query row qh (one head) with the
// key of KV head kh at position first+i, from any cache type.
func (c *layerCache) scores(sc *scratch, qh []float32, kh, first int, s []float32) {
	hd := len(qh)
	if c.krot > 0 || c.kq != nil {
		sc.growQuery(hd)
	}
	if c.krot > 0 {
		// The keys were stored rotated (fusion.KVSpec.KRotation).
		r := sc.qrot[:hd]
		copy(r, qh)
		hadamard(r, c.krot)
		qh = r
	}
	i := 0
	switch {
	case c.kq != nil:
		// Quantized keys: dotted block by block with the query quantized
		// as llama.cpp's vec_dot_type of the key type.
		// The keys from first on are consecutive slots (a ring's mirror).
		qq := &sc.qq
		qq.quantize(qh, sumsQ8(c.kt))
		scoreRows(c.kt, c.kq[c.at(kh, first)/qk*c.kt.BlockBytes():], hd, qq, s)
		i = len(s)
	case c.k16 == nil:
		// Four keys per call: each query vector load serves four rows.
		d4 := &sc.gs
		for ; i+4 <= len(s); i += 4 {
			simd.DotF32x4(qh, c.k[c.at(kh, first+i):], hd, d4)
			for j, d := range d4 {
				s[i+j] = d
			}
		}
	}
	for ; i < len(s); i++ {
		s[i] = c.keyDot(qh, c.at(kh, first+i))
	}
}

// valueRun is the number of quantized value rows weightedValues
// dequantizes at a time.
const valueRun = 64

// growValues sizes the scratch of valueRun dequantized value rows of hd
// values and their weighted sum.
func (s *scratch) growValues(hd int) {
	if len(s.vsum) >= hd {
		return
	}
	s.vrows, s.vsum = make([]float32, valueRun*hd), make([]float32, hd)
}

// growQuery sizes the scratch of a query row of hd values rotated and
// quantized for a quantized cache (once per thread and head dim).
func (s *scratch) growQuery(hd int) {
	if len(s.qrot) >= hd {
		return
	}
	s.qrot = make([]float32, hd)
	s.qq = q8Query{q: make([]int8, hd), d: make([]float32, hd/qk+1), s: make([]float32, hd/qk+1)}
}

// tile is attention for the attnTile query rows t.. of a prompt, head h
// (f32 cache): each key is dotted with the tile's rows in one pass (the
// products are those row gives, so the scores are the same: DotF32x4's,
// or the f32 GEMM's, which has its bits), then each row's softmax and
// value sum.
func (a *attnTask) tile(wk, t, h int) {
	ap, c := a.ap, a.c
	cols := ap.heads * ap.headDim
	hd := ap.headDim
	kh := h / (ap.heads / ap.kvHeads)
	q0, qn := a.pos+t, a.pos+t+attnTile-1 // the tile's first and last positions
	lo := ap.first(q0)
	span := qn + 1 - lo
	sc := a.p.scratch[wk].scores[:attnTile*span]
	qs := a.q[t*cols+h*ap.headDim:]
	if hd%16 == 0 && simd.HasGemmF32() {
		// The f32 GEMM, keys as its rows and the tile's queries as its
		// tokens, gives DotF32x4's bits; keys in runs of consecutive
		// slots (at most ring of them in a ring layer).
		for i := 0; i < span; {
			n := span - i
			if c.ring > 0 {
				n = min(n, c.ring)
			}
			simd.GemmF32(c.k[c.at(kh, lo+i):], hd, n, qs, cols, attnTile, hd, sc[i:], span)
			i += n
		}
	} else {
		d4 := &a.p.scratch[wk].gs
		for i := range span {
			k := c.at(kh, lo+i)
			simd.DotF32x4(c.k[k:k+hd], qs, cols, d4)
			for j, d := range d4 {
				sc[j*span+i] = d
			}
		}
	}
	for j := range attnTile {
		qpos := q0 + j
		first := ap.first(qpos)
		s := sc[j*span+first-lo : j*span+qpos+1-lo]
		ap.softmax(s, h)
		c.weightedValues(a.out[(t+j)*cols+h*hd:(t+j)*cols+(h+1)*hd], s, c.at(kh, first), hd, &a.p.scratch[wk])
	}
}

// softmax turns the raw scores s of head h into the attention weights:
// scaled, soft-capped when cap > 0, then exponentiated against their
// maximum and normalized (the sum in float64, four partial sums of every
// fourth weight added at the end, so the additions do not wait on each
// other). With sinks, head h's sink logit joins the maximum and the
// denominator as it is (not scaled or capped, as llama.cpp adds it after
// the scale), so the weights sum to less than one.
func (ap *attnParams) softmax(s []float32, h int) {
	scale := ap.scale
	if c := ap.cap; c > 0 {
		for i, v := range s {
			s[i] = c * float32(math.Tanh(float64(v*scale/c)))
		}
	} else {
		for i := range s {
			s[i] *= scale
		}
	}
	best := float32(math.Inf(-1))
	for _, v := range s {
		if v > best || v != v {
			best = v
		}
	}
	var s0, s1, s2, s3 float64
	if ap.sinks != nil {
		sink := ap.sinks[h]
		best = max(best, sink)
		s0 = float64(float32(math.Exp(float64(sink - best))))
	}
	simd.ExpSub(s, s, best)
	i := 0
	for ; i+4 <= len(s); i += 4 {
		s0 += float64(s[i])
		s1 += float64(s[i+1])
		s2 += float64(s[i+2])
		s3 += float64(s[i+3])
	}
	for ; i < len(s); i++ {
		s0 += float64(s[i])
	}
	inv := float32(1 / ((s0 + s1) + (s2 + s3)))
	for i, e := range s {
		s[i] = e * inv
	}
}

// glu: out = act(a) * b, elementwise over n rows.
func glu(out, a, b []float32, m int, act func(float32) float32) {
	for i := range m {
		out[i] = act(a[i]) * b[i]
	}
}

// activate: out = act(in).
func activate(out, in []float32, m int, act func(float32) float32) {
	for i := range m {
		out[i] = act(in[i])
	}
}

// add: out = a + b.
func add(out, a, b []float32, m int) {
	for i := range m {
		out[i] = a[i] + b[i]
	}
}

// softCap: out = c * tanh(in / c).
func softCap(out, in []float32, m int, c float32) {
	for i := range m {
		out[i] = c * float32(math.Tanh(float64(in[i]/c)))
	}
}

// lastRow: out[0] = in[n-1].
func lastRow(out, in []float32, cols, n int) {
	copy(out[:cols], in[(n-1)*cols:n*cols])
}

// argmax is fusion.Argmax: the index of the largest value, the lowest on
// ties, never a NaN, 0 for a row of NaNs. It repeats internal/sampler.Greedy
// here because a backend must not depend on the pipeline above it.
func argmax(row []float32) int {
	best := -1
	for i, v := range row {
		if v == v && (best < 0 || v > row[best]) {
			best = i
		}
	}
	return max(best, 0)
}
