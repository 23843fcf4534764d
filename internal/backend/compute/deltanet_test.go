package compute

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/shaders"
	"github.com/gpurun/gpurun/tensors"
)

// deltaCase is one shape of the delta kernels' conformance: K key heads,
// V value heads of D, a convolution of W taps, a prefill of T rows (the
// chunked or the recurrent kernel), then decode rows one at a time.
type deltaCase struct {
	k, v, d, w, t int
	chunked       bool
}

// TestDeltaNetKernelsConformance holds the Gated DeltaNet kernels (delta_conv, then
// delta_rule or delta_chunk, bound by hand here; TestQwen35OpsConformance
// holds the planner's deltaNet) to the CPU
// backend's fusion.DeltaNetOp on WebGPU and Vulkan: a prefill of T rows
// from position 0 (chunks of shaders.DeltaChunk rows ending inside it
// where T > 32), three decode rows on the state it leaves, then the
// prefill again at position 0 on that dirty state (which must start
// afresh). Head dims of 16, 80 (columns not a multiple of the 64
// invocations) and 128 (Qwen3.5's), value heads 1-4x the key heads.
func TestDeltaNetKernelsConformance(t *testing.T) {
	cases := []deltaCase{
		{2, 4, 16, 4, 1, false}, {2, 4, 16, 4, 5, false}, {2, 4, 16, 4, 5, true}, {2, 4, 16, 4, 33, true},
		{2, 4, 16, 4, 70, true}, {2, 4, 16, 4, 70, false}, {1, 3, 80, 3, 37, true}, {1, 2, 128, 4, 40, true},
	}
	ctx := context.Background()
	for _, d := range TestDevices {
		t.Run(d.Name, func(t *testing.T) {
			dev, err := d.Open(ctx)
			gputest.NoDevice(t, d.Name, err)
			defer dev.Close()
			gputest.CheckDriver(t, dev.Info().Name, dev.Info().Driver)
			var ks deltaKernels
			for i, c := range []contract[shaders.DeltaParams, deltaconvBindings]{kDeltaConv} {
				ks[i] = newTestKernel(t, dev, c.Name())
			}
			for i, c := range []contract[shaders.DeltaParams, deltanetBindings]{kDeltaRule, kDeltaChunk} {
				ks[i+1] = newTestKernel(t, dev, c.Name())
			}
			for _, tc := range cases {
				t.Run(fmt.Sprintf("k%dv%dd%dw%d/t%d/chunked=%t", tc.k, tc.v, tc.d, tc.w, tc.t, tc.chunked), func(t *testing.T) {
					checkDeltaKernels(t, dev, ks, tc)
				})
			}
		})
	}
}

// deltaKernels are delta_conv, delta_rule and delta_chunk on one device.
type deltaKernels [3]gpu.Kernel

// newTestKernel compiles kernel name on dev for the test.
func newTestKernel(t *testing.T, dev gpu.Device, name string) gpu.Kernel {
	t.Helper()
	spec, err := shaders.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	k, err := dev.NewKernel(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Release)
	return k
}

// deltaInputs are a case's random rows (N = T + 3 of each) and weights.
type deltaInputs struct {
	qkv, beta, alpha, conv, dt, a []float32
	n                             int
}

func newDeltaInputs(tc deltaCase) deltaInputs {
	r := rand.New(rand.NewPCG(uint64(tc.t), uint64(tc.d*10+tc.v)))
	ch := (2*tc.k + tc.v) * tc.d
	n := tc.t + 3
	in := deltaInputs{n: n}
	normal := func(count int, scale float64) []float32 {
		x := make([]float32, count)
		for i := range x {
			x[i] = float32(r.NormFloat64() * scale)
		}
		return x
	}
	in.qkv, in.beta, in.alpha = normal(n*ch, 1), normal(n*tc.v, 1), normal(n*tc.v, 1)
	in.conv = make([]float32, ch*tc.w)
	for i := range in.conv {
		in.conv[i] = float32((r.Float64()*2 - 1) / math.Sqrt(float64(tc.w)))
	}
	in.dt, in.a = make([]float32, tc.v), make([]float32, tc.v)
	for i := range in.dt {
		in.dt[i] = float32(1 + 0.1*r.NormFloat64())
		in.a[i] = float32(-0.1 - 1.9*r.Float64())
	}
	return in
}

// deltaCPU runs the op on the CPU backend: the prefill's rows, then each
// decode row, then the prefill again at 0; the outputs in that order.
func deltaCPU(t *testing.T, tc deltaCase, in deltaInputs) []float32 {
	t.Helper()
	ctx := context.Background()
	op := &fusion.DeltaNetOp{Conv: "conv", DtBias: "dt", A: "a", KeyHeads: tc.k, ValueHeads: tc.v, HeadDim: tc.d, Width: tc.w, Eps: 1e-6}
	ch := op.Channels()
	spec := fusion.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 1, MaxLen: in.n, State: []fusion.LayerState{op.State()}}
	graph := func(tokens int) *fusion.Graph {
		g := &fusion.Graph{Tokens: tokens, KV: spec}
		o := *op
		o.QKV, o.Beta, o.Alpha = g.NewBuf("qkv", tokens, ch), g.NewBuf("beta", tokens, tc.v), g.NewBuf("alpha", tokens, tc.v)
		o.Out = g.NewBuf("out", tokens, tc.v*tc.d)
		g.Add(&fusion.EmbedOp{Out: o.QKV, Weight: "qkv_rows"})
		g.Add(&fusion.EmbedOp{Out: o.Beta, Weight: "beta_rows"})
		g.Add(&fusion.EmbedOp{Out: o.Alpha, Weight: "alpha_rows"})
		g.Add(&o)
		g.Logits = o.Out
		return g
	}
	tensor := func(name string, shape []int, vals []float32) *tensors.Tensor {
		x, err := tensors.FromF32(name, shape, vals, tensors.F32)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	be := cpu.New(cpu.Options{Threads: 1})
	w, err := be.LoadWeights(ctx, []*tensors.Tensor{tensor("qkv_rows", []int{in.n, ch}, in.qkv), tensor("beta_rows", []int{in.n, tc.v}, in.beta),
		tensor("alpha_rows", []int{in.n, tc.v}, in.alpha), tensor("conv", []int{ch, tc.w}, in.conv), tensor("dt", []int{tc.v}, in.dt), tensor("a", []int{tc.v}, in.a)})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := be.NewKVCache(spec)
	if err != nil {
		t.Fatal(err)
	}
	pre, err := be.Compile(graph(tc.t), w, kv)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := be.Compile(graph(1), w, kv)
	if err != nil {
		t.Fatal(err)
	}
	var out []float32
	run := func(p gpu.Program, ids []int32, pos int) {
		if err := p.Run(ctx, ids, pos); err != nil {
			t.Fatal(err)
		}
		o := make([]float32, len(ids)*tc.v*tc.d)
		if _, err := p.Logits(o); err != nil {
			t.Fatal(err)
		}
		out = append(out, o...)
	}
	ids := make([]int32, tc.t)
	for i := range ids {
		ids[i] = int32(i)
	}
	run(pre, ids, 0)
	for i := range 3 {
		run(dec, []int32{int32(tc.t + i)}, tc.t+i)
	}
	run(pre, ids, 0)
	return out
}

// deltaGPU runs the same steps through the kernels.
func deltaGPU(t *testing.T, dev gpu.Device, ks deltaKernels, tc deltaCase, in deltaInputs) []float32 {
	t.Helper()
	ch := (2*tc.k + tc.v) * tc.d
	f32s := func(x []float32) []byte {
		b := make([]byte, 4*len(x))
		for i, v := range x {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b
	}
	buffer := func(data []byte, size int) gpu.Buffer {
		b, err := dev.NewBuffer(int64(max(size, len(data), 16)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Release)
		if data != nil {
			if err := dev.Write(b, 0, data); err != nil {
				t.Fatal(err)
			}
		}
		return b
	}
	params, err := shaders.Encode(shaders.DeltaParams{KeyHeads: uint32(tc.k), ValueHeads: uint32(tc.v), HeadDim: uint32(tc.d),
		Width: uint32(tc.w), NRows: uint32(tc.t), Eps: 1e-6})
	if err != nil {
		t.Fatal(err)
	}
	pbuf := buffer(params, 0)
	stepBuf := buffer(nil, 64)
	// The step's rows, written at the start of these buffers per step.
	qkv, beta, alpha := buffer(nil, 4*tc.t*ch), buffer(nil, 4*tc.t*tc.v), buffer(nil, 4*tc.t*tc.v)
	conv, dt, a := buffer(f32s(in.conv), 0), buffer(f32s(in.dt), 0), buffer(f32s(in.a), 0)
	state := buffer(nil, 4*(ch*(tc.w-1)+tc.v*tc.d*tc.d))
	xs := buffer(nil, 4*shaders.DeltaScratch(tc.t, tc.k, tc.v, tc.d))
	out := buffer(nil, 4*tc.t*tc.v*tc.d)
	kConv, kRule, kChunk := ks[0], ks[1], ks[2]
	var outs []float32
	// step runs rows [row, row+rows) at position pos.
	step := func(row, rows, pos int, chunked bool) {
		words := make([]byte, 64)
		binary.LittleEndian.PutUint32(words[4*shaders.StepPos:], uint32(pos))
		binary.LittleEndian.PutUint32(words[4*shaders.StepRows:], uint32(rows))
		for _, w := range []struct {
			b    gpu.Buffer
			data []byte
		}{{stepBuf, words}, {qkv, f32s(in.qkv[row*ch : (row+rows)*ch])},
			{beta, f32s(in.beta[row*tc.v : (row+rows)*tc.v])}, {alpha, f32s(in.alpha[row*tc.v : (row+rows)*tc.v])}} {
			if err := dev.Write(w.b, 0, w.data); err != nil {
				t.Fatal(err)
			}
		}
		at := func(b gpu.Buffer, _ int) gpu.Binding { return gpu.Binding{Buf: b} }
		uni := gpu.Binding{Buf: pbuf}
		cb := deltaconvBindings{Step: gpu.Binding{Buf: stepBuf}, QkvW: at(qkv, ch), Conv: gpu.Binding{Buf: conv}, State: gpu.Binding{Buf: state}, Xs: gpu.Binding{Buf: xs}}
		nb := deltanetBindings{Step: gpu.Binding{Buf: stepBuf}, BetaW: at(beta, tc.v), AlphaW: at(alpha, tc.v), DtBias: gpu.Binding{Buf: dt},
			A: gpu.Binding{Buf: a}, State: gpu.Binding{Buf: state}, Xs: gpu.Binding{Buf: xs}, OutW: gpu.Binding{Buf: out}}
		cmds, err := dev.NewCommands()
		if err != nil {
			t.Fatal(err)
		}
		defer cmds.Release()
		rule := kRule
		if chunked {
			rule = kChunk
		}
		for _, err := range []error{cmds.Dispatch(kConv, append([]gpu.Binding{uni}, cb.list()...), 2*tc.k+tc.v, 1, 1),
			cmds.Dispatch(rule, append([]gpu.Binding{uni}, nb.list()...), tc.v, 1, 1), cmds.Finish(), dev.Submit(cmds)} {
			if err != nil {
				t.Fatal(err)
			}
		}
		o := make([]byte, 4*rows*tc.v*tc.d)
		if err := dev.Read(out, 0, o); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(o); i += 4 {
			outs = append(outs, math.Float32frombits(binary.LittleEndian.Uint32(o[i:])))
		}
	}
	step(0, tc.t, 0, tc.chunked)
	for i := range 3 {
		step(tc.t+i, 1, tc.t+i, false)
	}
	step(0, tc.t, 0, tc.chunked)
	return outs
}

func checkDeltaKernels(t *testing.T, dev gpu.Device, ks deltaKernels, tc deltaCase) {
	in := newDeltaInputs(tc)
	want := deltaCPU(t, tc, in)
	got := deltaGPU(t, dev, ks, tc, in)
	if len(got) != len(want) {
		t.Fatalf("%d outputs, the CPU backend gives %d", len(got), len(want))
	}
	var worst, scale float64
	at := -1
	for i := range want {
		scale = max(scale, math.Abs(float64(want[i])))
		if d := math.Abs(float64(got[i] - want[i])); d > worst || math.IsNaN(d) {
			worst, at = d, i
		}
	}
	// f32 in both, summed in other orders (and the chunked form's
	// algebra), with the GPU's exp and log: 1e-4 of the largest output.
	if tol := 1e-4 * scale; !(worst <= tol) {
		t.Errorf("outputs differ from the CPU backend's by %.3g at %d (got %g, want %g), tolerance %.3g", worst, at, got[at], want[at], tol)
	}
}
