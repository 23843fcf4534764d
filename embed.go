package gpurun

import (
	"context"
	"fmt"
)

// Pooling is how an embedding model pools its hidden states into one
// vector, as its file declares it (GGUF <arch>.pooling_type): "mean",
// "cls" or "last"; "" for a generative model.
func (m *Model) Pooling() string { return m.pm.Pooling() }

// Embed returns the embedding of text from an embedding model (Pooling
// not ""): the text's tokens with the special tokens the model adds
// (BOS, EOS as llama.cpp adds them), the model's pooling of their
// final hidden states, L2-normalized when normalize (llama-embedding's
// and llama-server's default). It fails with ErrNotEmbedding on a
// generative model, ErrNoTokenizer without a tokenizer and
// ErrPromptTooLong past the cache.
func (m *Model) Embed(ctx context.Context, text string, normalize bool) ([]float32, error) {
	ids, err := m.pm.EmbedTokens(text)
	if err != nil {
		return nil, fmt.Errorf("gpurun: embed: %w", err)
	}
	return m.pm.Embed(ctx, ids, normalize)
}

// EmbedIDs is Embed of token ids, used exactly as given (no special
// tokens added).
func (m *Model) EmbedIDs(ctx context.Context, ids []int, normalize bool) ([]float32, error) {
	return m.pm.Embed(ctx, ids, normalize)
}
