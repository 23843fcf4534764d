// Package backends opens a gpu.Backend by name: the CPU fallback, WebGPU or
// Vulkan, or "auto", which picks a real GPU when there is one.
package backends

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/gpu/cpu"
	"github.com/gpurun/gpurun/gpu/kernels"
	"github.com/gpurun/gpurun/gpu/vulkan"
	"github.com/gpurun/gpurun/gpu/webgpu"
)

// Names lists the names Open accepts.
var Names = []string{"auto", "cpu", "webgpu", "vulkan"}

// Open returns the named backend. The caller closes it.
//
// "auto" takes a Vulkan device that is a real GPU (discrete, integrated or
// virtual) and otherwise the CPU backend: a software Vulkan driver such as
// lavapipe is a correctness device, slower than the CPU path.
func Open(ctx context.Context, name string) (gpu.Backend, error) {
	switch name {
	case "cpu":
		return cpu.New(cpu.Options{}), nil
	case "webgpu":
		dev, err := webgpu.Open(ctx)
		if err != nil {
			return nil, err
		}
		return withDevice(kernels.New(dev), dev), nil
	case "vulkan":
		dev, err := vulkan.Open(ctx)
		if err != nil {
			return nil, err
		}
		return withDevice(kernels.New(dev), dev), nil
	case "auto", "":
		if hasRealGPU() {
			if b, err := Open(ctx, "vulkan"); err == nil {
				return b, nil
			}
		}
		return Open(ctx, "cpu")
	}
	return nil, unknownBackend(name)
}

// unknownBackend is the error for a name Open does not know; it matches
// gpu.ErrUnsupported under errors.Is.
type unknownBackend string

func (u unknownBackend) Error() string {
	return fmt.Sprintf("unknown backend %q (want one of %s)", string(u), strings.Join(Names, ", "))
}

func (u unknownBackend) Is(target error) bool { return target == gpu.ErrUnsupported }

func hasRealGPU() bool {
	devs, err := vulkan.Devices()
	if err != nil {
		return false
	}
	for _, d := range devs {
		switch d.Type {
		case gpu.Discrete, gpu.Integrated, gpu.Virtual:
			return true
		}
	}
	return false
}

// owned closes the device after the backend that runs on it.
type owned struct {
	gpu.Backend
	dev gpu.Device
}

func withDevice(b gpu.Backend, dev gpu.Device) gpu.Backend { return &owned{Backend: b, dev: dev} }

func (o *owned) Close() error {
	return errors.Join(o.Backend.Close(), o.dev.Close())
}
