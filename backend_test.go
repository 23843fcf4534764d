package gpurun

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/cpu"
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

// TestOwnedIsTheBackend: a backend opened on a device answers with the
// backend's own methods (its caps and fusion support: the wrapper forwards
// nothing by hand, so it hides and claims nothing), and Close closes the
// backend, then the device.
func TestOwnedIsTheBackend(t *testing.T) {
	var closed []string
	inner := closeLog{Backend: cpu.New(cpu.Options{Math: cpu.MathDynamic}), log: &closed}
	b := withDevice(inner, deviceLog{log: &closed})
	if got, want := b.Caps(), inner.Caps(); got != want {
		t.Errorf("Caps %+v, want the backend's %+v", got, want)
	}
	if !b.Caps().HalfLoRA || b.Caps().MaxSteps != 0 {
		t.Errorf("Caps %+v: not the dynamic-math CPU backend's", b.Caps())
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(closed, ",") != "backend,device" {
		t.Errorf("closed %v, want the backend, then the device", closed)
	}
}

type closeLog struct {
	gpu.Backend
	log *[]string
}

func (c closeLog) Close() error {
	*c.log = append(*c.log, "backend")
	return c.Backend.Close()
}

type deviceLog struct {
	gpu.Device
	log *[]string
}

func (d deviceLog) Close() error {
	*d.log = append(*d.log, "device")
	return nil
}
