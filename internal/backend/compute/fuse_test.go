package compute

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors/model"
)

// TestFusionDecidedOnce: graphs fused for the backend (gpu.Fuse, which
// asks FusionSupport) compile, every fused op run whole, for every model
// of the test data (stories260K, the arch models, the llama.cpp block-type
// mixes) in decode, prefill and batched steps, on a device with subgroups
// and f16 and on one without, and on a device under 12 storage buffers
// per stage (no fused QKV kernel); yet they are fused (fewer ops than
// unfused). The same graphs fused without asking (fusion.Fuse) hold fused
// ops no kernel runs whole for some models (block-type weights: no GLU
// kernel, no norm prologue): those fail to compile with
// gpu.ErrUnsupported naming the op, which the support keeps out. Planned
// on planDevice: no GPU needed.
func TestFusionDecidedOnce(t *testing.T) {
	ctx := context.Background()
	models := map[string]*model.Checkpoint{}
	ck, err := llama2c.Load(testmodels.Path(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	models["stories260K"] = ck
	archFiles, _ := filepath.Glob(filepath.Join(testmodels.Path(t, "arch"), "*.gguf"))
	mixFiles, _ := filepath.Glob(filepath.Join(testmodels.Root(t), "testdata", "gguf", "*.gguf"))
	if len(archFiles) < 5 || len(mixFiles) < 5 {
		t.Fatalf("%d arch models, %d block-type mixes: test data missing", len(archFiles), len(mixFiles))
	}
	for _, f := range append(archFiles, mixFiles...) {
		ck, err := gguf.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		models[strings.TrimSuffix(filepath.Base(f), ".gguf")] = ck
	}
	unasked := 0
	for _, dev := range []planDevice{
		{info: gpu.Info{Backend: "vulkan"}, caps: gpu.Caps{SubgroupSize: 32, F16Storage: true, F16Math: true, MaxStorageBuffers: 16}},
		{info: gpu.Info{Backend: "webgpu"}, caps: gpu.Caps{MaxStorageBuffers: 10}},
	} {
		info := dev.info
		be := New(&dev)
		for name, ck := range models {
			w, err := be.LoadWeights(ctx, ck.Tensors)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range []arch.BuildOptions{{Tokens: 1}, {Tokens: 7}, {Tokens: 3, Batch: true}} {
				o.MaxLen = 32
				g, err := arch.Build(&ck.Config, o)
				if err != nil {
					t.Fatal(err)
				}
				fused := gpu.Fuse(be, w, g)
				if len(fused.Ops) >= len(g.Ops) {
					t.Errorf("%s %+v on %s: %d ops fused, %d unfused", name, o, info.Backend, len(fused.Ops), len(g.Ops))
				}
				if err := compileGraph(t, be, w, fused, o.Batch); err != nil {
					t.Errorf("%s %+v on %s: a graph fused for the planner: %v", name, o, info.Backend, err)
				}
				err = compileGraph(t, be, w, fusion.Fuse(g), o.Batch)
				switch {
				case err == nil:
				case errors.Is(err, gpu.ErrUnsupported) && strings.Contains(err.Error(), "no kernel runs this"):
					unasked++
				default:
					t.Errorf("%s %+v on %s: fused without asking: %v, want nil or gpu.ErrUnsupported", name, o, info.Backend, err)
				}
			}
			w.Release()
		}
		be.Close()
	}
	t.Logf("%d models; fused without asking the backend, %d of their graphs hold a fused op the kernels do not run whole", len(models), unasked)
	if unasked == 0 {
		t.Errorf("every graph fused without the backend's support compiled: the test checks nothing")
	}
}

// compileGraph compiles g on be and returns Compile's (or CompileBatch's)
// error.
func compileGraph(t *testing.T, be gpu.Backend, w gpu.Weights, g *fusion.Graph, batch bool) error {
	t.Helper()
	var kvs []gpu.KVCache
	for range g.Tokens {
		kv, err := be.NewKVCache(g.KV)
		if err != nil {
			t.Fatal(err)
		}
		defer kv.Release()
		kvs = append(kvs, kv)
	}
	var p interface{ Release() }
	var err error
	if batch {
		p, err = be.CompileBatch(g, w, kvs)
	} else {
		p, err = be.Compile(g, w, kvs[0])
	}
	if err != nil {
		return err
	}
	p.Release()
	return nil
}

// TestRopeKVFitsBrowsers: lanes_rope_kv fits the 10 storage buffers per
// stage browsers' adapters offer (Chromium's: the page fuses Q, K and V)
// and not WebGPU's default 8, read from the kernel's own bindings.
func TestRopeKVFitsBrowsers(t *testing.T) {
	for _, tc := range []struct {
		storage int
		want    bool
	}{{0, true}, {8, false}, {9, true}, {10, true}, {31, true}} {
		if got := ropeKVFits(caps{storageBuffers: tc.storage}); got != tc.want {
			t.Errorf("%d storage buffers: fits %v, want %v", tc.storage, got, tc.want)
		}
	}
}
