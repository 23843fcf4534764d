//go:build cgo

package vulkan

import (
	"fmt"
	"math"
	"unsafe"

	vk "github.com/vulkan-go/vulkan"

	"github.com/gpurun/gpurun/gpu"
)

// Timestamp records the device time into slot i of the device's query pool
// once all earlier commands have completed. Slots are shared by all lists
// of the device; ReadTimestamps reads slots [0, n).
func (c *commands) Timestamp(i int) error {
	if err := c.recording(); err != nil {
		return err
	}
	d := c.d
	if !d.info.Timestamps {
		return fmt.Errorf("vulkan: device %q cannot write timestamps on its compute queue: %w", d.info.Name, gpu.ErrUnsupported)
	}
	if i < 0 || i >= timestampSlots {
		return fmt.Errorf("vulkan: timestamp slot %d outside [0, %d): %w", i, timestampSlots, ErrInvalid)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	vk.CmdResetQueryPool(c.cb, d.queries, uint32(i), 1)
	vk.CmdWriteTimestamp(c.cb, vk.PipelineStageBottomOfPipeBit, d.queries, uint32(i))
	return nil
}

// ReadTimestamps waits for submitted work and returns slots [0, n) in
// nanoseconds of device time. A slot never written is an error.
func (d *Device) ReadTimestamps(n int) ([]uint64, error) {
	if !d.info.Timestamps {
		return nil, fmt.Errorf("vulkan: device %q has no timestamps: %w", d.info.Name, gpu.ErrUnsupported)
	}
	if n < 0 || n > timestampSlots {
		return nil, fmt.Errorf("vulkan: %d timestamps requested, the device keeps %d: %w", n, timestampSlots, ErrInvalid)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	if err := d.waitLocked(); err != nil {
		return nil, err
	}
	if n == 0 {
		return []uint64{}, nil
	}
	// Each slot is a 64-bit value followed by its availability word.
	raw := make([]uint64, 2*n)
	flags := vk.QueryResultFlags(vk.QueryResult64Bit | vk.QueryResultWithAvailabilityBit)
	res := vk.GetQueryPoolResults(d.dev, d.queries, 0, uint32(n), uint(len(raw)*8), unsafe.Pointer(&raw[0]), 16, flags)
	if res != vk.Success && res != vk.NotReady {
		return nil, check("vkGetQueryPoolResults", res)
	}
	mask := uint64(math.MaxUint64)
	if bits := d.info.TimestampBits; bits > 0 && bits < 64 {
		mask = 1<<bits - 1
	}
	out := make([]uint64, n)
	for i := range out {
		if raw[2*i+1] == 0 {
			return nil, fmt.Errorf("vulkan: timestamp slot %d was not written by any finished submission: %w", i, ErrInvalid)
		}
		out[i] = uint64(float64(raw[2*i]&mask) * d.info.TimestampPeriod)
	}
	return out, nil
}
