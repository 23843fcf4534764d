// Package sampler picks the next token from a row of logits: greedy
// (temperature 0), or a draw from the temperature-scaled softmax restricted
// to the top-k tokens and then to the smallest top-p nucleus, with a seeded
// PCG generator so that the same seed gives the same tokens.
package sampler

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
)

// Options selects the sampling rule.
type Options struct {
	Temperature float32 // 0 (or below): greedy
	TopK        int     // keep the k most likely tokens; 0: all
	// TopP keeps the smallest set of most likely tokens whose probability,
	// renormalized after TopK, reaches p; 0 or >= 1: all.
	TopP float32
	Seed uint64
}

// Sampler draws tokens. It is not safe for concurrent use.
type Sampler struct {
	opts Options
	rng  *rand.Rand
	cand []candidate // reused scratch
}

type candidate struct {
	id int
	p  float64
}

// New returns a sampler whose random stream depends only on opts.Seed.
func New(opts Options) *Sampler {
	return &Sampler{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15))}
}

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

// Sample picks a token id from logits (-1 for an empty row).
func (s *Sampler) Sample(logits []float32) int {
	o := s.opts
	if !(o.Temperature > 0) || o.TopK == 1 || len(logits) == 0 {
		return Greedy(logits)
	}
	probs := s.distribution(logits)
	if len(probs) == 0 {
		return Greedy(logits)
	}
	u := s.rng.Float64()
	var sum float64
	for _, c := range probs {
		sum += c.p
	}
	u *= sum
	var acc float64
	for _, c := range probs {
		acc += c.p
		if u < acc {
			return c.id
		}
	}
	return probs[len(probs)-1].id
}

// Probabilities returns the distribution Sample draws from, as (id,
// probability) pairs sorted by decreasing probability (lower id first on
// ties), normalized to sum to 1. It is empty for greedy options.
func (s *Sampler) Probabilities(logits []float32) (ids []int, probs []float64) {
	if !(s.opts.Temperature > 0) {
		return nil, nil
	}
	d := s.distribution(logits)
	var sum float64
	for _, c := range d {
		sum += c.p
	}
	for _, c := range d {
		ids = append(ids, c.id)
		probs = append(probs, c.p/sum)
	}
	return ids, probs
}

// distribution is the softmax of logits/T, sorted, cut to top-k and top-p.
// The probabilities are not renormalized after the cuts (Sample scales its
// draw by their sum instead).
func (s *Sampler) distribution(logits []float32) []candidate {
	o := s.opts
	invT := 1 / float64(o.Temperature)
	hi := math.Inf(-1)
	for _, v := range logits {
		if v == v {
			hi = max(hi, float64(v))
		}
	}
	if math.IsInf(hi, 0) {
		return nil
	}
	c := s.cand[:0]
	var sum float64
	for i, v := range logits {
		if v != v {
			continue
		}
		p := math.Exp((float64(v) - hi) * invT)
		c = append(c, candidate{id: i, p: p})
		sum += p
	}
	s.cand = c
	slices.SortFunc(c, func(a, b candidate) int {
		if a.p != b.p {
			return cmp.Compare(b.p, a.p)
		}
		return cmp.Compare(a.id, b.id)
	})
	if o.TopK > 0 && o.TopK < len(c) {
		c = c[:o.TopK]
	}
	if o.TopP > 0 && o.TopP < 1 {
		var kept float64
		for _, x := range c {
			kept += x.p
		}
		target := float64(o.TopP) * kept
		var acc float64
		for i, x := range c {
			acc += x.p
			if acc >= target {
				c = c[:i+1]
				break
			}
		}
	}
	return c
}
