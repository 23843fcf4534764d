package compute

import (
	"context"

	"github.com/gpurun/gpurun/gpu"
)

// waitSubmitted waits for the work just submitted (gpu.Device.WaitContext),
// so that a cancelled ctx ends the wait for a long submission at once
// instead of when the device finishes; the readback that follows then
// finds the work done. The host waits for a run before the next one anyway (its
// step tensor is the next run's input), so waiting here costs nothing.
func waitSubmitted(ctx context.Context, dev gpu.Device) error {
	return dev.WaitContext(ctx)
}
