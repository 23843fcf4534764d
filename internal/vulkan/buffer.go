//go:build cgo

package vulkan

import (
	"context"
	"fmt"
	"sync/atomic"
	"unsafe"

	vk "github.com/vulkan-go/vulkan"

	"github.com/gpurun/gpurun/gpu"
)

// stagingChunk bounds the staging buffer used when buffers are not mapped;
// bigger transfers go through it in pieces.
const stagingChunk = 16 << 20

// buffer is a VkBuffer with its own memory allocation.
type buffer struct {
	d        *Device
	size     int64 // as requested
	alloc    int64 // VkBuffer size: size rounded up to 4, at least 4
	memSize  int64 // bytes of the memory allocation (counted in d.mem)
	buf      vk.Buffer
	mem      vk.DeviceMemory
	ptr      unsafe.Pointer // persistent mapping, nil on the staging path
	released atomic.Bool
}

var _ gpu.Buffer = (*buffer)(nil)

func (b *buffer) Size() int64 { return b.size }

// Release waits for submitted work (which may still use the buffer) and
// frees it. Command lists that recorded it can no longer be submitted.
func (b *buffer) Release() {
	d := b.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || b.released.Load() {
		return
	}
	if err := d.waitLocked(); err != nil {
		vk.DeviceWaitIdle(d.dev)
	}
	delete(d.buffers, b)
	b.destroy()
}

func (b *buffer) destroy() {
	if b.released.Swap(true) {
		return
	}
	if b.ptr != nil {
		vk.UnmapMemory(b.d.dev, b.mem)
		b.ptr = nil
	}
	vk.DestroyBuffer(b.d.dev, b.buf, nil)
	vk.FreeMemory(b.d.dev, b.mem, nil)
	b.d.mem.Sub(b.memSize)
}

// bytes views the mapping of a mapped buffer.
func (b *buffer) bytes() []byte { return unsafe.Slice((*byte)(b.ptr), b.alloc) }

func (d *Device) createRawBuffer(size int64) (vk.Buffer, error) {
	info := vk.BufferCreateInfo{
		SType: vk.StructureTypeBufferCreateInfo,
		Size:  vk.DeviceSize(size),
		Usage: vk.BufferUsageFlags(vk.BufferUsageStorageBufferBit | vk.BufferUsageUniformBufferBit |
			vk.BufferUsageTransferSrcBit | vk.BufferUsageTransferDstBit),
		SharingMode: vk.SharingModeExclusive,
	}
	var buf vk.Buffer
	if err := check("vkCreateBuffer", vk.CreateBuffer(d.dev, &info, nil, &buf)); err != nil {
		return vk.NullBuffer, err
	}
	return buf, nil
}

// newBufferLocked creates a buffer in memory type memType, mapped if map_.
func (d *Device) newBufferLocked(size int64, memType uint32, mapIt bool) (*buffer, error) {
	alloc := (size + 3) &^ 3
	if alloc == 0 {
		alloc = 4
	}
	buf, err := d.createRawBuffer(alloc)
	if err != nil {
		return nil, fmt.Errorf("vulkan: buffer of %d bytes: %w", size, err)
	}
	var req vk.MemoryRequirements
	vk.GetBufferMemoryRequirements(d.dev, buf, &req)
	req.Deref()
	if req.MemoryTypeBits&(1<<memType) == 0 {
		vk.DestroyBuffer(d.dev, buf, nil)
		return nil, fmt.Errorf("vulkan: buffer of %d bytes cannot use memory type %d: %w", size, memType, gpu.ErrUnsupported)
	}
	ainfo := vk.MemoryAllocateInfo{
		SType:           vk.StructureTypeMemoryAllocateInfo,
		AllocationSize:  req.Size,
		MemoryTypeIndex: memType,
	}
	var mem vk.DeviceMemory
	if err := check("vkAllocateMemory", vk.AllocateMemory(d.dev, &ainfo, nil, &mem)); err != nil {
		vk.DestroyBuffer(d.dev, buf, nil)
		return nil, fmt.Errorf("vulkan: allocating %d bytes: %w", req.Size, err)
	}
	d.mem.Add(int64(req.Size))
	b := &buffer{d: d, size: size, alloc: alloc, memSize: int64(req.Size), buf: buf, mem: mem}
	if err := check("vkBindBufferMemory", vk.BindBufferMemory(d.dev, buf, mem, 0)); err != nil {
		b.destroy()
		return nil, err
	}
	if mapIt {
		var ptr unsafe.Pointer
		if err := check("vkMapMemory", vk.MapMemory(d.dev, mem, 0, vk.DeviceSize(vk.WholeSize), 0, &ptr)); err != nil {
			b.destroy()
			return nil, err
		}
		b.ptr = ptr
	}
	return b, nil
}

// NewBuffer creates a zero-filled buffer usable as storage or uniform
// binding and as copy source and destination.
func (d *Device) NewBuffer(size int64) (gpu.Buffer, error) {
	if size < 0 {
		return nil, fmt.Errorf("vulkan: buffer size %d: %w", size, ErrInvalid)
	}
	if max := d.info.MaxBufferSize; max > 0 && size > max {
		return nil, fmt.Errorf("vulkan: buffer of %d bytes exceeds the device's largest allocation (%d bytes): %w", size, max, ErrTooLarge)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	b, err := d.newBufferLocked(size, d.bufferType, d.mapped)
	if err != nil {
		return nil, err
	}
	if b.ptr != nil {
		clear(b.bytes())
	} else if err := d.oneShotLocked(func(cb vk.CommandBuffer) {
		vk.CmdFillBuffer(cb, b.buf, 0, vk.DeviceSize(vk.WholeSize), 0)
	}); err != nil {
		b.destroy()
		return nil, err
	}
	d.buffers[b] = struct{}{}
	return b, nil
}

// NewHostBuffer is a zero-filled buffer in
// the host-visible, coherent memory type of the staging buffer, mapped, so
// Write and Read copy in place and wait only for the submissions using it.
func (d *Device) NewHostBuffer(size int64) (gpu.Buffer, error) {
	if size < 0 {
		return nil, fmt.Errorf("vulkan: buffer size %d: %w", size, ErrInvalid)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	b, err := d.newBufferLocked(size, d.stagingType, true)
	if err != nil {
		return nil, err
	}
	clear(b.bytes())
	d.buffers[b] = struct{}{}
	return b, nil
}

// own checks that gb is a live buffer of d.
func (d *Device) own(gb gpu.Buffer, what string) (*buffer, error) {
	b, ok := gb.(*buffer)
	if !ok || b == nil || b.d != d {
		return nil, fmt.Errorf("vulkan: %s is not a buffer of this device: %w", what, ErrInvalid)
	}
	if b.released.Load() {
		return nil, fmt.Errorf("vulkan: %s: %w", what, ErrReleased)
	}
	return b, nil
}

// span checks that [off, off+n) lies inside b.
func (b *buffer) span(off, n int64, what string) error {
	if off < 0 || n < 0 || off > b.size || n > b.size-off {
		return fmt.Errorf("vulkan: %s range [%d, %d+%d) outside buffer of %d bytes: %w", what, off, off, n, b.size, ErrInvalid)
	}
	return nil
}

// Write copies data into b at off after the submitted work using b
// finished (a mapped buffer; through the staging buffer, after all
// submitted work), so it is ordered after earlier and before later
// submissions.
func (d *Device) Write(gb gpu.Buffer, off int64, data []byte) error {
	return d.transfer(gb, off, int64(len(data)), "write", func(b []byte, at int64) { copy(b, data[at:]) }, true)
}

// Read waits for the submitted work using b (a mapped buffer; through the
// staging buffer, all submitted work) and copies b[off:off+len(dst)] into
// dst.
func (d *Device) Read(gb gpu.Buffer, off int64, dst []byte) error {
	return d.transfer(gb, off, int64(len(dst)), "read", func(b []byte, at int64) { copy(dst[at:], b) }, false)
}

// transfer moves n bytes between host and b[off:], calling move with a view
// of device-visible memory and the offset into the host slice it covers.
func (d *Device) transfer(gb gpu.Buffer, off, n int64, what string, move func(view []byte, at int64), upload bool) error {
	b, err := d.own(gb, what)
	if err != nil {
		return err
	}
	if err := b.span(off, n, what); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if b.released.Load() {
		return fmt.Errorf("vulkan: %s: %w", what, ErrReleased)
	}
	if b.ptr != nil {
		// Mapped memory: only the submissions using b must finish first
		// (no wait for unrelated work).
		if err := d.waitForLocked(context.Background(), b); err != nil {
			return err
		}
		if n > 0 {
			move(b.bytes()[off:off+n], 0)
		}
		return nil
	}
	if err := d.waitLocked(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if b.ptr != nil {
		move(b.bytes()[off:off+n], 0)
		return nil
	}
	st, err := d.stagingLocked()
	if err != nil {
		return err
	}
	for at := int64(0); at < n; at += stagingChunk {
		m := min(n-at, stagingChunk)
		if upload {
			move(st.bytes()[:m], at)
			if err := d.oneShotLocked(func(cb vk.CommandBuffer) { d.calls.copyBuffer(cb, st.buf, b.buf, 0, off+at, m) }); err != nil {
				return fmt.Errorf("vulkan: %s: %w", what, err)
			}
			continue
		}
		if err := d.oneShotLocked(func(cb vk.CommandBuffer) { d.calls.copyBuffer(cb, b.buf, st.buf, off+at, 0, m) }); err != nil {
			return fmt.Errorf("vulkan: %s: %w", what, err)
		}
		move(st.bytes()[:m], at)
	}
	return nil
}

// stagingLocked returns the host-visible staging buffer, creating it once.
func (d *Device) stagingLocked() (*buffer, error) {
	if d.staging != nil {
		return d.staging, nil
	}
	st, err := d.newBufferLocked(stagingChunk, d.stagingType, true)
	if err != nil {
		return nil, fmt.Errorf("vulkan: staging buffer: %w", err)
	}
	d.staging = st
	return st, nil
}
