//go:build cgo || js

package webgpu

import (
	"fmt"
	"sync/atomic"

	"github.com/cogentcore/webgpu/wgpu"

	"github.com/gpurun/gpurun/gpu"
)

// buffer is a storage buffer. Its allocation is rounded up to 4 bytes, as
// WebGPU copies and writes need.
type buffer struct {
	dev      *Device
	b        *wgpu.Buffer
	size     int64
	alloc    int64
	released atomic.Bool
}

func (b *buffer) Size() int64 { return b.size }

// Release frees the buffer. Command lists still referring to it fail to
// submit (Submit checks) rather than abort inside wgpu.
func (b *buffer) Release() {
	if b.released.Swap(true) {
		return
	}
	b.b.Release()
	b.dev.mem.Sub(b.alloc)
}

func align4(n int64) int64 { return (n + 3) &^ 3 }

// NewBuffer creates a zero-filled storage buffer.
func (d *Device) NewBuffer(size int64) (gpu.Buffer, error) {
	if size <= 0 {
		return nil, fmt.Errorf("webgpu: buffer size %d: %w", size, gpu.ErrUnsupported)
	}
	alloc := align4(size)
	if uint64(alloc) > d.limits.MaxBufferSize {
		return nil, fmt.Errorf("webgpu: buffer of %d bytes exceeds the device maximum %d: %w", size, d.limits.MaxBufferSize, gpu.ErrUnsupported)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	b, err := d.dev.CreateBuffer(&wgpu.BufferDescriptor{
		Usage: wgpu.BufferUsageStorage | wgpu.BufferUsageUniform | wgpu.BufferUsageCopySrc | wgpu.BufferUsageCopyDst,
		Size:  uint64(alloc),
	})
	if err != nil {
		return nil, fmt.Errorf("webgpu: create buffer of %d bytes: %w", size, err)
	}
	d.mem.Add(alloc)
	return &buffer{dev: d, b: b, size: size, alloc: alloc}, nil
}

// own checks that b is a live buffer of this device.
func (d *Device) own(b gpu.Buffer) (*buffer, error) {
	wb, ok := b.(*buffer)
	if !ok || wb == nil {
		return nil, fmt.Errorf("webgpu: %T is not a webgpu buffer", b)
	}
	if wb.dev != d {
		return nil, fmt.Errorf("webgpu: buffer of another device")
	}
	if wb.released.Load() {
		return nil, fmt.Errorf("webgpu: buffer used after Release")
	}
	return wb, nil
}

func checkRange(b *buffer, off, n int64) error {
	if off < 0 || n < 0 || off > b.size || n > b.size-off {
		return fmt.Errorf("webgpu: range [%d, %d+%d) outside a buffer of %d bytes", off, off, n, b.size)
	}
	return nil
}

// Write copies data into b at off. Unaligned edges are merged with the
// buffer's current contents, since WebGPU writes whole 4-byte words.
func (d *Device) Write(b gpu.Buffer, off int64, data []byte) error {
	wb, err := d.own(b)
	if err != nil {
		return err
	}
	n := int64(len(data))
	if err := checkRange(wb, off, n); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	lo, hi := off&^3, align4(off+n)
	if lo != off || hi != off+n {
		word := make([]byte, hi-lo)
		if err := d.read(wb, lo, word); err != nil {
			return err
		}
		copy(word[off-lo:], data)
		data, off = word, lo
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if err := writeBuffer(d, wb, off, data); err != nil {
		return fmt.Errorf("webgpu: write: %w", err)
	}
	return nil
}

// Read waits for submitted work and copies b[off:off+len(dst)] into dst.
func (d *Device) Read(b gpu.Buffer, off int64, dst []byte) error {
	wb, err := d.own(b)
	if err != nil {
		return err
	}
	if err := checkRange(wb, off, int64(len(dst))); err != nil {
		return err
	}
	return d.read(wb, off, dst)
}

// read copies through the staging buffer; the copy range is widened to whole
// words (the allocation is word aligned, so it stays inside).
func (d *Device) read(wb *buffer, off int64, dst []byte) error {
	if len(dst) == 0 {
		return nil
	}
	lo, hi := off&^3, align4(off+int64(len(dst)))
	n := hi - lo
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if wb.released.Load() {
		return fmt.Errorf("webgpu: buffer used after Release")
	}
	if err := d.ensureStaging(n); err != nil {
		return err
	}
	tmp := dst
	if lo != off || n != int64(len(dst)) {
		tmp = make([]byte, n)
	}
	if handled, err := readReplay(d, wb, lo, tmp[:n]); handled {
		if err != nil {
			return err
		}
		if &tmp[0] != &dst[0] {
			copy(dst, tmp[off-lo:])
		}
		return nil
	}
	enc, err := d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return fmt.Errorf("webgpu: read: %w", err)
	}
	defer enc.Release()
	if err := enc.CopyBufferToBuffer(wb.b, uint64(lo), d.staging, 0, uint64(n)); err != nil {
		return fmt.Errorf("webgpu: read copy: %w", err)
	}
	cb, err := enc.Finish(nil)
	if err != nil {
		return fmt.Errorf("webgpu: read: %w", err)
	}
	d.queue.Submit(cb)
	cb.Release()
	if err := mapRead(d.dev, d.staging, tmp[:n]); err != nil {
		return err
	}
	if &tmp[0] != &dst[0] {
		copy(dst, tmp[off-lo:])
	}
	return nil
}

// ensureStaging grows the staging buffer to at least n bytes. d.mu is held.
func (d *Device) ensureStaging(n int64) error {
	if d.staging != nil && d.stagingSize >= n {
		return nil
	}
	size := max(n, 64<<10)
	if d.staging != nil {
		size = max(size, 2*d.stagingSize)
		d.staging.Release()
		d.mem.Sub(d.stagingSize)
		d.staging, d.stagingSize = nil, 0
	}
	size = min(align4(size), max(align4(n), int64(d.limits.MaxBufferSize)))
	s, err := d.dev.CreateBuffer(&wgpu.BufferDescriptor{Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst, Size: uint64(size)})
	if err != nil {
		return fmt.Errorf("webgpu: staging buffer of %d bytes: %w", size, err)
	}
	d.staging, d.stagingSize = s, size
	d.mem.Add(size)
	return nil
}
