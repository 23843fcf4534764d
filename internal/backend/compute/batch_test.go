package compute_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestBatchedStep: a batched decode step over four sequences at different
// positions, each prefilled on its own cache with a different prefix of
// llama.cpp's golden prompt, gives every row llama.cpp's logits for that
// prompt position: with the rows out of order, and with only some of the
// sequences stepping (the others' rows unused). f32 and f16 caches, a
// quantized model, and the architectures whose positional ops
// differ (gemma2: sliding window and soft cap; phi2: partial rotary
// dims); a plain Compile refuses the batched graph and bad rows fail.
func TestBatchedStep(t *testing.T) {
	dir := testmodels.Path(t, "arch")
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		for _, tc := range []struct {
			model string
			tol   float64 // as TestArchGolden
			f16   bool
		}{
			{"llama", 5e-4, false},
			{"gemma2", 5e-4, false},
			{"phi2", 5e-4, false},
			{"llama-q4_0", 1e-2, false},
			// An f16 cache rounds what the golden prompt's keys were.
			{"llama", 5e-3, true},
		} {
			name := fmt.Sprintf("%s/f16=%v", tc.model, tc.f16)
			t.Run(name, func(t *testing.T) {
				batchCase(t, dev, filepath.Join(dir, tc.model+".gguf"), tc.model, tc.tol, tc.f16, compute.Options{})
			})
		}
	})
}

func batchCase(t *testing.T, dev gpu.Device, path, model string, tol float64, f16 bool, opts compute.Options) {
	golden := testmodels.Arch(t, model)
	ck, err := gguf.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	be := backendOn(t, dev, opts)
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	build := func(o arch.BuildOptions) *fusion.Graph {
		o.MaxLen, o.KVF16 = 64, f16
		g, err := arch.Build(&ck.Config, o)
		if err != nil {
			t.Fatal(err)
		}
		return gpu.Fuse(be, w, g)
	}
	const seqs = 4
	vocab := ck.Config.VocabSize
	prompt := golden.PromptIDs
	if len(prompt) < seqs+1 {
		t.Fatalf("golden prompt of %d ids", len(prompt))
	}
	var kvs []gpu.KVCache
	var rows []gpu.Row
	for s := range seqs {
		// Sequence s holds prompt[:pos] and steps prompt[pos].
		kv, err := be.NewKVCache(build(arch.BuildOptions{Tokens: 1}).KV)
		if err != nil {
			t.Fatal(err)
		}
		defer kv.Release()
		kvs = append(kvs, kv)
		pos := len(prompt) - 1 - s
		pre, err := be.Compile(build(arch.BuildOptions{Tokens: pos}), w, kv)
		if err != nil {
			t.Fatal(err)
		}
		if err := pre.Run(ctx, testmodels.IDs32(prompt[:pos]), 0); err != nil {
			t.Fatal(err)
		}
		pre.Release()
		rows = append(rows, gpu.Row{Token: int32(prompt[pos]), Pos: pos, Seq: s})
	}
	bg := build(arch.BuildOptions{Tokens: seqs, Batch: true})
	if _, err := be.Compile(bg, w, kvs[0]); !errors.Is(err, fusion.ErrBatch) {
		t.Errorf("Compile of a batched graph: %v, want fusion.ErrBatch", err)
	}
	p, err := be.CompileBatch(bg, w, kvs)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	check := func(what string, rows []gpu.Row) {
		t.Helper()
		if err := p.RunBatch(ctx, rows); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(rows)*vocab)
		if n, err := p.Logits(got); err != nil || n != len(rows)*vocab {
			t.Fatalf("%s: Logits: %d, %v", what, n, err)
		}
		for i, r := range rows {
			var d float64
			for j, want := range golden.Logits[r.Pos] {
				d = max(d, math.Abs(float64(got[i*vocab+j])-want))
			}
			if d > tol {
				t.Errorf("%s: row %d (sequence %d at %d): logits differ from llama.cpp's by %.3g (tolerance %g)", what, i, r.Seq, r.Pos, d, tol)
			}
		}
	}
	// Each sequence's step writes its position of its own cache, and the
	// same step may run again (the same values are written), so the
	// checks below can repeat rows.
	check("all rows, out of order", []gpu.Row{rows[3], rows[1], rows[0], rows[2]})
	check("two of four sequences", []gpu.Row{rows[2], rows[1]})
	check("the last sequence alone", []gpu.Row{rows[3]})
	for _, bad := range [][]gpu.Row{nil, {{Seq: 0}, {Seq: 0, Pos: 1}}, {{Seq: 4}}, {{Seq: 1, Pos: 64}}, {{Seq: 0, Token: -1}}} {
		if err := p.RunBatch(ctx, bad); err == nil {
			t.Errorf("RunBatch(%v) succeeded", bad)
		}
	}
	if err := p.(gpu.Program).Run(ctx, []int32{1}, 0); err == nil {
		t.Error("Run of a batched program succeeded")
	}
}
