package synthetic

import (
	"errors"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/tensors/model"
)

// FuzzCheckpoint: any config either fails with one of the package's errors
// or builds tensors that pass Check and satisfy the graph validator, and
// never allocates past the limit.
func FuzzCheckpoint(f *testing.F) {
	f.Add(uint8(0), uint16(64), uint16(192), uint8(2), uint8(4), uint8(2), uint8(16), uint8(16), uint16(512), uint8(0), uint8(0))
	f.Add(uint8(1), uint16(48), uint16(45), uint8(1), uint8(4), uint8(1), uint8(12), uint8(6), uint16(300), uint8(0xff), uint8(1))
	f.Add(uint8(2), uint16(3), uint16(5), uint8(3), uint8(3), uint8(3), uint8(1), uint8(0), uint16(7), uint8(0x55), uint8(2))
	f.Add(uint8(4), uint16(0), uint16(1), uint8(0), uint8(1), uint8(2), uint8(3), uint8(5), uint16(0), uint8(0xaa), uint8(3))
	f.Fuzz(func(t *testing.T, arch8 uint8, dim, hidden uint16, layers, heads, kvHeads, headDim, ropeDims uint8, vocab uint16, knobs, quant uint8) {
		specs := Specs()
		cfg := specs[int(arch8)%len(specs)].Config
		cfg.Dim, cfg.HiddenDim, cfg.Layers = int(dim), int(hidden), int(layers)
		cfg.Heads, cfg.KVHeads, cfg.HeadDim, cfg.RopeDims = int(heads), int(kvHeads), int(headDim), int(ropeDims)
		cfg.VocabSize, cfg.BOS, cfg.EOS = int(vocab), 0, 0
		cfg.Tied, cfg.Parallel, cfg.GatedFFN = knobs&1 != 0, knobs&2 != 0, knobs&4 != 0
		cfg.QKVBias, cfg.OutBias, cfg.FFNBias, cfg.LMHeadBias = knobs&8 != 0, knobs&16 != 0, knobs&32 != 0, knobs&64 != 0
		cfg.PostNorms = knobs&128 != 0 && !cfg.Parallel
		if knobs&1 != 0 {
			cfg.Norm = model.NormLayer
		}
		opts := Options{Quant: []string{QuantInt4, QuantInt8, QuantF16, QuantF32, "int3"}[quant%5], MaxBytes: 1 << 20}
		ck, err := Checkpoint(cfg, opts)
		if err != nil {
			if !errors.Is(err, model.ErrConfig) && !errors.Is(err, ErrOptions) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		var total int
		shapes := map[string][]int{}
		for _, ts := range ck.Tensors {
			if err := ts.Check(); err != nil {
				t.Fatal(err)
			}
			total += len(ts.Data)
			if ts.Scales != nil {
				total += len(ts.Scales.Data)
			}
			shapes[ts.Name] = ts.Shape
		}
		if total > 1<<20 {
			t.Fatalf("%d bytes built past the 1 MiB limit", total)
		}
		g, err := arch.Build(&cfg, arch.BuildOptions{Tokens: 1, MaxLen: 4})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Validate(func(n string) ([]int, bool) { s, ok := shapes[n]; return slices.Clone(s), ok }); err != nil {
			t.Fatal(err)
		}
	})
}
