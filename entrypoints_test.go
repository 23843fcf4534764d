package gpurun_test

import (
	"context"
	"iter"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestZeroOptionsEveryEntryPoint: the zero GenerateOptions is greedy
// decoding until a stop token or a full cache through every Go entry point
// (a Session of this package, a session of the pipeline layer below it, a
// Variants model with its adapter), each equal to llama.cpp's greedy ids
// for the same file and adapter. The command line's defaults and the
// server's are listed by cmd/gpurun's TestSamplingDefaults and
// pipeline/serve's TestOmittedSamplingFields.
func TestZeroOptionsEveryEntryPoint(t *testing.T) {
	base := testmodels.Arch(t, "llama")
	var adapted testmodels.ArchGolden
	dir := filepath.Join(testmodels.Root(t), "testdata", "lora")
	testmodels.DecodeJSON(t, filepath.Join(dir, "llama_r4.golden.json"), &adapted)
	ctx := context.Background()
	maxCache := len(base.PromptIDs) + len(base.GreedyIDs)
	m, err := gpurun.Open(ctx, testmodels.Path(t, "arch", "llama.gguf"), gpurun.WithBackend("cpu"), gpurun.WithActivations("f32"),
		gpurun.WithMaxCache(maxCache), gpurun.WithAdapter("r4", filepath.Join(dir, "llama_r4.gguf"), 1))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	variant := m.Variants()["r4"]
	if variant == nil {
		t.Fatalf("Variants() = %v, want r4", m.Variants())
	}
	// generator generates with zero options on a new session of one entry
	// point and returns the ids and the stop reason.
	type generator func(gpurun.Prompt) ([]int, gpurun.StopReason, error)
	collect := func(seq iter.Seq2[gpurun.Token, error], metrics func() gpurun.Metrics) ([]int, gpurun.StopReason, error) {
		var ids []int
		for tok, err := range seq {
			if err != nil {
				return nil, "", err
			}
			ids = append(ids, tok.ID)
		}
		return ids, metrics().StopReason, nil
	}
	root := func(m *gpurun.Model) generator {
		return func(p gpurun.Prompt) ([]int, gpurun.StopReason, error) {
			s := m.NewSession()
			return collect(s.Generate(ctx, p, gpurun.GenerateOptions{}), s.Metrics)
		}
	}
	lower := func(p gpurun.Prompt) ([]int, gpurun.StopReason, error) {
		s := m.Pipeline().NewSession()
		return collect(s.Generate(ctx, p, gpurun.GenerateOptions{}), s.Metrics)
	}
	for _, c := range []struct {
		name string
		gen  generator
		want testmodels.ArchGolden
	}{
		{"gpurun.Session", root(m), base},
		{"pipeline.Session", lower, base},
		{"Variants", root(variant), adapted},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, stop, err := c.gen(gpurun.IDs(c.want.PromptIDs...))
			if err != nil {
				t.Fatal(err)
			}
			if stop != gpurun.StopCacheFull || len(got) < len(c.want.GreedyIDs) {
				t.Fatalf("%d tokens, stop %s; want greedy decoding until the cache of %d is full (%d tokens or more)", len(got), stop, maxCache, len(c.want.GreedyIDs))
			}
			if got = got[:len(c.want.GreedyIDs)]; !slices.Equal(got, c.want.GreedyIDs) {
				t.Errorf("ids\n got %v\nwant %v (llama.cpp's greedy ids)", got, c.want.GreedyIDs)
			}
		})
	}
}
