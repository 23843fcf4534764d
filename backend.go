package gpurun

// This file chooses and opens the backends: pipeline runs a model on
// whichever gpu.Backend it is given, and the module root is where the
// default ("auto") and the names live.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/backend/compute"
	"github.com/gpurun/gpurun/internal/backend/cpu"
	"github.com/gpurun/gpurun/internal/vulkan"
	"github.com/gpurun/gpurun/internal/webgpu"
)

// BackendNames lists the names OpenBackend (and WithBackend) accept.
var BackendNames = []string{"auto", "cpu", "webgpu", "vulkan"}

// DefaultCPUMath is the CPU backend's arithmetic unless told otherwise
// (WithCPUMath, BackendOptions.CPU): dynamic quantization, measured several
// times faster than exact math for Q8_0 and Q4_0 models on AVX2 and closer
// to llama.cpp's logits.
const DefaultCPUMath = cpu.MathDynamic

// BackendOptions configure OpenBackend.
type BackendOptions struct {
	// Device selects the device among the backend's: its index ("0", "1",
	// ... as `gpurun devices` lists them) or a case-insensitive part of its
	// name; "" picks. The CPU backend has one device, "0" or "cpu"; "auto"
	// takes no selection.
	Device string
	// CPU configures the CPU backend (its threads and math; the zero value
	// is exact math: set Math to DefaultCPUMath for gpurun's default).
	CPU cpu.Options
}

// OpenBackend opens the named backend (one of BackendNames) for
// pipeline.Options.Backend or WithGPUBackend. The caller closes it.
//
// "auto" (or "") takes a Vulkan device that is a real GPU (discrete,
// integrated or virtual) and otherwise the CPU backend: a software Vulkan
// driver such as lavapipe is a correctness device, slower than the CPU
// path.
func OpenBackend(ctx context.Context, name string, opts BackendOptions) (gpu.Backend, error) {
	if sel := opts.Device; sel != "" {
		switch name {
		case "cpu":
			if sel != "0" && !strings.EqualFold(sel, "cpu") {
				return nil, fmt.Errorf("gpurun: the cpu backend has one device, 0, not %q: %w", sel, gpu.ErrNoDevice)
			}
			return cpu.New(opts.CPU), nil
		case "webgpu":
			dev, err := webgpu.OpenSelected(ctx, sel)
			if err != nil {
				return nil, err
			}
			return openWebGPU(dev), nil
		case "vulkan":
			index, err := vulkanIndex(sel)
			if err != nil {
				return nil, err
			}
			dev, err := vulkan.OpenDevice(ctx, index)
			if err != nil {
				return nil, err
			}
			return openCompute(dev), nil
		case "auto", "":
			return nil, fmt.Errorf("gpurun: a device is chosen within a backend: name cpu, webgpu or vulkan with it: %w", gpu.ErrUnsupported)
		}
		return nil, unknownBackend(name)
	}
	switch name {
	case "cpu":
		return cpu.New(opts.CPU), nil
	case "webgpu":
		dev, err := webgpu.Open(ctx)
		if err != nil {
			return nil, err
		}
		return openWebGPU(dev), nil
	case "vulkan":
		dev, err := vulkan.Open(ctx)
		if err != nil {
			return nil, err
		}
		return openCompute(dev), nil
	case "auto", "":
		if hasRealGPU() {
			if b, err := OpenBackend(ctx, "vulkan", opts); err == nil {
				return b, nil
			}
		}
		return OpenBackend(ctx, "cpu", opts)
	}
	return nil, unknownBackend(name)
}

// unknownBackend is the error for a name OpenBackend does not know; it matches
// gpu.ErrUnsupported under errors.Is.
type unknownBackend string

func (u unknownBackend) Error() string {
	return fmt.Sprintf("unknown backend %q (want one of %s)", string(u), strings.Join(BackendNames, ", "))
}

func (u unknownBackend) Is(target error) bool { return target == gpu.ErrUnsupported }

// vulkanIndex resolves a device selection among vulkan.Devices.
func vulkanIndex(sel string) (int, error) {
	devs, err := vulkan.Devices()
	if err != nil {
		return 0, err
	}
	if i, err := strconv.Atoi(sel); err == nil {
		if i < 0 || i >= len(devs) {
			return 0, fmt.Errorf("vulkan: no device %d: %d devices (%s): %w", i, len(devs), deviceList(devs), gpu.ErrNoDevice)
		}
		return i, nil
	}
	for i, d := range devs {
		if strings.Contains(strings.ToLower(d.Name), strings.ToLower(sel)) {
			return i, nil
		}
	}
	return 0, fmt.Errorf("vulkan: no device named %q among %s: %w", sel, deviceList(devs), gpu.ErrNoDevice)
}

func deviceList(devs []vulkan.DeviceInfo) string {
	var names []string
	for i, d := range devs {
		names = append(names, fmt.Sprintf("%d: %s", i, d.Name))
	}
	return strings.Join(names, ", ")
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

// owned is a backend that owns the device it runs on: it is the backend
// (every method, caps included, is the backend's own) and closes the
// device after it.
type owned struct {
	gpu.Backend
	dev gpu.Device
}

func withDevice(b gpu.Backend, dev gpu.Device) *owned { return &owned{Backend: b, dev: dev} }

func (o *owned) Close() error {
	return errors.Join(o.Backend.Close(), o.dev.Close())
}

// openCompute opens the GPU backend on dev, which it then owns.
func openCompute(dev gpu.Device) gpu.Backend { return withDevice(compute.New(dev), dev) }

// sizedDevice is a device whose Info reports memory found elsewhere (its
// own Info reports none).
type sizedDevice struct {
	gpu.Device
	memory int64
}

func (d sizedDevice) Info() gpu.Info {
	info := d.Device.Info()
	info.MemoryBytes = d.memory
	return info
}

// openWebGPU opens the GPU backend on a WebGPU device, with the device's
// memory, which WebGPU does not report, taken from the Vulkan device of
// the same name where there is one (a WebGPU Vulkan adapter; a Metal or
// D3D12 one may have a Vulkan twin, else its memory stays unknown).
func openWebGPU(dev gpu.Device) gpu.Backend {
	if info := dev.Info(); info.MemoryBytes == 0 {
		if devs, err := vulkan.Devices(); err == nil {
			for _, d := range devs {
				if d.Name == info.Name {
					return withDevice(compute.New(sizedDevice{dev, d.MemoryBytes}), dev)
				}
			}
		}
	}
	return openCompute(dev)
}

// PipelineCacheStats reports the pipeline cache of b's device where it
// keeps one (a Vulkan device: see vulkan.PipelineCacheStats); false
// otherwise (the CPU backend, WebGPU, which has none).
func PipelineCacheStats(b gpu.Backend) (vulkan.PipelineCacheStats, bool) {
	o, ok := b.(*owned)
	if !ok {
		return vulkan.PipelineCacheStats{}, false
	}
	d, ok := o.dev.(*vulkan.Device)
	if !ok {
		return vulkan.PipelineCacheStats{}, false
	}
	return d.PipelineCacheStats(), true
}
