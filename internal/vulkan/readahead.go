//go:build cgo

package vulkan

import (
	"fmt"

	"github.com/gpurun/gpurun/gpu"
)

// SubmitRead fails with gpu.ErrUnsupported: the Vulkan device does not
// read ahead (Caps().ReadAhead is false; its host-visible step tensor,
// NewHostBuffer, already makes a read cheap).
func (d *Device) SubmitRead(gpu.Buffer, int64, int, ...gpu.Commands) (gpu.PendingRead, error) {
	return nil, fmt.Errorf("vulkan: reads ahead: %w", gpu.ErrUnsupported)
}
