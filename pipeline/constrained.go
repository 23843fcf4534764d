package pipeline

import (
	"fmt"
	"math"

	"github.com/gpurun/gpurun/pipeline/constrain"
)

// Constrained generation (GenerateOptions.Grammar): before each draw the
// logits of the tokens that cannot continue the document (package
// constrain: the grammar's matcher walks each token's bytes; masks are
// cached per matcher state) are set to -Inf, so the sampler, at any
// temperature, top-k or top-p, picks among those that can; end tokens are
// allowed only where the document may end, and generation stops when it
// is complete. Where the token is picked on the device (or by the CPU
// backend's picking program), the mask goes to the program
// (gpu.Program.SetTokenMask) before each step and only the id comes back; the first
// token, picked from the prefill's logits, and the host-sampling paths
// mask the logits on the host.

// tokenVocabulary is each token's bytes as it continues a text (see
// constrain.Vocabulary), computed once per model.
func (m *Model) tokenVocabulary() [][]byte {
	m.vocabOnce.Do(func() {
		toks := make([][]byte, m.cfg.VocabSize)
		if m.tok == nil {
			m.vocab = toks
			return
		}
		// After an anchor token that yields text, a token's text is what it
		// adds to a document already started (SentencePiece's dummy
		// prefix space is kept, as in generation, whose decoder is primed
		// with the prompt).
		anchor := -1
		if ids := m.tok.Encode("a"); len(ids) > 0 {
			anchor = ids[len(ids)-1]
		}
		for id := range toks {
			d := m.tok.newDecoder()
			if anchor >= 0 {
				d.Add(anchor)
				d.Flush()
			}
			if s := d.Add(id) + d.Flush(); s != "" {
				toks[id] = []byte(s)
			}
		}
		m.vocab = toks
	})
	return m.vocab
}

// masker returns the cached masker of g with the given end tokens.
func (m *Model) masker(g *constrain.Grammar, ends []int) *constrain.Masker {
	m.maskMu.Lock()
	defer m.maskMu.Unlock()
	key := maskerKey{g: g, ends: fmt.Sprint(ends)}
	if k, ok := m.maskers[key]; ok {
		return k
	}
	if m.maskers == nil || len(m.maskers) >= 64 {
		m.maskers = map[maskerKey]*constrain.Masker{}
	}
	k := constrain.NewMasker(g, &constrain.Vocabulary{Tokens: m.tokenVocabulary(), Ends: ends})
	m.maskers[key] = k
	return k
}

type maskerKey struct {
	g    *constrain.Grammar
	ends string
}

// tokenFilter is the rule a generation's tokens follow: anyToken, or a
// grammar's (constraint). The steppers apply it where they pick (masked
// logits on the host, a token mask on a picking program); the generation
// loop tells it each token kept.
type tokenFilter interface {
	// maskLogits sets the logits of the tokens that cannot come next to
	// -Inf.
	maskLogits(logits []float32) error
	// allowed returns the mask of the tokens that can come next as
	// gpu.Program.SetTokenMask takes it; nil when every token can.
	allowed() ([]uint64, error)
	// accept takes id (not a stop token) as the next token and reports
	// whether the output is complete.
	accept(id int) (complete bool, err error)
}

// anyToken is the filter of an unconstrained generation.
type anyToken struct{}

func (anyToken) maskLogits([]float32) error { return nil }
func (anyToken) allowed() ([]uint64, error) { return nil, nil }
func (anyToken) accept(int) (bool, error)   { return false, nil }

// constraint is one generation's grammar state.
type constraint struct {
	masker *constrain.Masker
	match  *constrain.Matcher
	vocab  [][]byte
}

// allowed returns the mask of the tokens the document can take next, as
// gpu.Program.SetTokenMask takes it; it fails when none can.
func (c *constraint) allowed() ([]uint64, error) {
	k := c.masker.Mask(c.match)
	if k.Count() == 0 {
		return nil, fmt.Errorf("%w: no token of the vocabulary continues the constrained output", ErrOptions)
	}
	return k.Bits(), nil
}

// maskLogits sets the logits of the tokens the document cannot take next to
// -Inf; it fails when none can (a vocabulary lacking the bytes needed).
func (c *constraint) maskLogits(logits []float32) error {
	k := c.masker.Mask(c.match)
	if k.Count() == 0 {
		return fmt.Errorf("%w: no token of the vocabulary continues the constrained output", ErrOptions)
	}
	inf := float32(math.Inf(-1))
	for id := range logits {
		if !k.Allowed(id) {
			logits[id] = inf
		}
	}
	return nil
}

// accept advances the document by the bytes of id (an allowed token that
// is not an end token) and reports whether it is complete.
func (c *constraint) accept(id int) (bool, error) {
	if id < 0 || id >= len(c.vocab) || !c.match.FeedBytes(c.vocab[id]) {
		return false, fmt.Errorf("pipeline: constrained output: token %d does not continue the document", id)
	}
	return c.match.Done(), nil
}
