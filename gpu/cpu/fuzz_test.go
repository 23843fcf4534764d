package cpu_test

import (
	"context"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/gpu/cpu"
	"github.com/gpurun/gpurun/tensors"
)

// byteReader hands out fuzz bytes, zeros once they run out.
type byteReader struct{ b []byte }

func (r *byteReader) next() int {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return int(v)
}

// fuzzGraph decodes bytes into an arbitrary (usually invalid) small graph.
func fuzzGraph(data []byte) (*fusion.Graph, []int32, int) {
	r := &byteReader{data}
	g := &fusion.Graph{Tokens: r.next()%4 + int(int8(r.next())>>7)}
	layers := r.next() // its high bit picks an f16 cache, leaving older seeds' decoding alone
	g.KV = fusion.KVSpec{Layers: layers % 3, KVHeads: r.next() % 3, HeadDim: r.next() % 9, MaxLen: r.next() % 9, F16: layers&0x80 != 0}
	for range r.next()%6 + 1 {
		g.NewBuf("b", []int{g.Tokens, 1, 2, 0}[r.next()%4], r.next()%10)
	}
	names := []string{"e", "w", "v4", "v8", "w84", "q", "", "missing"}
	acts := []string{"silu", "gelu_tanh", "gelu", "relu", "tanh"}
	for range r.next()%8 + 1 {
		op := fusion.Op{
			Kind:      fusion.Kind(r.next() % 13),
			Out:       fusion.Buf(r.next()%8 - 1),
			Weight:    names[r.next()%len(names)],
			Bias:      names[r.next()%len(names)],
			Layer:     r.next()%4 - 1,
			NormKind:  []string{"rms", "layer", "x"}[r.next()%3],
			Eps:       float32(r.next()) * 1e-6,
			Act:       acts[r.next()%len(acts)],
			Scale:     float32(r.next()%5) - 1,
			Cap:       float32(r.next()%4) - 1,
			Window:    r.next()%5 - 1,
			Heads:     r.next() % 5,
			KVHeads:   r.next() % 3,
			HeadDim:   r.next() % 9,
			RopeDims:  r.next() % 10,
			RopeBase:  float32(r.next()) * 100,
			RopeStyle: []string{"interleaved", "halves", "?"}[r.next()%3],
		}
		for range r.next() % 3 {
			op.In = append(op.In, fusion.Buf(r.next()%8-1))
		}
		g.Ops = append(g.Ops, op)
	}
	g.Logits = fusion.Buf(r.next()%8 - 1)
	tokens := make([]int32, r.next()%5)
	for i := range tokens {
		tokens[i] = int32(r.next()%8 - 1)
	}
	return g, tokens, r.next()%10 - 1
}

// FuzzCompileRun: whatever graph Compile accepts must run without panicking
// (a clean error is fine), so Validate is complete enough for the backend.
func FuzzCompileRun(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 0, 1, 1, 4, 4, 2, 0, 4, 0, 4, 3, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 0, 1, 1, 4, 8, 3, 0, 4, 0, 4, 1, 1, 2, 0, 1, 2, 0, 0, 1, 0, 2, 0, 1, 1, 1, 4, 0, 0, 2, 1, 1})
	f.Add([]byte{2, 0, 0x81, 1, 4, 8, 3, 0, 4, 0, 4, 1, 1, 2, 0, 1, 2, 0, 0, 1, 0, 2, 0, 1, 1, 1, 4, 0, 0, 2, 1, 1}) // f16 cache
	mk := func(name string, shape []int) *tensors.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i%7) - 3
		}
		t, err := tensors.FromF32(name, shape, v, tensors.F32)
		if err != nil {
			f.Fatal(err)
		}
		return t
	}
	q, err := tensors.Quantize("q", []int{8, 4}, make([]float32, 32), tensors.I4, 2, tensors.F16)
	if err != nil {
		f.Fatal(err)
	}
	q.Scales.Name = "q_quantized_scale"
	ws := []*tensors.Tensor{mk("e", []int{5, 4}), mk("w", []int{4, 4}), mk("v4", []int{4}), mk("v8", []int{8}), mk("w84", []int{8, 4}), q}
	be := cpu.New(cpu.Options{Threads: 2})
	w, err := be.LoadWeights(context.Background(), ws)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, tokens, pos := fuzzGraph(data)
		var kv gpu.KVCache
		if c, err := be.NewKVCache(g.KV); err == nil {
			kv = c
			defer c.Release()
		}
		p, err := be.Compile(g, w, kv)
		if err != nil {
			return
		}
		defer p.Release()
		if err := p.Run(context.Background(), tokens, pos); err != nil {
			return
		}
		if _, err := p.Logits(make([]float32, 64)); err != nil {
			return
		}
	})
}
