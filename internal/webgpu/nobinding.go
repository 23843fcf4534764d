//go:build !cgo && !js

package webgpu

// Natively the binding (github.com/cogentcore/webgpu) calls wgpu-native
// through cgo. A native build without cgo (CGO_ENABLED=0, or a machine
// whose Go found no C compiler) gets this stub: no adapter, no device, and
// an error that says why.

import (
	"context"
	"fmt"

	"github.com/gpurun/gpurun/gpu"
)

// ErrNotBuilt is the error every entry point returns in a native build
// without cgo; it matches gpu.ErrNoDevice under errors.Is.
var ErrNotBuilt = fmt.Errorf("webgpu: this gpurun was built without cgo, so without wgpu-native (rebuild with CGO_ENABLED=1 and a C compiler): %w", gpu.ErrNoDevice)

// Device is a WebGPU device; a build without cgo never opens one.
type Device struct {
	gpu.Device
}

// Open fails: no wgpu-native in a build without cgo.
func Open(context.Context) (gpu.Device, error) { return nil, ErrNotBuilt }

// OpenDevice fails: no wgpu-native in a build without cgo.
func OpenDevice(context.Context) (*Device, error) { return nil, ErrNotBuilt }

// OpenSelected fails: no wgpu-native in a build without cgo.
func OpenSelected(context.Context, string) (*Device, error) { return nil, ErrNotBuilt }

// Adapters fails: no wgpu-native in a build without cgo.
func Adapters() ([]AdapterInfo, error) { return nil, ErrNotBuilt }
