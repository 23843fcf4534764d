// Package backends opens a gpu.Backend by name: the CPU fallback, WebGPU or
// Vulkan, or "auto", which picks a real GPU when there is one.
package backends

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/gpu/cpu"
	"github.com/gpurun/gpurun/gpu/kernels"
	"github.com/gpurun/gpurun/gpu/vulkan"
	"github.com/gpurun/gpurun/gpu/webgpu"
)

// Names lists the names Open accepts.
var Names = []string{"auto", "cpu", "webgpu", "vulkan"}

// Options are the settings of the backends that have any.
type Options struct {
	// CPU configures the CPU backend (its threads and math).
	CPU cpu.Options
}

// Open returns the named backend with default options. The caller closes it.
func Open(ctx context.Context, name string) (gpu.Backend, error) {
	return OpenWith(ctx, name, Options{})
}

// OpenWith returns the named backend configured by opts. The caller
// closes it.
//
// "auto" takes a Vulkan device that is a real GPU (discrete, integrated or
// virtual) and otherwise the CPU backend: a software Vulkan driver such as
// lavapipe is a correctness device, slower than the CPU path.
func OpenWith(ctx context.Context, name string, opts Options) (gpu.Backend, error) {
	switch name {
	case "cpu":
		return cpu.New(opts.CPU), nil
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
			if b, err := OpenWith(ctx, "vulkan", opts); err == nil {
				return b, nil
			}
		}
		return OpenWith(ctx, "cpu", opts)
	}
	return nil, fmt.Errorf("backends: unknown backend %q (want one of %v): %w", name, Names, gpu.ErrUnsupported)
}

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
