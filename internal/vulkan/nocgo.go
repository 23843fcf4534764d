//go:build !cgo

package vulkan

// The Vulkan backend calls the loader through cgo. A build without cgo
// (CGO_ENABLED=0, GOOS=js, or a machine whose Go found no C compiler, as
// on a Mac without Xcode's command line tools or Windows without MinGW)
// gets this stub instead: it lists no device and opens none, with an error
// that says why, and the CPU backend (and WebGPU where the binding builds)
// runs as usual.

import (
	"context"
	"fmt"

	"github.com/gpurun/gpurun/gpu"
)

// ErrNotBuilt is the error every entry point returns in a build without
// cgo; it matches gpu.ErrNoDevice under errors.Is.
var ErrNotBuilt = fmt.Errorf("vulkan: this gpurun was built without cgo, so without the Vulkan backend (rebuild with CGO_ENABLED=1 and a C compiler): %w", gpu.ErrNoDevice)

// Device is a Vulkan device; a build without cgo never opens one.
type Device struct {
	gpu.Device
}

// Open fails: no Vulkan in a build without cgo.
func Open(context.Context) (gpu.Device, error) { return nil, ErrNotBuilt }

// OpenDevice fails: no Vulkan in a build without cgo.
func OpenDevice(context.Context, int) (*Device, error) { return nil, ErrNotBuilt }

// Devices fails: no Vulkan in a build without cgo.
func Devices() ([]DeviceInfo, error) { return nil, ErrNotBuilt }

// PipelineCacheStats is empty: no device, no cache.
func (*Device) PipelineCacheStats() PipelineCacheStats { return PipelineCacheStats{} }
