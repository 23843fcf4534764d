package compute_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/shaders"
	"github.com/gpurun/gpurun/tensors"
)

// f16ArithTol is the tolerance of the f16-arithmetic decode kernel
// (matvec_sg_h) against the CPU reference's f32 math. Its errors are f16
// roundings (2^-11 relative) of each dequantized weight, product and
// 4-term sum, a random walk along the row: with the test's |w| <= 1.5
// (int8/int4 codes times scales up to 1.5/127, 1.5/7), |x| <= 1 and rows
// of 128-256 columns, sigma is about 2^-11 * sqrt(sum (w x)^2) * 2 ~ 3e-3,
// doubled by the output op: 0.03 absolute is ~5 sigma. The GLU output
// silu(g) * u multiplies g's error by |u| (up to ~6): 0.1. (Measured
// worst: 0.011 plain, 0.055 GLU.) A decoding mistake (a wrong element,
// scale or row) moves outputs by O(1).
var (
	f16ArithTol    = tolerance{abs: 0.03, rel: 0.01}
	f16ArithGLUTol = tolerance{abs: 0.1, rel: 0.01}
)

// f16Graph is x (f16 activations, rows of in) times weight "w" (and "w2"
// for GLU) into y (f16), doubled into an f32 output.
func f16Graph(tokens, in, out int, glu bool) *fusion.Graph {
	g := embedGraph(tokens)
	x := embedInput(g, "x", in)
	y := g.NewBuf("y", tokens, out)
	if glu {
		g.Add(&fusion.MatMulGLUOp{Out: y, In: x, Gate: fusion.Projection{Weight: "w"}, Up: fusion.Projection{Weight: "w2", Bias: "b"}, Act: fusion.ActSiLU})
	} else {
		g.Add(&fusion.MatMulOp{Out: y, In: x, Projection: fusion.Projection{Weight: "w", Bias: "b"}})
	}
	g.Bufs[x].F16 = true
	g.Bufs[y].F16 = true
	g.Logits = g.Add(&fusion.AddOp{Out: g.NewBuf("y32", tokens, out), A: y, B: y})
	return g
}

// f16Cases are the weights of every f16-arithmetic module
// (shaders.F16Weights, f32 and f16 scales, per channel and in blocks),
// each plain and GLU; columns enough for lane groups of 16 (more than
// lavapipe's subgroup of 8: the combining path) and of 8.
var f16Cases = []struct {
	dt, st    tensors.DType
	block, in int
}{
	{tensors.F16, 0, 0, 128},
	{tensors.I8, tensors.F32, 0, 128},
	{tensors.I8, tensors.F16, 32, 256},
	{tensors.I4, tensors.F16, 32, 256},
	{tensors.I4, tensors.F32, 64, 256},
}

// TestF16ArithmeticConformance runs the f16-arithmetic decode kernel
// against the CPU backend, on every device: on Vulkan
// devices with f16 (lavapipe) it is matvec_sg_h, elsewhere the f32
// kernels (checked by TestF16VariantChosen) held to the same tolerance.
func TestF16ArithmeticConformance(t *testing.T) {
	for _, c := range f16Cases {
		for _, glu := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s_%s_b%d_%d_glu%v", c.dt, c.st, c.block, c.in, glu), func(t *testing.T) {
				r := rand.New(rand.NewPCG(16, uint64(c.in+c.block)))
				const out = 19
				g := f16Graph(1, c.in, out, glu)
				ws := []*tensors.Tensor{tensorOf(t, r, "x", vocab, c.in, tensors.F32, 0, 0),
					tensorOf(t, r, "w", out, c.in, c.dt, c.block, c.st), vecOf(t, r, "b", out, 1, 0)}
				if glu {
					ws = append(ws, tensorOf(t, r, "w2", out, c.in, c.dt, c.block, c.st))
				}
				tol := f16ArithTol
				if glu {
					tol = f16ArithGLUTol
				}
				compare(t, g, ws, []step{{toks(3), 0}, {toks(7), 1}}, tol, compute.Options{})
			})
		}
	}
}

// TestF16VariantChosen holds the selection rule: decode takes
// matvec_sg_h exactly on a Vulkan device reporting f16 (lavapipe; not
// SwiftShader, which has no f16 feature), with subgroups, for f16
// activations and f16/int8/int4 weights, unless Options turn f16 or
// subgroups off; f32 activations (the policy of f32 models such as Falcon
// and Phi-2) keep matvec_sg, f32 weights too, and WebGPU keeps
// matvec_lanes.
func TestF16VariantChosen(t *testing.T) {
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		info, caps := dev.Info(), dev.Caps()
		if info.Backend == "vulkan" && strings.Contains(info.Name, "llvmpipe") && !caps.F16() {
			t.Errorf("lavapipe reports no f16 (shaderFloat16 and 16-bit storage)")
		}
		if info.Backend == "webgpu" && caps.F16() {
			t.Errorf("WebGPU reports f16; its kernels cannot use f16 arithmetic")
		}
		sg := shaders.SubgroupVariantFits(caps.SubgroupSize)
		for _, c := range []struct {
			opts   compute.Options
			half   bool
			dt     tensors.DType
			wantH  bool // matvec_sg_h where the device has f16 and subgroups
			wantSG bool // else matvec_sg where it has subgroups
		}{
			{compute.Options{}, true, tensors.I8, true, true},
			{compute.Options{}, true, tensors.F16, true, true},
			{compute.Options{}, false, tensors.I8, false, true},
			{compute.Options{}, true, tensors.F32, false, true},
			{compute.Options{F16: compute.F16Off}, true, tensors.I8, false, true},
			{compute.Options{Subgroups: compute.SubgroupsOff}, true, tensors.I8, false, false},
		} {
			name := fmt.Sprintf("%s_%s_%s_half%v", c.opts.Subgroups, c.opts.F16, c.dt, c.half)
			t.Run(name, func(t *testing.T) {
				kernel := f16ProfiledKernels(t, backendOn(t, dev, c.opts), c.dt, c.half)
				want := "matvec_lanes."
				switch {
				case c.wantH && sg && caps.F16():
					want = "matvec_sg_h."
				case c.wantSG && sg:
					want = "matvec_sg."
				}
				if !slices.ContainsFunc(kernel, func(k string) bool { return strings.HasPrefix(k, want) }) {
					t.Errorf("kernels %v, want %s*", kernel, want)
				}
			})
		}
	})
}

// f16ProfiledKernels compiles a one-token MatMul of dt weights (128
// columns), with f16 activations when half, and returns the kernels its
// profiled step ran.
func f16ProfiledKernels(t *testing.T, be gpu.Backend, dt tensors.DType, half bool) []string {
	t.Helper()
	if !be.Caps().Timestamps {
		t.Skipf("%s: no timestamps to profile with", be.Info().Name)
	}
	r := rand.New(rand.NewPCG(6, 6))
	g := f16Graph(1, 128, 40, false)
	if !half {
		for i := range g.Bufs {
			g.Bufs[i].F16 = false
		}
	}
	st := tensors.DType(0)
	if dt == tensors.I8 {
		st = tensors.F16
	}
	return profiledKernels(t, be, g, []*tensors.Tensor{tensorOf(t, r, "x", vocab, 128, tensors.F32, 0, 0),
		tensorOf(t, r, "w", 40, 128, dt, 32, st), vecOf(t, r, "b", 40, 1, 0)}, []int32{3}, nil)
}

// TestDecodeRowsBitwise: the rows of a decode step of several rows (3,
// unbatched) and of a batched step (6 rows: matvec_sg_h's 4 rows per
// workgroup, then 2) equal one-row steps of the same tokens bit for bit,
// with f16 activations over int8 blocks (matvec_sg_h where the device has
// f16 arithmetic), plain and GLU: a sequence computes the same batched or
// alone, so seeded sampling gives the same tokens.
func TestDecodeRowsBitwise(t *testing.T) {
	ctx := context.Background()
	ids := []int32{3, 7, 1, 9, 4, 6}
	for _, glu := range []bool{false, true} {
		t.Run(fmt.Sprintf("glu%v", glu), func(t *testing.T) {
			r := rand.New(rand.NewPCG(17, 17))
			const in, out = 256, 40
			ws := []*tensors.Tensor{tensorOf(t, r, "x", vocab, in, tensors.F32, 0, 0),
				tensorOf(t, r, "w", out, in, tensors.I8, 32, tensors.F16), vecOf(t, r, "b", out, 1, 0)}
			if glu {
				ws = append(ws, tensorOf(t, r, "w2", out, in, tensors.I8, 32, tensors.F16))
			}
			forEachDevice(t, func(t *testing.T, dev gpu.Device) {
				be := backendOn(t, dev, compute.Options{})
				one := runAll(t, ctx, be, f16Graph(1, in, out, glu), ws, []step{{toks(ids[0]), 0}, {toks(ids[1]), 0}, {toks(ids[2]), 0},
					{toks(ids[3]), 0}, {toks(ids[4]), 0}, {toks(ids[5]), 0}})
				three := runAll(t, ctx, be, f16Graph(3, in, out, glu), ws, []step{{ids[:3], 0}})[0]
				six := runBatched(t, ctx, be, f16Graph(6, in, out, glu), ws, ids)
				for k := range ids {
					if k < 3 && !slices.Equal(three[k*out:(k+1)*out], one[k]) {
						t.Errorf("row %d of a 3-row step differs from its 1-row step", k)
					}
					if !slices.Equal(six[k*out:(k+1)*out], one[k]) {
						t.Errorf("row %d of a 6-row batched step differs from its 1-row step", k)
					}
				}
			})
		})
	}
}

// runBatched runs g as a batched step (one row per token of ids, each its
// own sequence) and returns its logits.
func runBatched(t *testing.T, ctx context.Context, be gpu.Backend, g *fusion.Graph, ws []*tensors.Tensor, ids []int32) []float32 {
	t.Helper()
	// A batched step's sequences are its caches: y is stored into them
	// (as keys and values of 4 heads of 10), which the logits do not read.
	g.Batch = true
	g.KV = fusion.KVSpec{Layers: 1, KVHeads: 4, HeadDim: 10, MaxLen: 8}
	y := fusion.Buf(slices.IndexFunc(g.Bufs, func(b fusion.BufInfo) bool { return b.Name == "y" }))
	g.Add(&fusion.StoreKVOp{K: y, V: y, KVHeads: 4, HeadDim: 10})
	w, err := be.LoadWeights(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	var kvs []gpu.KVCache
	var rows []gpu.Row
	for i, id := range ids {
		kv, err := be.NewKVCache(g.KV)
		if err != nil {
			t.Fatal(err)
		}
		defer kv.Release()
		kvs = append(kvs, kv)
		rows = append(rows, gpu.Row{Token: id, Seq: i})
	}
	p, err := be.CompileBatch(g, w, kvs)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	if err := p.RunBatch(ctx, rows); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, g.Tokens*g.Bufs[g.Logits].Cols)
	if _, err := p.Logits(out); err != nil {
		t.Fatal(err)
	}
	return out
}
