package gpurun

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gputest"
)

// TestDevicesAndMemory: the GPU backends open by default and by index, and
// report the device's memory (WebGPU's taken from the Vulkan device of the
// same name).
func TestDevicesAndMemory(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{"vulkan", "webgpu"} {
		t.Run(name, func(t *testing.T) {
			b, err := OpenBackend(ctx, name, BackendOptions{})
			if err != nil {
				if errors.Is(err, gpu.ErrNoDevice) {
					gputest.NoDevice(t, name, err)
				}
				t.Fatal(err)
			}
			info := b.Info()
			b.Close()
			if info.MemoryBytes <= 0 {
				t.Errorf("%s: %s reports no memory size", name, info.Name)
			}
			b, err = OpenBackend(ctx, name, BackendOptions{Device: "0"})
			if err != nil {
				t.Fatal(err)
			}
			if got := b.Info().Name; got != info.Name {
				t.Errorf("device 0 is %q, the default %q (one device here)", got, info.Name)
			}
			b.Close()
			if _, err := OpenBackend(ctx, name, BackendOptions{Device: "no such device"}); !errors.Is(err, gpu.ErrNoDevice) || !strings.Contains(err.Error(), info.Name) {
				t.Errorf("unknown device: %v (want a list naming %s)", err, info.Name)
			}
		})
	}
}

func TestBadNames(t *testing.T) {
	ctx := context.Background()
	_, err := OpenBackend(ctx, "gpu", BackendOptions{})
	if !errors.Is(err, gpu.ErrUnsupported) || err.Error() != `unknown backend "gpu" (want one of auto, cpu, webgpu, vulkan)` {
		t.Errorf("unknown backend: %v", err)
	}
	if _, err := OpenBackend(ctx, "auto", BackendOptions{Device: "0"}); err == nil {
		t.Error("auto with a device: want an error")
	}
	if _, err := OpenBackend(ctx, "cpu", BackendOptions{Device: "1"}); !errors.Is(err, gpu.ErrNoDevice) {
		t.Errorf("cpu device 1: %v", err)
	}
}

// TestFusionSupportForwarded: a backend opened here answers the fusion
// pass as the backend under it does (gpu.Fuse sees through the wrapper).
func TestFusionSupportForwarded(t *testing.T) {
	b := withDevice(fusionBackend{}, nil)
	if _, ok := gpu.Backend(b).(gpu.FusionBackend); !ok {
		t.Fatal("the wrapper hides gpu.FusionBackend")
	}
	if s := b.FusionSupport(nil); s == nil || s.Fuses(nil, nil) {
		t.Errorf("FusionSupport %v: not the wrapped backend's", s)
	}
	if s := withDevice(plainBackend{}, nil).FusionSupport(nil); s != nil {
		t.Errorf("FusionSupport of a backend without one: %v, want nil", s)
	}
}

type plainBackend struct{ gpu.Backend }

type fusionBackend struct{ gpu.Backend }

func (fusionBackend) FusionSupport(gpu.Weights) fusion.Support { return refuseAll{} }

type refuseAll struct{}

func (refuseAll) Fuses(*fusion.Graph, fusion.Op) bool { return false }
