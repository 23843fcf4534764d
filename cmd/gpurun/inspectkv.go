package main

import (
	"fmt"
	"io"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors/model"
)

// kvSummary is inspect's KV cache memory: per position and at a context
// length, for the float caches and llama.cpp's quantized cache types
// (run --cache-type-k/-v).
type kvSummary struct {
	Positions int       `json:"positions"` // the context the totals are for
	Types     []kvBytes `json:"types"`
	// BudgetBytes is the memory budget (inspect --memory-budget) the
	// types' largest contexts are for, WeightBytes the weights counted
	// in it.
	BudgetBytes int64 `json:"budget_bytes,omitempty"`
	WeightBytes int64 `json:"weight_bytes,omitempty"`
	// ModelContext is the model's trained context length (0: unknown):
	// positions past it get rotary angles it never saw.
	ModelContext int `json:"model_context,omitempty"`
}

type kvBytes struct {
	Type        string `json:"type"` // keys and values alike: f32, f16, q8_0, ...
	PerPosition int64  `json:"bytes_per_position"`
	Total       int64  `json:"bytes"`
	// BudgetKVPositions is the longest cache whose keys and values alone
	// fit the budget; BudgetPositions the longest with the weights and
	// the activations as run, chat and serve estimate them
	// (gpurun.LargestContext: what serve --memory-limit accepts), 0 when
	// the weights alone do not fit.
	BudgetKVPositions int `json:"budget_kv_positions,omitempty"`
	BudgetPositions   int `json:"budget_positions,omitempty"`
}

// kvInspectTypes are the cache types inspect lists.
var kvInspectTypes = []string{"f32", "f16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl"}

// summarizeKV sizes the caches of cfg at positions (0: the model's
// context length, else pipeline.DefaultMaxCache); nil for a model without
// attention caches.
func summarizeKV(cfg *model.Config, positions int) *kvSummary {
	if cfg == nil || cfg.KVHeads <= 0 || cfg.HeadDim <= 0 {
		return nil
	}
	if positions <= 0 {
		positions = cfg.MaxSeqLen
	}
	if positions <= 0 {
		positions = pipeline.DefaultMaxCache
	}
	s := &kvSummary{Positions: positions}
	for _, name := range kvInspectTypes {
		t, f16, err := fusion.ParseKVType(name)
		if err != nil {
			continue
		}
		if t.Quantized() && cfg.HeadDim%fusion.KVBlock != 0 {
			continue // llama.cpp's blocks need head dims of multiples of 32
		}
		per := pipeline.KVBytesPerPosition(cfg, f16, t, t)
		s.Types = append(s.Types, kvBytes{Type: name, PerPosition: per, Total: per * int64(positions)})
	}
	return s
}

// fitBudget sets each type's largest contexts in budget bytes with
// weights bytes of weights (see kvBytes).
func (s *kvSummary) fitBudget(cfg *model.Config, weights, budget int64) error {
	s.BudgetBytes, s.WeightBytes, s.ModelContext = budget, weights, cfg.MaxSeqLen
	for i := range s.Types {
		t := &s.Types[i]
		t.BudgetKVPositions = int(min(budget/t.PerPosition, pipeline.MaxCacheLimit))
		n, err := gpurun.LargestContext(cfg, weights, budget, t.Type, t.Type)
		if err != nil {
			return err
		}
		t.BudgetPositions = n
	}
	return nil
}

func (s *kvSummary) writeText(w io.Writer) {
	fmt.Fprintf(w, "\nKV cache at %d positions (keys and values of one type; run --cache-type-k/--cache-type-v):\n", s.Positions)
	for _, t := range s.Types {
		fmt.Fprintf(w, "  %-7s %9.1f KiB per position  %10.1f MiB\n", t.Type, float64(t.PerPosition)/1024, float64(t.Total)/(1<<20))
	}
	if s.BudgetBytes <= 0 {
		return
	}
	fmt.Fprintf(w, "\nLargest context in %s (--memory-budget): the KV cache alone, and with the weights (%s) and activations as run and serve estimate them (--max-cache; serve --memory-limit):\n",
		sizeText(s.BudgetBytes), sizeText(s.WeightBytes))
	for _, t := range s.Types {
		fmt.Fprintf(w, "  %-7s %10d positions alone  %10d with the weights\n", t.Type, t.BudgetKVPositions, t.BudgetPositions)
	}
	if s.ModelContext > 0 {
		fmt.Fprintf(w, "  (the model's trained context is %d positions: run and serve take no longer --max-cache)\n", s.ModelContext)
	}
}
