package compute

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/arch"
	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/shaders"
	"github.com/gpurun/gpurun/tensors/model"
)

// TestNoDeviceTypeInSources: the package's sources (tests aside) never
// read a device's type: no selector .Type (gpu.Info's is the only one the
// planner could reach) and no gpu.DeviceType or its constants. Kernels are
// chosen by capabilities (caps) and shapes only, so a software driver runs
// what a GPU runs.
func TestNoDeviceTypeInSources(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	typeNames := []string{"DeviceType", "CPU", "Discrete", "Integrated", "Virtual", "Other"}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if sel.Sel.Name == "Type" {
				t.Errorf("%s: reads .Type: kernel choices may depend on capabilities and shapes only", fset.Position(sel.Pos()))
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "gpu" && slices.Contains(typeNames, sel.Sel.Name) {
				t.Errorf("%s: uses gpu.%s: kernel choices may depend on capabilities and shapes only", fset.Position(sel.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	if checked < 5 {
		t.Fatalf("checked %d source files: run from the package directory", checked)
	}
}

// TestPlanIndependentOfDeviceType compiles the same graphs on devices that
// differ only in their type (a CPU such as lavapipe, a discrete,
// integrated or virtual GPU) and requires the same planned dispatches:
// kernels, variants, grid sizes and parameters. The device is planDevice,
// which records nothing, so this runs without a GPU.
func TestPlanIndependentOfDeviceType(t *testing.T) {
	ctx := context.Background()
	stories, err := llama2c.Load(testmodels.Path(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	q8, err := gguf.Load(filepath.Join(testmodels.Path(t, "arch"), "llama-q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	models := map[string]*model.Checkpoint{"stories260K": stories, "llama-q8_0": q8}
	for _, dev := range []planDevice{
		{info: gpu.Info{Backend: "vulkan"}, caps: gpu.Caps{SubgroupSize: 32, F16Storage: true, F16Math: true, Timestamps: true, MaxStorageBuffers: 16}},
		{info: gpu.Info{Backend: "webgpu"}, caps: gpu.Caps{MaxStorageBuffers: 10}},
	} {
		for name, m := range models {
			var first []string
			for _, typ := range []gpu.DeviceType{gpu.CPU, gpu.Discrete, gpu.Integrated, gpu.Virtual, gpu.Other} {
				d := dev
				d.info.Type, d.caps.MaxStorageBinding = typ, 1<<27
				plans := planAll(t, ctx, &d, m)
				if first == nil {
					first = plans
					if len(first) == 0 {
						t.Fatal("no dispatches planned")
					}
					continue
				}
				if !slices.Equal(plans, first) {
					t.Errorf("%s on %s: the plan on a %s device differs from a %s device's", name, dev.info.Backend, typ, gpu.CPU)
				}
			}
		}
	}
}

// planAll compiles a decode step, a 7-token prefill and a batched step of
// m, fused, with f32 and f16 activations, and returns their dispatches.
func planAll(t *testing.T, ctx context.Context, dev gpu.Device, m *model.Checkpoint) []string {
	t.Helper()
	be := New(dev)
	defer be.Close()
	w, err := be.LoadWeights(ctx, m.Tensors)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	var out []string
	for _, o := range []arch.BuildOptions{{Tokens: 1}, {Tokens: 7}, {Tokens: 3, Batch: true}} {
		for _, half := range []bool{false, true} {
			o.MaxLen = 32
			g, err := arch.Build(&m.Config, o)
			if err != nil {
				t.Fatal(err)
			}
			g = gpu.Fuse(be, w, g)
			if half {
				fusion.HalfActivations(g)
			}
			var kvs []gpu.KVCache
			for range o.Tokens {
				kv, err := be.NewKVCache(g.KV)
				if err != nil {
					t.Fatal(err)
				}
				defer kv.Release()
				kvs = append(kvs, kv)
			}
			var p interface{ Release() }
			if o.Batch {
				p, err = be.CompileBatch(g, w, kvs)
			} else {
				p, err = be.Compile(g, w, kvs[0])
			}
			if err != nil {
				t.Fatal(err)
			}
			pr, ok := p.(*program)
			if !ok {
				t.Fatalf("compiled %T, want *program", p)
			}
			for _, it := range pr.items {
				out = append(out, fmt.Sprintf("%s.%s %d,%d,%d %+v", it.kernel, it.variant.Key, it.x, it.y, it.z, it.params))
			}
			p.Release()
		}
	}
	return out
}

// planDevice is a gpu.Device that plans and records nothing: buffers of
// the sizes asked for, kernels and command lists that do nothing.
type planDevice struct {
	info gpu.Info
	caps gpu.Caps
}

// planBuffer is a pointer, so that every buffer is its own map key (the
// planner keys buffers' activation types by them).
type planBuffer struct{ size int64 }

func (b *planBuffer) Size() int64 { return b.size }
func (*planBuffer) Release()      {}

type planKernel struct{}

func (planKernel) Release() {}

type planCommands struct{}

func (planCommands) Dispatch(gpu.Kernel, []gpu.Binding, int, int, int) error { return nil }
func (planCommands) Copy(gpu.Buffer, int64, gpu.Buffer, int64, int64) error  { return nil }
func (planCommands) Timestamp(int) error                                     { return nil }
func (planCommands) Finish() error                                           { return nil }
func (planCommands) Release()                                                {}

func (d *planDevice) Info() gpu.Info                               { return d.info }
func (d *planDevice) Caps() gpu.Caps                               { return d.caps }
func (d *planDevice) WaitContext(context.Context) error            { return nil }
func (d *planDevice) NewHostBuffer(size int64) (gpu.Buffer, error) { return &planBuffer{size}, nil }
func (d *planDevice) ReadTimestamps(n int) ([]uint64, error)       { return make([]uint64, n), nil }
func (d *planDevice) SubmitRead(gpu.Buffer, int64, int, ...gpu.Commands) (gpu.PendingRead, error) {
	return nil, gpu.ErrUnsupported
}
func (d *planDevice) MemoryUse() gpu.MemoryUse                           { return gpu.MemoryUse{} }
func (d *planDevice) ResetPeakMemory()                                   {}
func (d *planDevice) NewBuffer(size int64) (gpu.Buffer, error)           { return &planBuffer{size}, nil }
func (d *planDevice) Write(gpu.Buffer, int64, []byte) error              { return nil }
func (d *planDevice) Read(gpu.Buffer, int64, []byte) error               { return nil }
func (d *planDevice) NewKernel(s shaders.KernelSpec) (gpu.Kernel, error) { return planKernel{}, nil }
func (d *planDevice) NewCommands() (gpu.Commands, error)                 { return planCommands{}, nil }
func (d *planDevice) Submit(...gpu.Commands) error                       { return nil }
func (d *planDevice) Wait() error                                        { return nil }
func (d *planDevice) Close() error                                       { return nil }
