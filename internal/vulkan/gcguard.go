//go:build cgo

package vulkan

import (
	"runtime/debug"
	"sync"

	vk "github.com/vulkan-go/vulkan"
)

// vulkan-go's wrappers for calls that take a slice of structs
// (vkCreateComputePipelines, vkUpdateDescriptorSets, vkQueueSubmit,
// vkCmdPipelineBarrier, vkCmdCopyBuffer) copy the
// slice into C memory whose only owner is a Go finalizer set on a variable
// that is already unreachable when the C call starts. A garbage collection
// during the call frees that memory while the driver reads it: lavapipe then
// crashed inside vkCreateComputePipelines (SIGSEGV at a small address) on a
// loaded machine, where pipeline compilation is long and collections are
// frequent. noGC holds the collector off for the duration of such a call;
// calls may nest and run concurrently, the last one out restores the
// previous GC percentage.
var gcHold struct {
	sync.Mutex
	n    int
	prev int
}

// noGC runs call with garbage collection disabled (and any collection in
// progress finished first, as debug.SetGCPercent(-1) guarantees).
func noGC[T any](call func() T) T {
	gcHold.Lock()
	if gcHold.n == 0 {
		gcHold.prev = debug.SetGCPercent(-1)
	}
	gcHold.n++
	gcHold.Unlock()
	defer func() {
		gcHold.Lock()
		gcHold.n--
		if gcHold.n == 0 {
			debug.SetGCPercent(gcHold.prev)
		}
		gcHold.Unlock()
	}()
	return call()
}

// copyBuffer is vkCmdCopyBuffer under noGC: its wrapper copies the regions
// into finalizer-owned C memory like the calls above.
func copyBuffer(cb vk.CommandBuffer, src, dst vk.Buffer, regions []vk.BufferCopy) {
	noGC(func() struct{} {
		vk.CmdCopyBuffer(cb, src, dst, uint32(len(regions)), regions)
		return struct{}{}
	})
}
