package compute

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/tuning"
	"github.com/gpurun/gpurun/shaders"
)

// countingDevice is a device whose NewKernel only counts its calls by
// kernel name (and fails for names in fail).
type countingDevice struct {
	gpu.Device
	mu    sync.Mutex
	calls map[string]int
	fail  map[string]bool
}

type fakeKernel struct{}

func (fakeKernel) Release() {}

func (d *countingDevice) Info() gpu.Info { return gpu.Info{Backend: "fake"} }

func (d *countingDevice) Caps() gpu.Caps { return gpu.Caps{} }

func (d *countingDevice) NewKernel(spec shaders.KernelSpec) (gpu.Kernel, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls[spec.Name]++
	if d.fail[spec.Name] {
		return nil, errors.New("driver refused")
	}
	return fakeKernel{}, nil
}

// TestCompileKernels: compileKernels compiles each kernel of a list once,
// however often it is listed and by however many callers at once, keeps
// no failed compile (a later call tries again), and stops at a done
// context.
func TestCompileKernels(t *testing.T) {
	dev := &countingDevice{calls: map[string]int{}, fail: map[string]bool{"norm": true}}
	b := NewWithOptions(dev, tuning.Options{}).(*backend)
	refs := []kernelRef{{name: "add"}, {name: "act"}, {name: "add"}, {name: "glu"}, {name: "act"}}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := b.compileKernels(context.Background(), refs); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, name := range []string{"add", "act", "glu"} {
		if n := dev.calls[name]; n != 1 {
			t.Errorf("%s compiled %d times, want once", name, n)
		}
	}
	if err := b.compileKernels(context.Background(), []kernelRef{{name: "norm"}}); err == nil {
		t.Error("a failed compile reported no error")
	}
	if err := b.compileKernels(context.Background(), []kernelRef{{name: "norm"}}); err == nil || dev.calls["norm"] != 2 {
		t.Errorf("after a failed compile: %v with %d calls, want the error again from a second call", err, dev.calls["norm"])
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.compileKernels(ctx, []kernelRef{{name: "last_row"}}); !errors.Is(err, context.Canceled) || dev.calls["last_row"] != 0 {
		t.Errorf("cancelled: %v with %d calls, want context.Canceled and none", err, dev.calls["last_row"])
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}
