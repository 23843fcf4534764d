package testmodels

import (
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/tensors/model"
)

// Compiler returns the compile function of a golden run of cfg on be
// with weights w: graphs of the given tokens (every row's logits with
// all), built with opts (MaxLen, LoRA, ...), fused when fused, over one KV
// cache made for the first graph, so a prefill and a decode program share
// it.
func Compiler(t testing.TB, be gpu.Backend, w gpu.Weights, cfg *model.Config, opts arch.BuildOptions, fused bool) func(tokens int, all bool) gpu.Program {
	t.Helper()
	var kv gpu.KVCache
	return func(tokens int, all bool) gpu.Program {
		t.Helper()
		o := opts
		o.Tokens, o.AllLogits = tokens, all
		graph, err := arch.Build(cfg, o)
		if err != nil {
			t.Fatal(err)
		}
		if fused {
			graph = fusion.Fuse(graph)
		}
		if kv == nil {
			if kv, err = be.NewKVCache(graph.KV); err != nil {
				t.Fatal(err)
			}
		}
		p, err := be.Compile(graph, w, kv)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}
