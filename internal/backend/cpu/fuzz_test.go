package cpu_test

import (
	"context"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
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
	for range r.next()%8 + 1 {
		// The fields of every kind are read in one order, whatever the
		// kind (the decoding of the seeds written before typed ops);
		// values out of a type's range stay out of it.
		kind := fusion.Kind(r.next() % 13)
		out := fusion.Buf(r.next()%8 - 1)
		weight, bias := names[r.next()%len(names)], names[r.next()%len(names)]
		layer := r.next()%4 - 1
		norm := fusion.NormKind(r.next()%3 + 1) // 3: unknown
		eps := float32(r.next()) * 1e-6
		act := fusion.Act(r.next()%5 + 1) // 5: unknown
		scale := float32(r.next()%5) - 1
		capv := float32(r.next()%4) - 1
		window := r.next()%5 - 1
		hs := fusion.HeadShape{Heads: r.next() % 5, KVHeads: r.next() % 3, HeadDim: r.next() % 9}
		rp := fusion.RopeParams{Dims: r.next() % 10, Base: float32(r.next()) * 100}
		rp.Style = fusion.RopeStyle(r.next()%3 + 1) // 3: unknown
		var in [2]fusion.Buf
		in[0], in[1] = -1, -1 // a missing input is out of range
		for i := range r.next() % 3 {
			in[i] = fusion.Buf(r.next()%8 - 1)
		}
		proj := fusion.Projection{Weight: weight, Bias: bias}
		var op fusion.Op
		switch kind {
		case fusion.Embed:
			op = &fusion.EmbedOp{Out: out, Weight: weight, Scale: scale}
		case fusion.Norm:
			op = &fusion.NormOp{Out: out, In: in[0], Norm: norm, Weight: weight, Bias: bias, Eps: eps}
		case fusion.MatMul:
			op = &fusion.MatMulOp{Out: out, In: in[0], Projection: proj}
		case fusion.Rope:
			op = &fusion.RopeOp{Out: out, In: in[0], Heads: hs.Heads, HeadDim: hs.HeadDim, RopeParams: rp}
		case fusion.StoreKV:
			op = &fusion.StoreKVOp{K: in[0], V: in[1], Layer: layer, KVHeads: hs.KVHeads, HeadDim: hs.HeadDim}
		case fusion.Attention:
			op = &fusion.AttentionOp{Out: out, Q: in[0], Layer: layer, HeadShape: hs, Scale: scale, Cap: capv, Window: window}
		case fusion.GLU:
			op = &fusion.GLUOp{Out: out, Gate: in[0], Up: in[1], Act: act}
		case fusion.Activation:
			op = &fusion.ActivationOp{Out: out, In: in[0], Act: act}
		case fusion.Add:
			op = &fusion.AddOp{Out: out, A: in[0], B: in[1]}
		case fusion.SoftCap:
			op = &fusion.SoftCapOp{Out: out, In: in[0], Cap: capv}
		case fusion.LastRow:
			op = &fusion.LastRowOp{Out: out, In: in[0]}
		case fusion.MultiMatMul:
			op = &fusion.MultiMatMulOp{In: in[0], Outs: []fusion.Product{{Out: out, Projection: proj}, {Out: in[1], Projection: proj}}}
		}
		g.Ops = append(g.Ops, op) // kind 0: a nil op
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
