package cpu_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestBatchedStep: a batched decode step over four sequences at different
// positions (each prefilled with a different prefix of the golden prompt)
// gives each row the logits of that sequence's own decode step, and the
// logits of llama.cpp's golden prompt where a row continues it; a plain
// Compile refuses the batched graph and bad rows fail cleanly.
func TestBatchedStep(t *testing.T) {
	for _, name := range []string{"llama", "gemma2", "phi2"} {
		t.Run(name, func(t *testing.T) {
			golden := testmodels.Arch(t, name)
			ck, err := gguf.Load(filepath.Join(testmodels.Path(t, "arch"), name+".gguf"))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			be := cpu.New(cpu.Options{})
			defer be.Close()
			w, err := be.LoadWeights(ctx, ck.Tensors)
			if err != nil {
				t.Fatal(err)
			}
			build := func(o arch.BuildOptions) *fusion.Graph {
				o.MaxLen = 64
				g, err := arch.Build(&ck.Config, o)
				if err != nil {
					t.Fatal(err)
				}
				return fusion.Fuse(g)
			}
			const seqs = 4
			vocab := ck.Config.VocabSize
			prompt := golden.PromptIDs
			var kvs []gpu.KVCache
			want := make([][]float32, seqs)
			var rows []gpu.Row
			for s := range seqs {
				// Sequence s holds prompt[:n-1-s] and decodes prompt[n-2-s].
				kv, err := be.NewKVCache(build(arch.BuildOptions{Tokens: 1}).KV)
				if err != nil {
					t.Fatal(err)
				}
				kvs = append(kvs, kv)
				pos := len(prompt) - 1 - s
				pre, err := be.Compile(build(arch.BuildOptions{Tokens: pos}), w, kv)
				if err != nil {
					t.Fatal(err)
				}
				if err := pre.Run(ctx, testmodels.IDs32(prompt[:pos]), 0); err != nil {
					t.Fatal(err)
				}
				rows = append(rows, gpu.Row{Token: int32(prompt[pos]), Pos: pos, Seq: s})
				// The reference: the sequence's own decode step, on a
				// copy of its cache (a fresh one prefilled alike).
				ref, err := be.NewKVCache(build(arch.BuildOptions{Tokens: 1}).KV)
				if err != nil {
					t.Fatal(err)
				}
				pre2, _ := be.Compile(build(arch.BuildOptions{Tokens: pos + 1}), w, ref)
				if err := pre2.Run(ctx, testmodels.IDs32(prompt[:pos+1]), 0); err != nil {
					t.Fatal(err)
				}
				want[s] = make([]float32, vocab)
				if _, err := pre2.Logits(want[s]); err != nil {
					t.Fatal(err)
				}
				if d := testmodels.MaxAbsDiff(want[s], golden.Logits[pos]); d > 1e-2 {
					t.Fatalf("sequence %d reference: logits differ from llama.cpp's by %g", s, d)
				}
			}
			bg := build(arch.BuildOptions{Tokens: seqs, Batch: true})
			if _, err := be.Compile(bg, w, kvs[0]); !errors.Is(err, fusion.ErrBatch) {
				t.Errorf("Compile of a batched graph: %v, want fusion.ErrBatch", err)
			}
			p, err := be.CompileBatch(bg, w, kvs)
			if err != nil {
				t.Fatal(err)
			}
			// Rows out of order: row t's logits follow row t, whatever
			// its sequence.
			rows[0], rows[3] = rows[3], rows[0]
			if err := p.RunBatch(ctx, rows); err != nil {
				t.Fatal(err)
			}
			got := make([]float32, seqs*vocab)
			if n, err := p.Logits(got); err != nil || n != seqs*vocab {
				t.Fatalf("Logits: %d, %v", n, err)
			}
			for t2, r := range rows {
				var d float64
				for i, v := range got[t2*vocab : (t2+1)*vocab] {
					d = max(d, math.Abs(float64(v-want[r.Seq][i])))
				}
				if d > 1e-4 {
					t.Errorf("row %d (sequence %d at %d): logits differ from its own step by %g", t2, r.Seq, r.Pos, d)
				}
			}
			for _, bad := range [][]gpu.Row{nil, {{Seq: 0}, {Seq: 0, Pos: 1}}, {{Seq: 4}}, {{Seq: 1, Pos: 64}}} {
				if err := p.RunBatch(ctx, bad); err == nil {
					t.Errorf("RunBatch(%v) succeeded", bad)
				}
			}
			p.Release()
		})
	}
}
