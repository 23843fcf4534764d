package gpurun_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestEmbedAPI: Open of an embedding GGUF embeds as llama.cpp does (the
// golden's longest input, normalized), Embed of text adds the special
// tokens EmbedIDs takes as given, and a generative model refuses.
func TestEmbedAPI(t *testing.T) {
	ctx := context.Background()
	g := testmodels.Embed(t, "gemma-embedding")
	m, err := gpurun.Open(ctx, testmodels.Path(t, "embed", "gemma-embedding.gguf"), gpurun.WithBackend("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Pooling() != "mean" {
		t.Fatalf("pooling %q", m.Pooling())
	}
	seq := g.Sequences[len(g.Sequences)-1]
	got, err := m.EmbedIDs(ctx, seq.FedIDs, true)
	if err != nil {
		t.Fatal(err)
	}
	if d := testmodels.MaxAbsDiff(got, seq.Normalized); !(d <= 2e-5) {
		t.Errorf("normalized embedding off by %.3g", d)
	}
	ids, err := m.Encode("once upon a time")
	if err != nil {
		t.Fatal(err)
	}
	text, err := m.Embed(ctx, "once upon a time", false)
	if err != nil {
		t.Fatal(err)
	}
	byIDs, err := m.EmbedIDs(ctx, append(append([]int{1}, ids...), 2), false)
	if err != nil {
		t.Fatal(err)
	}
	if d := testmodels.MaxAbsDiff(text, f64(byIDs)); d != 0 {
		t.Errorf("Embed(text) differs from EmbedIDs(BOS + ids + EOS) by %g", d)
	}
	gen, err := gpurun.Open(ctx, testmodels.Path(t, "arch", "llama.gguf"), gpurun.WithBackend("cpu"))
	if err != nil {
		t.Fatal(err)
	}
	defer gen.Close()
	if _, err := gen.Embed(ctx, "hi", true); !errors.Is(err, gpurun.ErrNotEmbedding) {
		t.Errorf("a generative model: %v, want ErrNotEmbedding", err)
	}
}

func f64(xs []float32) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = float64(x)
	}
	return out
}
