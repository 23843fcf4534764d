package compute_test

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/tensors"
)

// The devices every GPU test runs on (compute.TestDevices). One device of
// each serves the whole test binary: opening one costs more than most op
// tests.
var devices = testDevices()

// testDevices is compute.TestDevices, but in a driver rerun (SwiftShader,
// swiftshader_test.go) the Vulkan backend's device alone: the rerun is
// there for a second driver's compiler and subgroup size, which the raw
// Vulkan backend's SPIR-V (the kernels shipped) meets as wgpu's would,
// at half the time. Chromium's Dawn runs the kernels on SwiftShader in
// cmd/gpurun-web's TestBrowser.
func testDevices() []compute.TestDevice {
	if gputest.RerunDriver() == "" {
		return compute.TestDevices
	}
	for _, d := range compute.TestDevices {
		if d.Name == "vulkan" {
			return []compute.TestDevice{d}
		}
	}
	return compute.TestDevices
}

type opened struct {
	once sync.Once
	dev  gpu.Device
	err  error
}

var openDevices = make([]opened, len(devices))

func deviceAt(t testing.TB, i int) gpu.Device {
	t.Helper()
	o := &openDevices[i]
	o.once.Do(func() { o.dev, o.err = devices[i].Open(context.Background()) })
	gputest.NoDevice(t, devices[i].Name, o.err)
	gputest.CheckDriver(t, o.dev.Info().Name, o.dev.Info().Driver)
	return o.dev
}

// device is the WebGPU device, for tests and benchmarks of one device.
func device(t testing.TB) gpu.Device { return deviceAt(t, 0) }

// forEachDevice runs f as a subtest per device.
func forEachDevice(t *testing.T, f func(t *testing.T, dev gpu.Device)) {
	t.Helper()
	for i, d := range devices {
		t.Run(d.Name, func(t *testing.T) { f(t, deviceAt(t, i)) })
	}
}

// onFirstDevice runs f on the first device only: for tests that show a
// check can fail (an ablation of what the kernels compute), which the
// shared WGSL makes the same on every device; the checks themselves run
// on every device.
func onFirstDevice(t *testing.T, f func(t *testing.T, dev gpu.Device)) {
	t.Helper()
	if len(devices) > 0 {
		t.Run(devices[0].Name, func(t *testing.T) { f(t, deviceAt(t, 0)) })
	}
}

// Backends are shared per device and options for the whole test binary:
// a backend compiles each kernel once, and pipeline compilation (naga plus
// the driver's JIT) costs more than most op tests.
var (
	backendsMu sync.Mutex
	backends   = map[backendKey]gpu.Backend{}
)

type backendKey struct {
	dev  gpu.Device
	opts compute.Options
}

func backendOn(t testing.TB, dev gpu.Device, opts compute.Options) gpu.Backend {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	k := backendKey{dev, opts}
	if be, ok := backends[k]; ok {
		return be
	}
	be := compute.NewWithOptions(dev, opts)
	backends[k] = be
	return be
}

func gpuBackend(t testing.TB, opts compute.Options) gpu.Backend {
	return backendOn(t, device(t), opts)
}

// randF32 returns n values uniform in [-scale, scale).
func randF32(r *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (r.Float32()*2 - 1) * scale
	}
	return v
}

// tensorOf builds a [rows, cols] tensor of dtype dt. Float types store
// random values; int8 and int4 store random raw bytes (every code, -128 and
// -8 included) with random scales of scaleType, one per row (block 0) or per
// block.
func tensorOf(t testing.TB, r *rand.Rand, name string, rows, cols int, dt tensors.DType, block int, scaleType tensors.DType) *tensors.Tensor {
	t.Helper()
	shape := []int{rows, cols}
	if !dt.Quantized() {
		w, err := tensors.FromF32(name, shape, randF32(r, rows*cols, 1), dt)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	data := make([]byte, dt.ByteSize(rows*cols))
	for i := range data {
		data[i] = byte(r.IntN(256))
	}
	nblk := 1
	sshape := []int{rows}
	if block > 0 {
		nblk = cols / block
		sshape = []int{rows, nblk}
	}
	q := 1.0 / 127
	if dt == tensors.I4 {
		q = 1.0 / 7
	}
	scales := make([]float32, rows*nblk)
	for i := range scales {
		scales[i] = float32(q * (0.5 + r.Float64()))
	}
	st, err := tensors.FromF32(name+"_quantized_scale", sshape, scales, scaleType)
	if err != nil {
		t.Fatal(err)
	}
	w := &tensors.Tensor{Name: name, DType: dt, Shape: shape, Data: data, Scales: st}
	if err := w.Check(); err != nil {
		t.Fatal(err)
	}
	return w
}

func vecOf(t testing.TB, r *rand.Rand, name string, n int, scale, offset float32) *tensors.Tensor {
	t.Helper()
	v := randF32(r, n, scale)
	for i := range v {
		v[i] += offset
	}
	w, err := tensors.FromF32(name, []int{n}, v, tensors.F32)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// step is one Run of a test.
type step struct {
	tokens []int32
	pos    int
}

// tolerance: |gpu - cpu| <= abs + rel*|cpu|.
type tolerance struct{ abs, rel float64 }

// compare runs g on the CPU reference and on every GPU device for every
// step and checks the logits of each step.
func compare(t *testing.T, g *fusion.Graph, ws []*tensors.Tensor, steps []step, tol tolerance, opts compute.Options) {
	t.Helper()
	ctx := context.Background()
	ref := runAll(t, ctx, cpu.New(cpu.Options{Threads: 1}), g, ws, steps)
	forEachDevice(t, func(t *testing.T, dev gpu.Device) {
		got := runAll(t, ctx, backendOn(t, dev, opts), g, ws, steps)
		for s := range steps {
			if len(got[s]) != len(ref[s]) {
				t.Fatalf("step %d: %d logits, cpu %d", s, len(got[s]), len(ref[s]))
			}
			for i := range ref[s] {
				d := math.Abs(float64(got[s][i]) - float64(ref[s][i]))
				lim := tol.abs + tol.rel*math.Abs(float64(ref[s][i]))
				if !(d <= lim) {
					t.Fatalf("step %d: logit %d: gpu %v, cpu %v (diff %.3g > %.3g)", s, i, got[s][i], ref[s][i], d, lim)
				}
			}
		}
	})
}

func runAll(t *testing.T, ctx context.Context, be gpu.Backend, g *fusion.Graph, ws []*tensors.Tensor, steps []step) [][]float32 {
	t.Helper()
	w, err := be.LoadWeights(ctx, ws)
	if err != nil {
		t.Fatalf("%s: load: %v", be.Info().Backend, err)
	}
	defer w.Release()
	var kv gpu.KVCache
	if g.KV.Layers > 0 {
		kv, err = be.NewKVCache(g.KV)
		if err != nil {
			t.Fatalf("%s: kv: %v", be.Info().Backend, err)
		}
		defer kv.Release()
	}
	p, err := be.Compile(g, w, kv)
	if err != nil {
		t.Fatalf("%s: compile: %v", be.Info().Backend, err)
	}
	defer p.Release()
	var out [][]float32
	info := g.Bufs[g.Logits]
	for _, s := range steps {
		if err := p.Run(ctx, s.tokens, s.pos); err != nil {
			t.Fatalf("%s: run: %v", be.Info().Backend, err)
		}
		dst := make([]float32, info.Rows*info.Cols)
		n, err := p.Logits(dst)
		if err != nil {
			t.Fatalf("%s: logits: %v", be.Info().Backend, err)
		}
		out = append(out, dst[:n])
	}
	return out
}

// mustParse returns v, panicking on err (fusion.Parse* of a test's names).
func mustParse[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// compiled loads ts on be and compiles g over them (and kv); both are
// released when tb's test ends.
func compiled(tb testing.TB, be gpu.Backend, g *fusion.Graph, ts []*tensors.Tensor, kv gpu.KVCache) gpu.Program {
	tb.Helper()
	ws, err := be.LoadWeights(context.Background(), ts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(ws.Release)
	return compiledOn(tb, be, g, ws, kv)
}

// fusedCompiled is compiled for a model's graph as the pipeline runs it:
// fused for be (gpu.Fuse) over a new cache of the graph's shape.
func fusedCompiled(tb testing.TB, be gpu.Backend, g *fusion.Graph, ts []*tensors.Tensor) gpu.Program {
	tb.Helper()
	ws, err := be.LoadWeights(context.Background(), ts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(ws.Release)
	kv, err := be.NewKVCache(g.KV)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(kv.Release)
	return compiledOn(tb, be, gpu.Fuse(be, ws, g), ws, kv)
}

func compiledOn(tb testing.TB, be gpu.Backend, g *fusion.Graph, ws gpu.Weights, kv gpu.KVCache) gpu.Program {
	tb.Helper()
	p, err := be.Compile(g, ws, kv)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Release)
	return p
}

// timeRuns runs p on ids at pos once (a warm-up, waited for by reading its
// logits into out), then b.N times on the clock, waiting for the last the
// same way, and returns the seconds per run.
func timeRuns(b *testing.B, p gpu.Program, ids []int32, pos int, out []float32) float64 {
	b.Helper()
	ctx := context.Background()
	run := func() {
		if err := p.Run(ctx, ids, pos); err != nil {
			b.Fatal(err)
		}
	}
	run()
	if _, err := p.Logits(out); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		run()
	}
	if _, err := p.Logits(out); err != nil { // waits for the queue
		b.Fatal(err)
	}
	b.StopTimer()
	return b.Elapsed().Seconds() / float64(b.N)
}
