// Package memcount counts the device memory a GPU device allocates, for
// gpu.Device.MemoryUse.
package memcount

import (
	"sync/atomic"

	"github.com/gpurun/gpurun/gpu"
)

// Counter holds the bytes allocated now and the most held at once. The
// zero value is ready; it is safe for concurrent use.
type Counter struct {
	current atomic.Int64
	peak    atomic.Int64
}

// Add records an allocation of n bytes.
func (c *Counter) Add(n int64) {
	cur := c.current.Add(n)
	for {
		p := c.peak.Load()
		if cur <= p || c.peak.CompareAndSwap(p, cur) {
			return
		}
	}
}

// Sub records that n bytes were freed.
func (c *Counter) Sub(n int64) { c.current.Add(-n) }

// Use is the current and peak allocation.
func (c *Counter) Use() gpu.MemoryUse {
	return gpu.MemoryUse{Current: c.current.Load(), Peak: c.peak.Load()}
}

// ResetPeak makes the peak the current allocation.
func (c *Counter) ResetPeak() { c.peak.Store(c.current.Load()) }
