package main

import (
	"fmt"
	"io"

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
}

type kvBytes struct {
	Type        string `json:"type"` // keys and values alike: f32, f16, q8_0, ...
	PerPosition int64  `json:"bytes_per_position"`
	Total       int64  `json:"bytes"`
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

func (s *kvSummary) writeText(w io.Writer) {
	fmt.Fprintf(w, "\nKV cache at %d positions (keys and values of one type; run --cache-type-k/--cache-type-v):\n", s.Positions)
	for _, t := range s.Types {
		fmt.Fprintf(w, "  %-7s %9.1f KiB per position  %10.1f MiB\n", t.Type, float64(t.PerPosition)/1024, float64(t.Total)/(1<<20))
	}
}
