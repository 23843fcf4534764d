package pipeline

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/tensors/model"
)

// ErrNotEmbedding: Embed on a model that declares no pooling (a
// generative model: its GGUF has no <arch>.pooling_type).
var ErrNotEmbedding = errors.New("pipeline: not an embedding model (no pooling type)")

// Pooling is how the model pools its hidden states into one embedding
// (model.PoolMean, PoolCLS, PoolLast), or model.PoolNone for a generative
// model.
func (m *Model) Pooling() string { return m.cfg.Pooling }

// EmbeddingDim is the length of the model's embeddings.
func (m *Model) EmbeddingDim() int { return m.cfg.Dim }

// EmbedTokens returns the ids an embedding of text is computed over: the
// text's tokens between BOS and EOS as the model's config adds them
// (llama.cpp's add_bos_token and add_eos_token, as llama_tokenize adds
// special tokens).
func (m *Model) EmbedTokens(text string) ([]int, error) {
	ids, err := m.Encode(text)
	if err != nil {
		return nil, err
	}
	return m.WithSpecial(ids), nil
}

// WithSpecial returns ids between BOS and EOS as the model's config adds
// them to an embedding input (a new slice).
func (m *Model) WithSpecial(ids []int) []int {
	c := &m.cfg
	var out []int
	if c.AddBOS && c.BOS >= 0 {
		out = append(out, c.BOS)
	}
	out = append(out, ids...)
	if c.AddEOS && c.EOS >= 0 {
		out = append(out, c.EOS)
	}
	return out
}

// Embed runs ids (used exactly as given: EmbedTokens adds the special
// tokens) through an embedding model in one step and returns their
// pooled embedding (Pooling) of EmbeddingDim values, divided by its L2
// norm when normalize (what llama-embedding and llama-server return by
// default). Attention is causal or not as the model declares
// (model.Config.NonCausal). The slot it runs in keeps no context.
func (m *Model) Embed(ctx context.Context, ids []int, normalize bool) ([]float32, error) {
	c := &m.cfg
	if c.Pooling == model.PoolNone {
		return nil, ErrNotEmbedding
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: no tokens to embed", ErrPrompt)
	}
	if len(ids) > m.maxCache {
		return nil, fmt.Errorf("%w: %d tokens to embed, cache holds %d", ErrPromptTooLong, len(ids), m.maxCache)
	}
	tokens := make([]int32, len(ids))
	for i, id := range ids {
		if id < 0 || id >= c.VocabSize {
			return nil, fmt.Errorf("%w: token %d outside the vocabulary of %d", ErrPrompt, id, c.VocabSize)
		}
		tokens[i] = int32(id)
	}
	sl, err := m.acquire(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer m.release(sl)
	size := embedSize(len(ids), m.maxCache)
	prog, err := m.embedProgram(sl, size)
	if err != nil {
		return nil, err
	}
	// The cache will hold this input's keys, not a conversation.
	sl.cached = nil
	rows := make([]float32, size*c.Dim)
	if err := m.run(ctx, prog, tokens, 0, rows); err != nil {
		return nil, err
	}
	return pool(rows[:len(ids)*c.Dim], c.Dim, c.Pooling, normalize), nil
}

// embedSize is the tokens per step of the program that embeds n tokens:
// the power of two from 8 up that holds them, at most the cache.
func embedSize(n, maxCache int) int {
	size := 8
	for size < n {
		size *= 2
	}
	return min(size, maxCache)
}

// embedProgram returns sl's embedding program of size tokens per step,
// compiled on first use.
func (m *Model) embedProgram(sl *slot, size int) (gpu.Program, error) {
	if p := sl.embed[size]; p != nil {
		return p, nil
	}
	p, err := m.compileWith(sl, arch.BuildOptions{Tokens: size, Embed: true})
	if err != nil {
		return nil, err
	}
	if sl.embed == nil {
		sl.embed = map[int]gpu.Program{}
	}
	sl.embed[size] = p
	return p, nil
}

// pool pools the rows (dim values each) as pooling says, over every row
// (special tokens included, as llama.cpp pools a single sequence), and
// L2-normalizes the result when normalize; sums in float64.
func pool(rows []float32, dim int, pooling string, normalize bool) []float32 {
	n := len(rows) / dim
	out := make([]float32, dim)
	switch pooling {
	case model.PoolCLS:
		copy(out, rows[:dim])
	case model.PoolLast:
		copy(out, rows[(n-1)*dim:])
	default: // model.PoolMean
		for j := range dim {
			var sum float64
			for i := range n {
				sum += float64(rows[i*dim+j])
			}
			out[j] = float32(sum / float64(n))
		}
	}
	if normalize {
		var ss float64
		for _, v := range out {
			ss += float64(v) * float64(v)
		}
		if norm := math.Sqrt(ss); norm > 0 {
			for j, v := range out {
				out[j] = float32(float64(v) / norm)
			}
		}
	}
	return out
}
