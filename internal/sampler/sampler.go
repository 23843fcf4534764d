// Package sampler picks the next token from a row of logits: greedy
// (temperature 0), or a draw from the temperature-scaled softmax restricted
// to the top-k tokens and then to the smallest top-p nucleus.
//
// The draw is the device sampler's algorithm (shaders/wgsl/sample.wgsl,
// fusion.Sample) step for step: the same float32 operations in the same
// order, sums split into the same Chunks chunks, and one uniform number per
// step from the counter-based Philox4x32-10 generator keyed by the seed and
// counted by the step (internal/philox). So the host and both GPU backends
// pick the same token from the same logits, seed and step, and the draw
// depends on nothing else: no generator state carries from step to step.
package sampler

import (
	"cmp"
	"math"
	"slices"

	"github.com/gpurun/gpurun/internal/philox"
)

// Chunks is the number of chunks every sum over a row is split into (the
// device kernel's workgroup size, one chunk per invocation): chunk t holds
// ids [t*c, (t+1)*c) with c = ceil(n/Chunks), summed in id order, then the
// chunk sums are added in chunk order.
const Chunks = 256

// Options selects the sampling rule.
type Options struct {
	Temperature float32 // 0 (or below): greedy
	TopK        int     // keep the k most likely tokens (and ties with the k-th); 0: all
	// TopP keeps the smallest set of most likely tokens whose probability,
	// renormalized after TopK, reaches p (and ties with its least likely
	// token); 0 or >= 1: all.
	TopP float32
	Seed uint64
}

// Sampler draws tokens. It is not safe for concurrent use.
type Sampler struct {
	opts Options
	step uint32
	p    []float32 // reused scratch: the probabilities, 0 where cut
	ids  []int     // the ids kept by top-k, ascending
}

// New returns a sampler whose draws depend only on opts.Seed and the step.
func New(opts Options) *Sampler { return &Sampler{opts: opts} }

// Greedy returns the index of the largest logit; the lowest index wins ties
// and NaN never wins. It returns -1 for an empty row.
func Greedy(logits []float32) int {
	best := -1
	for i, v := range logits {
		if v != v {
			continue
		}
		if best < 0 || v > logits[best] {
			best = i
		}
	}
	if best < 0 && len(logits) > 0 {
		return 0
	}
	return best
}

// Sample picks a token id from logits (-1 for an empty row) at the
// sampler's own step counter, which starts at 0 and counts calls.
func (s *Sampler) Sample(logits []float32) int {
	id := s.SampleAt(logits, s.step)
	s.step++
	return id
}

// SampleAt picks a token id from logits (-1 for an empty row) with the draw
// of step (the generation uses the position the token will take).
func (s *Sampler) SampleAt(logits []float32, step uint32) int {
	o := s.opts
	if !(o.Temperature > 0) || o.TopK == 1 || len(logits) == 0 {
		return Greedy(logits)
	}
	id := s.distribution(logits)
	if id >= 0 {
		return id
	}
	p, c := s.p, chunk(len(s.p))
	total := s.chunkedSum(-1)
	r := philox.Uniform(o.Seed, step) * total
	// The first id whose running sum passes r, each chunk's run starting
	// from the sum of the chunks before it. Only kept ids are visited: the
	// others add 0.
	var base, acc, part float32
	chunkAt := -1
	last := -1
	for _, i := range s.ids {
		if t := i / c; t != chunkAt {
			base += part
			part, acc, chunkAt = 0, base, t
		}
		acc += p[i]
		part += p[i]
		if p[i] > 0 {
			if acc > r {
				return i
			}
			last = i
		}
	}
	return last
}

// Probabilities returns the distribution Sample draws from, as (id,
// probability) pairs sorted by decreasing probability (lower id first on
// ties), normalized to sum to 1. It is empty for greedy options.
func (s *Sampler) Probabilities(logits []float32) (ids []int, probs []float64) {
	if !(s.opts.Temperature > 0) || len(logits) == 0 {
		return nil, nil
	}
	if id := s.distribution(logits); id >= 0 {
		return []int{id}, []float64{1}
	}
	var sum float64
	for _, i := range s.ids {
		if v := s.p[i]; v > 0 {
			ids = append(ids, i)
			sum += float64(v)
		}
	}
	slices.SortStableFunc(ids, func(a, b int) int { return cmp.Compare(s.p[b], s.p[a]) })
	for _, id := range ids {
		probs = append(probs, float64(s.p[id])/sum)
	}
	return ids, probs
}

// InvTemperature is the factor the logits are multiplied by: 1/t in
// float32, computed on the host for every backend.
func InvTemperature(t float32) float32 { return 1 / t }

func chunk(n int) int { return (n + Chunks - 1) / Chunks }

// chunkedSum adds the probabilities whose bits are at least minBits (all
// when minBits < 0) the device's way: in id order within each chunk, then
// chunk sums in chunk order. It visits only the ids top-k kept, as the
// others are 0 and add nothing.
func (s *Sampler) chunkedSum(minBits int64) float32 {
	c := chunk(len(s.p))
	var total, part float32
	chunkAt := -1
	for _, i := range s.ids {
		if t := i / c; t != chunkAt {
			total += part
			part, chunkAt = 0, t
		}
		if v := s.p[i]; int64(math.Float32bits(v)) >= minBits {
			part += v
		}
	}
	return total + part
}

// kthKey returns the k-th largest order key of the valid (non-NaN) values
// of y, 1 <= k <= their count: a radix select, 8 bits at a time (the
// device kernel's passes; the same key as the largest K with
// count(key >= K) >= k).
func kthKey(y []float32, k int) uint32 {
	var prefix uint32
	rem := uint32(k)
	for d := 0; d < 4; d++ {
		shift := 24 - 8*d
		var mask uint32
		if d > 0 {
			mask = ^uint32(0) << (shift + 8)
		}
		var hist [256]uint32
		for _, v := range y {
			if v == v {
				if key := orderKey(v); key&mask == prefix&mask {
					hist[key>>shift&255]++
				}
			}
		}
		var acc uint32
		for b := 255; b >= 0; b-- {
			if acc+hist[b] >= rem {
				prefix |= uint32(b) << shift
				rem -= acc
				break
			}
			acc += hist[b]
		}
	}
	return prefix
}

// orderKey maps float32 bits to a uint32 whose order is the numbers' order.
func orderKey(v float32) uint32 {
	b := math.Float32bits(v)
	if b&0x80000000 != 0 {
		return ^b
	}
	return b | 0x80000000
}

// distribution leaves in s.p the unnormalized probabilities Sample draws
// from (0 for cut tokens) and returns -1, or returns the id to pick without
// a draw: the greedy id (0 for a row of NaNs) when the largest scaled
// logit is not finite or TopK is 1.
func (s *Sampler) distribution(logits []float32) int {
	o := s.opts
	n := len(logits)
	if cap(s.p) < n {
		s.p = make([]float32, n)
	}
	p := s.p[:n]
	s.p = p
	// 1. Scale by the temperature (one correctly rounded multiply on
	// every backend); NaNs are never kept.
	invT := InvTemperature(o.Temperature)
	arg := Greedy(logits)
	valid := 0
	for i, v := range logits {
		y := v * invT
		p[i] = y
		if y == y {
			valid++
		}
	}
	// The largest scaled logit is the largest logit scaled (rounding is
	// monotonic); without a finite one the greedy id wins.
	hi := logits[arg] * invT
	if !(math.Abs(float64(hi)) <= math.MaxFloat32) || o.TopK == 1 {
		return arg
	}
	// 2. Top-k: the k-th largest scaled logit's order key.
	var kMin uint32
	if o.TopK > 0 && o.TopK < valid {
		kMin = kthKey(p, o.TopK)
	}
	// 3. Softmax numerators of the kept tokens.
	ids := s.ids[:0]
	for i, y := range p {
		if y == y && orderKey(y) >= kMin {
			p[i] = float32(math.Exp(float64(y - hi)))
			ids = append(ids, i)
		} else {
			p[i] = 0
		}
	}
	s.ids = ids
	// 4. Top-p: the smallest probability whose tokens and the more likely
	// ones reach TopP of the total, by a search over its bits.
	if o.TopP > 0 && o.TopP < 1 {
		target := o.TopP * s.chunkedSum(-1)
		var pMin int64
		for bit := 30; bit >= 0; bit-- {
			cand := pMin | 1<<bit
			if s.chunkedSum(cand) >= target {
				pMin = cand
			}
		}
		for _, i := range ids {
			if int64(math.Float32bits(p[i])) < pMin {
				p[i] = 0
			}
		}
	}
	return -1
}
