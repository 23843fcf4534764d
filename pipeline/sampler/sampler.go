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
	p    []float32 // reused scratch
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
	p := s.p
	n := len(p)
	c := chunk(n)
	total := chunkedSum(p, -1)
	r := philox.Uniform(o.Seed, step) * total
	// The first id whose running sum passes r, each chunk's run starting
	// from the sum of the chunks before it.
	var base float32
	last := -1
	for t := 0; t < Chunks; t++ {
		lo, hi := min(t*c, n), min((t+1)*c, n)
		acc := base
		var part float32
		for i := lo; i < hi; i++ {
			acc += p[i]
			part += p[i]
			if p[i] > 0 {
				if acc > r {
					return i
				}
				last = i
			}
		}
		base += part
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
	for i, v := range s.p {
		if v > 0 {
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

// chunkedSum adds the values of p whose bits are at least minBits (all
// when minBits < 0) the device's way: in id order within each chunk, then
// chunk sums in chunk order.
func chunkedSum(p []float32, minBits int64) float32 {
	n := len(p)
	c := chunk(n)
	var total float32
	for t := 0; t < Chunks; t++ {
		var part float32
		for i := min(t*c, n); i < min((t+1)*c, n); i++ {
			if int64(math.Float32bits(p[i])) >= minBits {
				part += p[i]
			}
		}
		total += part
	}
	return total
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
	// 2. Top-k: the k-th largest scaled logit by a search over the bits of
	// its order key, one count per bit.
	var kMin uint32
	if o.TopK > 0 && o.TopK < valid {
		for bit := 31; bit >= 0; bit-- {
			cand := kMin | 1<<bit
			count := 0
			for _, y := range p {
				if y == y && orderKey(y) >= cand {
					count++
				}
			}
			if count >= o.TopK {
				kMin = cand
			}
		}
	}
	// 3. Softmax numerators of the kept tokens.
	for i, y := range p {
		if y == y && orderKey(y) >= kMin {
			p[i] = float32(math.Exp(float64(y - hi)))
		} else {
			p[i] = 0
		}
	}
	// 4. Top-p: the smallest probability whose tokens and the more likely
	// ones reach TopP of the total, by a search over its bits.
	if o.TopP > 0 && o.TopP < 1 {
		target := o.TopP * chunkedSum(p, -1)
		var pMin int64
		for bit := 30; bit >= 0; bit-- {
			cand := pMin | 1<<bit
			if chunkedSum(p, cand) >= target {
				pMin = cand
			}
		}
		for i, v := range p {
			if int64(math.Float32bits(v)) < pMin {
				p[i] = 0
			}
		}
	}
	return -1
}
