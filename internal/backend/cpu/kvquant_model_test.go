package cpu_test

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
)

// kvPrompt is the prompt of the quantized-cache goldens (arch2's).
var kvPrompt = []int{160, 483, 357, 185, 71, 402, 205, 303, 318, 152, 189, 472}

// kvRun is one run of a GGUF with a cache of types k and v (noRot: the
// rotation skipped) as testdata/kvquant's goldens were made: the prompt in
// one step with every row's logits, then one decode step per id of
// follow (the reference's greedy ids). It returns the prompt's rows of
// logits, the logits after each decode step, and the greedy id before each
// step.
func kvRun(t *testing.T, path string, k, v fusion.KVType, noRot bool, follow []int) (prompt [][]float32, decode [][]float32, greedy []int) {
	t.Helper()
	ck, err := gguf.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	be := cpu.New(cpu.Options{Threads: 2})
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	n := len(kvPrompt)
	opts := arch.BuildOptions{MaxLen: n + len(follow) + 1, CacheK: k, CacheV: v}
	var kv interface{ Release() }
	_ = kv
	build := func(tokens int, all bool) *fusion.Graph {
		o := opts
		o.Tokens, o.AllLogits = tokens, all
		g, err := arch.Build(&ck.Config, o)
		if err != nil {
			t.Fatal(err)
		}
		g.KV.NoRotation = noRot
		return g
	}
	pg, dg := build(n, true), build(1, false)
	cache, err := be.NewKVCache(pg.KV)
	if err != nil {
		t.Fatal(err)
	}
	pre, err := be.Compile(pg, w, cache)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := be.Compile(dg, w, cache)
	if err != nil {
		t.Fatal(err)
	}
	if err := pre.Run(ctx, testmodels.IDs32(kvPrompt), 0); err != nil {
		t.Fatal(err)
	}
	vocab := ck.Config.VocabSize
	all := make([]float32, n*vocab)
	if _, err := pre.Logits(all); err != nil {
		t.Fatal(err)
	}
	for p := range n {
		prompt = append(prompt, all[p*vocab:(p+1)*vocab])
	}
	last := prompt[n-1]
	for step, id := range follow {
		greedy = append(greedy, testmodels.Argmax(last))
		if err := dec.Run(ctx, []int32{int32(id)}, n+step); err != nil {
			t.Fatal(err)
		}
		last = make([]float32, vocab)
		if _, err := dec.Logits(last); err != nil {
			t.Fatal(err)
		}
		decode = append(decode, last)
	}
	return prompt, decode, greedy
}

func maxDiff32(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestKVQuantVsF32 is a smoke test until the llama.cpp goldens: each cache
// type's logits stay near the f32 cache's, by more for fewer bits.
func TestKVQuantVsF32(t *testing.T) {
	path := "testdata/kvquant/kvrot-qwen3.gguf"
	follow := make([]int, 20)
	for i := range follow {
		follow[i] = (i*37 + 11) % 512
	}
	p32, d32, _ := kvRun(t, path, fusion.KVFloat, fusion.KVFloat, false, follow)
	for _, typ := range []fusion.KVType{fusion.KVQ8_0, fusion.KVQ4_0, fusion.KVQ4_1, fusion.KVQ5_0, fusion.KVQ5_1, fusion.KVIQ4NL} {
		for _, noRot := range []bool{false, true} {
			p, d, _ := kvRun(t, path, typ, typ, noRot, follow)
			var pm, dm float64
			for i := range p {
				pm = max(pm, maxDiff32(p[i], p32[i]))
			}
			for i := range d {
				dm = max(dm, maxDiff32(d[i], d32[i]))
			}
			fmt.Printf("%v noRot=%v: prompt %.3g decode %.3g\n", typ, noRot, pm, dm)
		}
	}
}

// TestKVQuantRingAndCopy holds a quantized, rotated cache (q4_0 keys, q5_1
// values, head dim 128) to the contracts the float caches keep: a
// sliding layer on a ring gives the logits of a full cache, and a cache
// copied (the prefix cache's CopyKV) continues as the original does, both
// bit for bit.
func TestKVQuantRingAndCopy(t *testing.T) {
	ck, err := gguf.Load("testdata/kvquant/kvrot-qwen3.gguf")
	if err != nil {
		t.Fatal(err)
	}
	ck.Config.SlidingWindow, ck.Config.SlidingLayers = 8, "even"
	ctx := context.Background()
	be := cpu.New(cpu.Options{Threads: 2})
	w, err := be.LoadWeights(ctx, ck.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	n, vocab := len(kvPrompt), ck.Config.VocabSize
	follow := []int{5, 300, 77, 12, 480, 9, 100, 250, 33, 64, 128, 7}
	// run prefills the prompt into a new cache (a ring where ringTokens >
	// 0), optionally copies it into another, then decodes follow.
	run := func(ringTokens int, copyKV bool) (logits []float32) {
		opts := arch.BuildOptions{MaxLen: 64, RingTokens: ringTokens, CacheK: fusion.KVQ4_0, CacheV: fusion.KVQ5_1}
		build := func(tokens int) *fusion.Graph {
			o := opts
			o.Tokens = tokens
			g, err := arch.Build(&ck.Config, o)
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
		pg, dg := build(n), build(1)
		if (pg.KV.Ring != nil) != (ringTokens > 0) || pg.KV.KRotation() != 128 || pg.KV.VRotation() != 64 {
			t.Fatalf("spec %+v: want a ring %v, rotations 128 and 64", pg.KV, ringTokens > 0)
		}
		kv, err := be.NewKVCache(pg.KV)
		if err != nil {
			t.Fatal(err)
		}
		pre, err := be.Compile(pg, w, kv)
		if err != nil {
			t.Fatal(err)
		}
		if err := pre.Run(ctx, testmodels.IDs32(kvPrompt), 0); err != nil {
			t.Fatal(err)
		}
		if copyKV {
			dst, err := be.NewKVCache(pg.KV)
			if err != nil {
				t.Fatal(err)
			}
			if err := be.CopyKV(dst, kv, n); err != nil {
				t.Fatal(err)
			}
			kv = dst
		}
		dec, err := be.Compile(dg, w, kv)
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range follow {
			if err := dec.Run(ctx, []int32{int32(id)}, n+i); err != nil {
				t.Fatal(err)
			}
			row := make([]float32, vocab)
			if _, err := dec.Logits(row); err != nil {
				t.Fatal(err)
			}
			logits = append(logits, row...)
		}
		return logits
	}
	full := run(0, false)
	for _, c := range []struct {
		name string
		ring int
		copy bool
	}{{"ring", n, false}, {"copy", 0, true}, {"ring copy", n, true}} {
		got := run(c.ring, c.copy)
		for i := range full {
			if math.Float32bits(got[i]) != math.Float32bits(full[i]) {
				t.Errorf("%s: logit %d of step %d is %g, the full cache's %g", c.name, i%vocab, i/vocab, got[i], full[i])
				break
			}
		}
	}
}
