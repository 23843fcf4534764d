//go:build cgo

package vulkan

/*
#include "vkext.h"
*/
import "C"

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unsafe"

	vk "github.com/vulkan-go/vulkan"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/memcount"
)

// waitTimeout bounds the wait for each submission, counted from the end of
// the one before it (submissions run in order on the one queue), so a lost
// device or a runaway kernel becomes an error instead of a hang while a
// queue of long but progressing submissions does not. On a software driver
// (a device of type cpu, such as lavapipe, whose threads run in this
// process) the wait goes on past it as long as the process keeps working:
// a long submission on a slow, loaded host is progress, not a hang; there
// maxSoftwareWait is the bound.
const (
	waitTimeout     = 5 * time.Minute
	maxSoftwareWait = time.Hour
	// pollSlice is how often a cancellable wait checks its context.
	pollSlice = 10 * time.Millisecond
)

// timestampSlots is the capacity of the device's timestamp query pool.
const timestampSlots = 1024

// Device is a Vulkan logical device with one compute queue. It implements
// gpu.Device. All methods are safe for concurrent
// use; a single Commands list must be recorded by one goroutine at a time.
type Device struct {
	phys  *physical
	info  DeviceInfo
	dev   vk.Device
	queue vk.Queue

	mapped      bool   // buffers are persistently mapped (no staging)
	bufferType  uint32 // memory type index for buffers
	stagingType uint32 // host-visible coherent type for the staging buffer

	// mu serializes queue access and guards everything below it.
	mu        sync.Mutex
	closed    bool
	pending   []submission // submitted, not yet known complete
	idle      []vk.Fence   // unsignaled, reusable
	xferPool  vk.CommandPool
	staging   *buffer
	queries   vk.QueryPool
	buffers   map[*buffer]struct{}
	kernels   map[*kernel]struct{}
	commands  map[*commands]struct{}
	readBufs  []*readBuf // read-back buffers of reads ahead (readahead.go)
	forceCopy bool       // tests: exercise the staging path on unified memory

	mem memcount.Counter // bytes of device memory allocated

	// creating counts the kernels being created outside mu (NewKernel),
	// which Close waits for before destroying the device.
	creating sync.WaitGroup

	pcache *pipelineCache // set by init
	calls  calls          // entry points called through vkcalls.c
}

var _ gpu.Device = (*Device)(nil)

// MemoryUse is the memory of the buffers (staging included) this device
// allocated.
func (d *Device) MemoryUse() gpu.MemoryUse { return d.mem.Use() }

// ResetPeakMemory makes the peak the current allocation.
func (d *Device) ResetPeakMemory() { d.mem.ResetPeak() }

// Open opens the device gpu.DeviceEnv (GPURUN_DEVICE) names where it is
// set, else the best Vulkan device (discrete, then integrated, virtual,
// CPU). Without a loader, driver or device the error wraps gpu.ErrNoDevice.
func Open(ctx context.Context) (gpu.Device, error) {
	d, err := OpenDevice(ctx, -1)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// OpenDevice opens the physical device at index (as listed by Devices), or
// Open's choice when index < 0.
func OpenDevice(ctx context.Context, index int) (*Device, error) {
	return openDevice(ctx, index, false)
}

func openDevice(ctx context.Context, index int, forceStaging bool) (*Device, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	in, phys, err := instanceDevices()
	if err != nil {
		return nil, err
	}
	p, err := pick(phys, index)
	if err != nil {
		return nil, err
	}
	d := &Device{
		phys:      p,
		info:      p.info,
		buffers:   map[*buffer]struct{}{},
		kernels:   map[*kernel]struct{}{},
		commands:  map[*commands]struct{}{},
		forceCopy: forceStaging,
	}
	var cdev C.gr_device
	res := C.gr_create_device(C.gr_instance(unsafe.Pointer(in.handle)), C.gr_physical_device(unsafe.Pointer(p.handle)),
		C.uint32_t(p.api), C.uint32_t(p.family), &cdev)
	if err := check("vkCreateDevice", vk.Result(res)); err != nil {
		return nil, fmt.Errorf("%w: %w", err, gpu.ErrNoDevice)
	}
	d.dev = vk.Device(unsafe.Pointer(cdev))
	if d.calls, err = loadCalls(in.handle, d.dev); err != nil {
		vk.DestroyDevice(d.dev, nil)
		return nil, err
	}
	var q vk.Queue
	vk.GetDeviceQueue(d.dev, p.family, 0, &q)
	d.queue = q
	if err := d.init(); err != nil {
		d.destroy()
		return nil, err
	}
	return d, nil
}

// init chooses memory types and creates the device-wide objects.
func (d *Device) init() error {
	p := d.phys
	// Learn which memory types a storage buffer may use from a probe buffer.
	probe, err := d.createRawBuffer(16)
	if err != nil {
		return err
	}
	var req vk.MemoryRequirements
	vk.GetBufferMemoryRequirements(d.dev, probe, &req)
	req.Deref()
	vk.DestroyBuffer(d.dev, probe, nil)

	if t, ok := p.hostMappedType(req.MemoryTypeBits); ok && !d.forceCopy {
		d.mapped, d.bufferType, d.stagingType = true, t, t
	} else {
		t, ok := p.memoryType(req.MemoryTypeBits, vk.MemoryPropertyFlags(vk.MemoryPropertyDeviceLocalBit))
		if !ok {
			t, ok = p.memoryType(req.MemoryTypeBits, 0)
		}
		s, sok := p.memoryType(req.MemoryTypeBits, vk.MemoryPropertyFlags(vk.MemoryPropertyHostVisibleBit|vk.MemoryPropertyHostCoherentBit))
		if !ok || !sok {
			return fmt.Errorf("vulkan: no usable memory type for storage buffers: %w", gpu.ErrNoDevice)
		}
		d.bufferType, d.stagingType = t, s
	}
	d.info.UnifiedMemory = d.mapped
	if err := d.openPipelineCache(); err != nil {
		return err
	}

	pool, res := d.calls.createCommandPool(d.dev, vk.CommandPoolCreateTransientBit|vk.CommandPoolCreateResetCommandBufferBit, p.family)
	if err := check("vkCreateCommandPool", res); err != nil {
		return err
	}
	d.xferPool = pool

	if d.info.Timestamps {
		qinfo := vk.QueryPoolCreateInfo{
			SType:      vk.StructureTypeQueryPoolCreateInfo,
			QueryType:  vk.QueryTypeTimestamp,
			QueryCount: timestampSlots,
		}
		var qp vk.QueryPool
		if err := check("vkCreateQueryPool", vk.CreateQueryPool(d.dev, &qinfo, nil, &qp)); err != nil {
			return err
		}
		d.queries = qp
		// Queries must be reset before their first use or read.
		d.mu.Lock()
		err := d.oneShotLocked(func(cb vk.CommandBuffer) {
			vk.CmdResetQueryPool(cb, qp, 0, timestampSlots)
		})
		d.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// Info describes the device.
func (d *Device) Info() gpu.Info { return d.info.Info }

// Caps is what the device can do (its features and limits).
func (d *Device) Caps() gpu.Caps { return d.info.Caps }

// DeviceInfo is Info with the Vulkan details.
func (d *Device) DeviceInfo() DeviceInfo { return d.info }

// Submit queues finished command lists, in order, as one vkQueueSubmit.
func (d *Device) Submit(cmds ...gpu.Commands) error {
	if len(cmds) == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	cbs, uses, err := d.listsLocked("submit", cmds)
	if err != nil {
		return err
	}
	return d.submitLocked(cbs, uses)
}

// listsLocked checks that cmds are finished lists of d that can be
// submitted and returns their command buffers and the buffers each uses.
func (d *Device) listsLocked(what string, cmds []gpu.Commands) ([]vk.CommandBuffer, []map[*buffer]struct{}, error) {
	cbs := make([]vk.CommandBuffer, len(cmds), len(cmds)+1)
	uses := make([]map[*buffer]struct{}, len(cmds), len(cmds)+1)
	for i, gc := range cmds {
		c, ok := gc.(*commands)
		if !ok || c == nil || c.d != d {
			return nil, nil, fmt.Errorf("vulkan: %s: command list %d is not from this device: %w", what, i, ErrInvalid)
		}
		if err := c.submittable(); err != nil {
			return nil, nil, fmt.Errorf("vulkan: %s: command list %d: %w", what, i, err)
		}
		cbs[i], uses[i] = c.cb, c.buffers
	}
	return cbs, uses, nil
}

// submission is a pending vkQueueSubmit: its fence and the buffers its
// command lists use (each list's set, fixed once it is finished); nil
// uses means any buffer (transfers).
type submission struct {
	fence vk.Fence
	uses  []map[*buffer]struct{}
}

// touches reports whether s may use b.
func (s submission) touches(b *buffer) bool {
	if s.uses == nil {
		return true
	}
	for _, u := range s.uses {
		if _, ok := u[b]; ok {
			return true
		}
	}
	return false
}

// submitLocked submits command buffers with a fence tracked in d.pending,
// with the buffers they use (nil: any).
func (d *Device) submitLocked(cbs []vk.CommandBuffer, uses []map[*buffer]struct{}) error {
	d.reapLocked()
	fence, err := d.fenceLocked()
	if err != nil {
		return err
	}
	if err := check("vkQueueSubmit", d.calls.queueSubmit(d.queue, cbs, fence)); err != nil {
		d.idle = append(d.idle, fence)
		return err
	}
	d.pending = append(d.pending, submission{fence: fence, uses: uses})
	return nil
}

// fenceLocked returns an unsignaled fence.
func (d *Device) fenceLocked() (vk.Fence, error) {
	if n := len(d.idle); n > 0 {
		f := d.idle[n-1]
		d.idle = d.idle[:n-1]
		return f, nil
	}
	info := vk.FenceCreateInfo{SType: vk.StructureTypeFenceCreateInfo}
	var f vk.Fence
	if err := check("vkCreateFence", vk.CreateFence(d.dev, &info, nil, &f)); err != nil {
		return f, err
	}
	return f, nil
}

// reapLocked recycles the fences of submissions that already finished, so
// the pending list stays short when callers submit without waiting.
func (d *Device) reapLocked() {
	kept := d.pending[:0]
	for _, s := range d.pending {
		if vk.GetFenceStatus(d.dev, s.fence) == vk.Success {
			d.recycleLocked(s.fence)
			continue
		}
		kept = append(kept, s)
	}
	clear(d.pending[len(kept):])
	d.pending = kept
}

func (d *Device) recycleLocked(f vk.Fence) {
	if vk.ResetFences(d.dev, 1, []vk.Fence{f}) == vk.Success {
		d.idle = append(d.idle, f)
		return
	}
	vk.DestroyFence(d.dev, f, nil)
}

// Wait blocks until all submitted work has finished.
func (d *Device) Wait() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	return d.waitLocked()
}

func (d *Device) waitLocked() error {
	return d.waitForLocked(context.Background(), nil)
}

// WaitContext is Wait, ending early with ctx.
func (d *Device) WaitContext(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	return d.waitForLocked(ctx, nil)
}

// waitForLocked waits for the pending submissions that may use b (every
// one when b is nil), not for unrelated work submitted after them. It waits
// for each submission in turn up to the last one that may use b, each with
// its own limit (waitSubmissions), and returns early when ctx is done.
func (d *Device) waitForLocked(ctx context.Context, b *buffer) error {
	last := -1
	for i, s := range d.pending {
		if b == nil || s.touches(b) {
			last = i
		}
	}
	if last < 0 {
		return nil
	}
	done := d.pending[:last+1]
	software := d.info.Type == gpu.CPU
	finished, err := waitSubmissions(ctx, len(done), func(i int, limit time.Duration) vk.Result {
		if software {
			return pollFence(limit, func() vk.Result { return vk.GetFenceStatus(d.dev, done[i].fence) }, time.Sleep, time.Now)
		}
		return vk.WaitForFences(d.dev, 1, []vk.Fence{done[i].fence}, vk.True, uint64(limit.Nanoseconds()))
	}, software, processCPUTime)
	// The submissions that finished (all, or those before a cancellation
	// or a failure) are done with.
	for _, s := range done[:finished] {
		d.recycleLocked(s.fence)
	}
	n := copy(d.pending, d.pending[finished:])
	clear(d.pending[n:])
	d.pending = d.pending[:n]
	return err
}

// waitSubmissions waits for n submissions in submission order: wait(i,
// limit) waits for submission i at most limit. Each submission gets
// waitTimeout from the end of the previous one. With software set, a
// submission still running then is waited for slice by slice (waitTimeout
// each) as long as cpuTime (the process's CPU time, false where unknown)
// advanced by a tenth of a core over the slice before, up to
// maxSoftwareWait in all. cpuTime is read only after a timeout: a wait that
// succeeds (every decode step's) costs one fence wait, nothing more. A ctx
// that can be cancelled is checked every pollSlice of a wait, which then
// returns an error wrapping ctx's. finished counts the submissions that
// finished.
func waitSubmissions(ctx context.Context, n int, wait func(i int, limit time.Duration) vk.Result, software bool, cpuTime func() (time.Duration, bool)) (finished int, _ error) {
	// waitSlice waits for submission i up to waitTimeout, in slices of
	// pollSlice between which it checks ctx.
	waitSlice := func(i int) (vk.Result, error) {
		if ctx.Done() == nil {
			return wait(i, waitTimeout), nil
		}
		for left := waitTimeout; ; left -= pollSlice {
			res := wait(i, min(pollSlice, left))
			if res != vk.Timeout || left <= pollSlice {
				return res, nil
			}
			if err := ctx.Err(); err != nil {
				return res, fmt.Errorf("vulkan: waiting for submission %d of %d: %w", i+1, n, err)
			}
		}
	}
	for i := 0; i < n; i++ {
		var waited, before time.Duration
		known := false
		for {
			res, err := waitSlice(i)
			if err != nil {
				return i, err
			}
			if res != vk.Timeout {
				if err := check("vkWaitForFences", res); err != nil {
					return i, err
				}
				break
			}
			waited += waitTimeout
			busy := false
			if software {
				after, ok := cpuTime()
				busy = known && ok && after-before >= waitTimeout/10
				before, known = after, ok
			}
			// The first slice past the limit is granted to measure progress.
			if !software || waited >= maxSoftwareWait || (waited > waitTimeout && !busy) {
				return i, fmt.Errorf("vulkan: submission %d of %d did not finish within %v of the previous one (%s): %w",
					i+1, n, waited, progressNote(software, busy), ErrTimeout)
			}
		}
	}
	return n, nil
}

func progressNote(software, busy bool) string {
	switch {
	case !software:
		return "a lost device or a runaway kernel"
	case busy:
		return "still working after the software driver's limit"
	default:
		return "the software driver made no progress"
	}
}

// xferCommandBufferLocked allocates a primary command buffer from the
// transfer pool (one-shot transfers, read-back copies). d.mu is held.
func (d *Device) xferCommandBufferLocked() (vk.CommandBuffer, error) {
	cb, res := d.calls.allocateCommandBuffer(d.dev, d.xferPool)
	return cb, check("vkAllocateCommandBuffers", res)
}

// oneShotLocked records fn into a transient command buffer, submits it and
// waits for it (uploads, readbacks, zero fills, query resets).
func (d *Device) oneShotLocked(fn func(cb vk.CommandBuffer)) error {
	cb, err := d.xferCommandBufferLocked()
	if err != nil {
		return err
	}
	cbs := []vk.CommandBuffer{cb}
	defer vk.FreeCommandBuffers(d.dev, d.xferPool, 1, cbs)
	if err := check("vkBeginCommandBuffer", d.calls.beginCommandBuffer(cbs[0], vk.CommandBufferUsageOneTimeSubmitBit)); err != nil {
		return err
	}
	d.fullBarrier(cbs[0])
	fn(cbs[0])
	d.hostBarrier(cbs[0])
	if err := check("vkEndCommandBuffer", vk.EndCommandBuffer(cbs[0])); err != nil {
		return err
	}
	if err := d.submitLocked(cbs, nil); err != nil {
		return err
	}
	return d.waitLocked()
}

// Close waits for submitted work and releases every object of the device.
// Closing twice is a no-op. The pipeline cache is saved before the wait
// for the queue: a process that exits during that wait (gpurun after an
// interrupt, whose queued work nobody wants) keeps its compiled kernels.
func (d *Device) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true // no new work or kernels from here on
	d.mu.Unlock()
	d.creating.Wait()
	d.savePipelineCache()
	d.mu.Lock()
	err := d.waitLocked()
	if err != nil {
		// Destroying objects still in use could crash the driver; wait for
		// the device as a whole before giving up on orderly teardown.
		vk.DeviceWaitIdle(d.dev)
	}
	d.mu.Unlock()
	d.destroy()
	return err
}

// destroy frees everything; d.closed is set or d never escaped openDevice.
func (d *Device) destroy() {
	for c := range d.commands {
		c.destroy()
	}
	for k := range d.kernels {
		k.destroy()
	}
	for b := range d.buffers {
		b.destroy()
	}
	if d.staging != nil {
		d.staging.destroy()
	}
	d.releaseReadBufs()
	for _, s := range d.pending {
		vk.DestroyFence(d.dev, s.fence, nil)
	}
	for _, f := range d.idle {
		vk.DestroyFence(d.dev, f, nil)
	}
	d.pending, d.idle = nil, nil
	if d.queries != vk.NullQueryPool {
		vk.DestroyQueryPool(d.dev, d.queries, nil)
	}
	if d.xferPool != vk.NullCommandPool {
		vk.DestroyCommandPool(d.dev, d.xferPool, nil)
	}
	if d.pcache != nil && d.pcache.handle != vk.NullPipelineCache {
		vk.DestroyPipelineCache(d.dev, d.pcache.handle, nil)
	}
	vk.DestroyDevice(d.dev, nil)
	d.calls.free()
}

// Memory barriers. Every command waits for all earlier compute and transfer
// work to finish and its writes to be visible; the end of a list also makes
// writes visible to the host for Read.
const (
	workStages  = vk.PipelineStageFlags(vk.PipelineStageComputeShaderBit | vk.PipelineStageTransferBit)
	writeAccess = vk.AccessFlags(vk.AccessShaderWriteBit | vk.AccessTransferWriteBit)
	anyAccess   = vk.AccessFlags(vk.AccessShaderReadBit | vk.AccessShaderWriteBit | vk.AccessTransferReadBit |
		vk.AccessTransferWriteBit | vk.AccessUniformReadBit)
)

func (d *Device) fullBarrier(cb vk.CommandBuffer) {
	d.calls.memoryBarrier(cb, workStages, workStages, writeAccess, anyAccess)
}

func (d *Device) hostBarrier(cb vk.CommandBuffer) {
	d.calls.memoryBarrier(cb, workStages, vk.PipelineStageFlags(vk.PipelineStageHostBit), writeAccess, vk.AccessFlags(vk.AccessHostReadBit))
}
