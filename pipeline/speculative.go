package pipeline

import (
	"context"
	"fmt"
	"slices"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/philox"
	"github.com/gpurun/gpurun/internal/sampler"
)

// Speculative decoding (GenerateOptions.Speculation). Each target step
// runs the context's last token and up to K drafted tokens through one
// program of K+1 tokens that returns the logits of every row (the
// verifier, compiled per slot on first use), and keeps the drafts the
// target agrees with plus one token of its own:
//
//   - greedy: the longest prefix of drafts equal to the target's own picks,
//     then the target's pick after it, so the output is token for token
//     that of plain greedy decoding wherever the verifier's logits equal
//     the decode program's;
//   - sampling: the speculative sampling rule (Leviathan et al. 2023;
//     Chen et al. 2023): draft x drawn from the draft's distribution q is
//     kept with probability min(1, p(x)/q(x)), p the target's; the first
//     rejected one is replaced by a draw from max(0, p-q) renormalized, and
//     when all are kept the next token is drawn from the target's last
//     row. Every token so produced is distributed as the target's. Prompt
//     lookup proposes with certainty (q one-hot). The draws come from the
//     counter-based generator keyed by the seed and the position, so a
//     fixed seed gives the same output run to run.
//
// The drafts rejected are rolled back by forgetting them: the slot's
// record of its cache (slot.cached) is cut to the kept tokens, and the
// next step writes over the positions it drops (a ring cache's window
// is kept: the verifier runs at most the ring's extra positions,
// RingTokens, so the positions it overwrites are older than any step
// reads).

// Speculation configures speculative decoding: a draft model or prompt
// lookup proposes tokens that the target verifies several at a time.
type Speculation struct {
	// Draft is a model with the same vocabulary, smaller and faster than
	// the target, that proposes the tokens; each generation holds one of
	// its slots. The caller closes it after the target's generations.
	Draft *Model
	// Lookup, with no Draft, proposes by prompt lookup (n-gram drafting,
	// no second model): the tokens that followed the latest earlier
	// occurrence in the context of its last n tokens, for the largest n
	// from Lookup down to 1 that occurs.
	Lookup int
	// Tokens is K, the most tokens drafted per target step; 0 means
	// DefaultDraftTokens.
	Tokens int
}

// DefaultDraftTokens is Speculation.Tokens' default.
const DefaultDraftTokens = 4

// MaxDraftTokens and MaxLookup bound Speculation.Tokens and Lookup.
const (
	MaxDraftTokens = 32
	MaxLookup      = 16
)

// ErrSpeculation: speculative decoding options that cannot work (see
// Speculation); it wraps ErrOptions.
var ErrSpeculation = fmt.Errorf("%w: speculation", ErrOptions)

func (sp *Speculation) validate() error {
	switch {
	case sp.Draft == nil && sp.Lookup == 0:
		return fmt.Errorf("%w: neither a draft model nor lookup", ErrSpeculation)
	case sp.Draft != nil && sp.Lookup != 0:
		return fmt.Errorf("%w: a draft model and lookup together", ErrSpeculation)
	case sp.Lookup < 0 || sp.Lookup > MaxLookup:
		return fmt.Errorf("%w: lookup n-gram %d outside 1..%d", ErrSpeculation, sp.Lookup, MaxLookup)
	case sp.Tokens < 0 || sp.Tokens > MaxDraftTokens:
		return fmt.Errorf("%w: %d draft tokens outside 1..%d", ErrSpeculation, sp.Tokens, MaxDraftTokens)
	}
	return nil
}

// Keys of the speculative draws, mixed into the seed so that they differ
// from the target sampler's draw at the same position.
const (
	acceptKey = 0x9e3779b97f4a7c15
	draftKey  = 0xc2b2ae3d27d4eb4f
)

// speculator is one generation's speculative decoding state.
type speculator struct {
	m      *Model
	k      int
	greedy bool
	seed   uint64
	lookup int
	target *sampler.Sampler // the generation's own sampler
	ts     *sampler.Sampler // the target's distribution (sampling)
	// The draft model, its slot and the draft's distribution rule.
	draft   *Model
	dsl     *slot
	ds      *sampler.Sampler
	dlogits []float32
	dctx    []int
	drafts  []int
	q       [][]float64 // q[i]: the distribution draft i was drawn from (sampling with a draft model)
	rows    []float32
	p       []float64
	// verify runs the target's steps and rolls them back (verify.go).
	verify verifyStrategy
	// dpoints are the state checkpoints a hybrid draft model took along
	// its last drafts (propose).
	dpoints []*checkpoint
	// Counts for Metrics.
	drafted, accepted, steps int
}

// newSpeculator starts speculative decoding for a generation on m with
// opts (its Speculation set) and sampler target: it takes a slot of the
// draft model (nil, nil when the generation does not speculate: a
// grammar constrains it).
func (m *Model) newSpeculator(ctx context.Context, opts *GenerateOptions, target *sampler.Sampler, context []int) (*speculator, error) {
	sp := opts.Speculation
	if sp == nil || opts.Grammar != nil || hasMedia(context) {
		// (Drafts of a context with images: its image positions are no
		// tokens a draft model or a lookup could take.)
		return nil, nil
	}
	if m.recurrent() && m.states == nil || sp.Draft != nil && sp.Draft.recurrent() && sp.Draft.states == nil {
		// Verification runs the drafts into the cache and cuts back to
		// the accepted ones, and a recurrent state cannot be cut back:
		// it comes back from a state checkpoint (verify.go). A hybrid
		// target or draft that keeps none decodes plainly: the same
		// ids, as speculation is lossless.
		return nil, nil
	}
	k := sp.Tokens
	if k == 0 {
		k = DefaultDraftTokens
	}
	if m.ringTokens > 0 {
		// The verifier may overwrite no ring position a later step reads.
		k = min(k, m.ringTokens-1)
	}
	if k < 1 {
		return nil, nil
	}
	_, sampled := opts.sampling()
	s := &speculator{m: m, k: k, lookup: sp.Lookup, seed: opts.Seed, target: target,
		greedy: !sampled, verify: m.verifyStrategy(k + 1)}
	if !s.greedy {
		s.ts = sampler.New(sampler.Options{Temperature: opts.Temperature, TopK: opts.TopK, TopP: opts.TopP})
		s.p = make([]float64, m.cfg.VocabSize)
	}
	if d := sp.Draft; d != nil {
		if d == m {
			return nil, fmt.Errorf("%w: the draft model is the target itself (load it twice)", ErrSpeculation)
		}
		if d.cfg.VocabSize != m.cfg.VocabSize {
			return nil, fmt.Errorf("%w: draft vocabulary of %d tokens, target's %d", ErrSpeculation, d.cfg.VocabSize, m.cfg.VocabSize)
		}
		dsl, err := d.acquire(ctx, context)
		if err != nil {
			return nil, fmt.Errorf("pipeline: draft model: %w", err)
		}
		s.draft, s.dsl = d, dsl
		s.dlogits = make([]float32, d.cfg.VocabSize)
		if !s.greedy {
			s.ds = sampler.New(sampler.Options{Temperature: opts.Temperature, TopK: opts.TopK, TopP: opts.TopP})
		}
	}
	return s, nil
}

// speculative is the stepper of a speculative generation: each step
// drafts tokens and verifies them in one target step (spec), handing the
// tokens kept out one per call; the first token, and a step with nothing
// to draft, go to plain (hostPick or batchRound).
type speculative struct {
	spec    *speculator
	plain   stepper
	sl      *slot
	queue   []int // tokens kept and not handed out: the cache holds the tokens before each
	started bool  // the first token was handed out
}

func (s *speculative) next(ctx context.Context, history []int, left int) (int, error) {
	if len(s.queue) == 0 && s.started {
		ids, stepped, err := s.spec.step(ctx, s.sl, history, left)
		if err != nil {
			return -1, err
		}
		if stepped {
			s.queue = ids
		}
	}
	s.started = true
	if len(s.queue) == 0 {
		return s.plain.next(ctx, history, left)
	}
	id := s.queue[0]
	s.queue = s.queue[1:]
	return id, nil
}

// close reports the speculation's counts and gives the draft model's slot
// back.
func (s *speculative) close(mt *Metrics) {
	s.spec.report(mt)
	s.spec.close()
	s.plain.close(mt)
}

// close gives the draft model's slot back.
func (s *speculator) close() {
	if s.dsl != nil {
		s.dsl.forget(s.dpoints)
		s.dpoints = nil
		s.draft.release(s.dsl)
		s.dsl = nil
	}
}

// report adds the speculation's counts to mt.
func (s *speculator) report(mt *Metrics) {
	mt.DraftTokens, mt.AcceptedTokens, mt.TargetSteps = s.drafted, s.accepted, s.steps
}

// step drafts up to K tokens after history and verifies them in one
// target step on sl, returning the tokens that follow history: the drafts
// kept and the target's own next token, the cache holding every token
// before each (as multiStep's ids). limit is how many tokens the
// generation may still produce. ok is false (nothing ran on the target)
// when the cache does not hold history but its last token, or there is
// nothing to draft: the caller runs a plain decode step, counted here.
func (s *speculator) step(ctx context.Context, sl *slot, history []int, limit int) (ids []int, ok bool, err error) {
	m := s.m
	n := len(history)
	k := min(s.k, limit-1, m.maxCache-n)
	if n == 0 || k < 1 || len(sl.cached) != n-1 || !slices.Equal(sl.cached, history[:n-1]) {
		s.steps++
		return nil, false, nil
	}
	if err := s.propose(ctx, history, k); err != nil {
		return nil, false, err
	}
	drafts := s.drafts
	if len(drafts) == 0 {
		s.steps++
		return nil, false, nil
	}
	v := m.cfg.VocabSize
	if need := (len(drafts) + 1) * v; len(s.rows) < need {
		s.rows = make([]float32, need)
	}
	tokens := make([]int32, 0, len(drafts)+1)
	tokens = append(tokens, int32(history[n-1]))
	for _, d := range drafts {
		tokens = append(tokens, int32(d))
	}
	ran, err := s.verify.verify(ctx, m, sl, tokens, n-1, s.rows[:len(tokens)*v])
	if err != nil {
		// The cache may hold part of the step: trust none of it.
		sl.distrust(n - 1)
		return nil, true, fmt.Errorf("pipeline: verify %d drafted tokens: %w", len(drafts), err)
	}
	if !ran {
		s.steps++
		return nil, false, nil
	}
	s.steps++
	s.drafted += len(drafts)
	kept := 0
	next := -1
	for i, d := range drafts {
		row := s.rows[i*v : (i+1)*v]
		pos := uint32(n + i)
		if s.greedy {
			if t := s.target.SampleAt(row, pos); t != d {
				next = t
				break
			}
			kept++
			continue
		}
		var q []float64
		if s.q != nil {
			q = s.q[i]
		}
		p := s.dense(row)
		t, ok := acceptDraft(p, q, d, float64(philox.Uniform(s.seed^acceptKey, 2*pos)), float64(philox.Uniform(s.seed^acceptKey, 2*pos+1)))
		if !ok {
			next = t
			break
		}
		kept++
	}
	if next < 0 {
		// Every draft kept: the target's own token after the last one,
		// drawn as plain decoding draws it.
		next = s.target.SampleAt(s.rows[kept*v:(kept+1)*v], uint32(n+kept))
	}
	s.accepted += kept
	held, err := s.verify.keep(ctx, m, sl, tokens, n-1, kept+1)
	if err != nil {
		sl.distrust(n - 1)
		return nil, true, err
	}
	if held {
		sl.cached = append(append(sl.cached[:n-1], history[n-1]), drafts[:kept]...)
	}
	return append(slices.Clone(drafts[:kept]), next), true, nil
}

// dense is the target's distribution over the vocabulary from a row of
// logits under the generation's rule, in s.p.
func (s *speculator) dense(row []float32) []float64 {
	clear(s.p)
	ids, probs := s.ts.Probabilities(row)
	for j, id := range ids {
		s.p[id] = probs[j]
	}
	return s.p
}

// propose fills s.drafts with up to k tokens after history (and s.q with
// their distributions when a draft model samples).
func (s *speculator) propose(ctx context.Context, history []int, k int) error {
	s.drafts = s.drafts[:0]
	if s.draft == nil {
		s.drafts = lookupDrafts(s.drafts, history, s.lookup, k)
		return nil
	}
	d := s.draft
	k = min(k, d.maxCache-len(history)+1)
	s.dctx = append(s.dctx[:0], history...)
	s.q = s.q[:0]
	for i := range k {
		if _, err := d.feed(ctx, s.dsl, s.dctx, s.dlogits); err != nil {
			return fmt.Errorf("pipeline: draft model: %w", err)
		}
		if i == 0 {
			// The first feed resumed from the last drafts' checkpoints
			// (those of the tokens kept): they are done.
			s.dsl.forget(s.dpoints)
			s.dpoints = s.dpoints[:0]
		}
		if d.states != nil && i+1 < k {
			// A hybrid draft's states cannot be cut back to the drafts
			// the target keeps: a checkpoint after each, its feed
			// restores the one of the last kept (it runs one token a
			// step anyway, so no step runs twice).
			if ck := d.states.take(d, s.dsl.kv, len(s.dsl.cached)); ck != nil {
				s.dsl.points = append(s.dsl.points, ck)
				s.dpoints = append(s.dpoints, ck)
			}
		}
		pos := uint32(len(s.dctx))
		var t int
		if s.greedy {
			t = sampler.Greedy(s.dlogits)
		} else {
			q := make([]float64, len(s.dlogits))
			ids, probs := s.ds.Probabilities(s.dlogits)
			for j, id := range ids {
				q[id] = probs[j]
			}
			t = drawFrom(q, 1, float64(philox.Uniform(s.seed^draftKey, pos)))
			s.q = append(s.q, q)
		}
		s.drafts = append(s.drafts, t)
		s.dctx = append(s.dctx, t)
	}
	return nil
}

// lookupDrafts appends to dst up to k tokens that followed the latest
// earlier occurrence in ctx of ctx's last n tokens, for the largest n
// from maxN down to 1 that occurs. Where fewer than k follow it (a
// repetition close to the end), the lookup goes on from the context with
// the drafts so far appended, so a run such as "a b a b" proposes "a b a
// b ..." rather than one token.
func lookupDrafts(dst, ctx []int, maxN, k int) []int {
	start := len(dst)
	for len(dst)-start < k {
		got := lookupOnce(ctx, dst[start:], maxN, k-(len(dst)-start))
		if len(got) == 0 {
			break
		}
		dst = append(dst, got...)
	}
	return dst
}

// lookupOnce is one lookup over ctx followed by ext: the up to k tokens
// after the latest earlier occurrence of the longest matching n-gram.
func lookupOnce(ctx, ext []int, maxN, k int) []int {
	l := len(ctx) + len(ext)
	at := func(i int) int {
		if i < len(ctx) {
			return ctx[i]
		}
		return ext[i-len(ctx)]
	}
	for n := min(maxN, l-1); n >= 1; n-- {
	search:
		for j := l - n - 1; j >= 0; j-- {
			for i := range n {
				if at(j+i) != at(l-n+i) {
					continue search
				}
			}
			end := min(j+n+k, l)
			out := make([]int, 0, end-j-n)
			for i := j + n; i < end; i++ {
				out = append(out, at(i))
			}
			return out
		}
	}
	return nil
}

// acceptDraft applies the speculative sampling rule to draft d drawn from
// q (nil: d was proposed with certainty) where the target's distribution
// is p: d is kept when u < p(d)/q(d); otherwise the token returned is
// drawn with v from max(0, p-q) renormalized (from p when that is
// empty, p = q), and ok is false. u and v are uniform in [0, 1).
func acceptDraft(p, q []float64, d int, u, v float64) (tok int, ok bool) {
	qd := 1.0
	if q != nil {
		qd = q[d]
	}
	if qd > 0 && u*qd < p[d] {
		return d, true
	}
	var sum float64
	for x := range p {
		sum += residual(p, q, d, x)
	}
	if !(sum > 0) {
		return drawFrom(p, 1, v), false
	}
	r := v * sum
	last := -1
	for x := range p {
		w := residual(p, q, d, x)
		if w <= 0 {
			continue
		}
		last = x
		if r < w {
			return x, false
		}
		r -= w
	}
	return last, false
}

// residual is max(0, p(x) - q(x)), q one-hot at d when nil.
func residual(p, q []float64, d, x int) float64 {
	qx := 0.0
	switch {
	case q != nil:
		qx = q[x]
	case x == d:
		qx = 1
	}
	return max(0, p[x]-qx)
}

// drawFrom draws an index from the weights w (summing to total) with the
// uniform number u: the first whose running sum passes u*total.
func drawFrom(w []float64, total, u float64) int {
	r := u * total
	last := 0
	for x, v := range w {
		if v <= 0 {
			continue
		}
		last = x
		if r < v {
			return x
		}
		r -= v
	}
	return last
}

// verifier returns sl's program of tokens tokens with the logits of every
// row, compiled on first use.
func (m *Model) verifier(sl *slot, tokens int) (gpu.Program, error) {
	if p := sl.verify[tokens]; p != nil {
		return p, nil
	}
	if tokens > m.maxCache {
		return nil, fmt.Errorf("%w: %d tokens per step for a cache of %d", ErrSpeculation, tokens, m.maxCache)
	}
	p, err := m.compileWith(sl, arch.BuildOptions{Tokens: tokens, AllLogits: true})
	if err != nil {
		return nil, err
	}
	if sl.verify == nil {
		sl.verify = map[int]gpu.Program{}
	}
	sl.verify[tokens] = p
	return p, nil
}
