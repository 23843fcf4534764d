//go:build cgo

package vulkan

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	vk "github.com/vulkan-go/vulkan"

	"github.com/gpurun/gpurun/gpu"
)

// Reads ahead (gpu.Caps.ReadAhead, Device.SubmitRead): the command lists
// and, after them in the same vkQueueSubmit, a copy of the bytes the host
// wants into a read-back buffer of the device's own go to the queue as one
// tracked submission (d.pending, with its fence); the host then queues its
// next submission and only afterwards waits for that one. A software
// device (lavapipe) then always has the next submission queued when one
// ends, instead of idling while the host reads the step tensor and submits
// again. Each pending read holds a read-back buffer of the pool below
// until its Wait; a buffer goes back to the pool when its read is waited
// for (or dropped), and is taken again only once no pending submission
// may still write it.

// readBuf is a read-back buffer of the pool: host-visible, coherent and
// mapped (the staging memory type), with its own command buffer holding
// the copy into it, recorded again only when the copied range changes.
type readBuf struct {
	b    *buffer // not in d.buffers: the pool owns it
	cb   vk.CommandBuffer
	src  *buffer // the recorded copy: src[off:off+n] to b[0:n]
	off  int64
	n    int64
	free bool
}

// minReadBuf is the smallest read-back buffer made (a decode step tensor
// is 352 bytes): a source buffer no bigger is copied whole, so the
// recorded copy depends only on which buffer is read.
const minReadBuf = 4 << 10

// takeReadBufLocked returns a free pool buffer of at least n bytes that
// no pending submission may still write, made when there is none. d.mu
// is held.
func (d *Device) takeReadBufLocked(n int64) (*readBuf, error) {
	d.reapLocked()
	for _, r := range d.readBufs {
		if r.free && r.b.alloc >= n && !d.busyLocked(r.b) {
			r.free = false
			return r, nil
		}
	}
	b, err := d.newBufferLocked(max(n, minReadBuf), d.stagingType, true)
	if err != nil {
		return nil, fmt.Errorf("vulkan: read-back buffer: %w", err)
	}
	cb, err := d.xferCommandBufferLocked()
	if err != nil {
		b.destroy()
		return nil, fmt.Errorf("vulkan: read-back buffer: %w", err)
	}
	r := &readBuf{b: b, cb: cb}
	d.readBufs = append(d.readBufs, r)
	return r, nil
}

// busyLocked reports whether a pending submission may use b.
func (d *Device) busyLocked(b *buffer) bool {
	for _, s := range d.pending {
		if s.touches(b) {
			return true
		}
	}
	return false
}

// recordLocked records r's copy of src[off:off+n] (after every earlier
// command's writes, and visible to the host once it ends), unless r holds
// that copy already. r's command buffer is not pending (r was free and
// not busy). d.mu is held.
func (r *readBuf) recordLocked(src *buffer, off, n int64) error {
	if r.src == src && r.off == off && r.n == n {
		return nil
	}
	r.src = nil
	if err := check("vkResetCommandBuffer", vk.ResetCommandBuffer(r.cb, 0)); err != nil {
		return err
	}
	d := src.d
	if err := check("vkBeginCommandBuffer", d.calls.beginCommandBuffer(r.cb, 0)); err != nil {
		return err
	}
	// Compute and transfer writes of the lists before it -> this copy's
	// transfer read; then its transfer write -> the host's read.
	d.fullBarrier(r.cb)
	d.calls.copyBuffer(r.cb, src.buf, r.b.buf, off, 0, n)
	d.hostBarrier(r.cb)
	if err := check("vkEndCommandBuffer", vk.EndCommandBuffer(r.cb)); err != nil {
		return err
	}
	r.src, r.off, r.n = src, off, n
	return nil
}

// releaseReadBufs frees the pool (Close: the device is idle). d.mu is
// held or the device is being destroyed.
func (d *Device) releaseReadBufs() {
	for _, r := range d.readBufs {
		r.b.destroy() // the command buffer goes with d.xferPool
	}
	d.readBufs = nil
}

// pendingRead is a read SubmitRead started (gpu.PendingRead).
type pendingRead struct {
	d     *Device
	buf   *readBuf
	shift int64 // where the bytes asked for start in buf
	want  int
	done  atomic.Bool
}

// SubmitRead (gpu.Device, Caps().ReadAhead) submits cmds and, after them
// in the same submission, a copy of src[off:off+n] into a read-back
// buffer (a source of at most minReadBuf bytes is copied whole).
func (d *Device) SubmitRead(src gpu.Buffer, off int64, n int, cmds ...gpu.Commands) (gpu.PendingRead, error) {
	b, err := d.own(src, "read-ahead source")
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("vulkan: read ahead of %d bytes: %w", n, ErrInvalid)
	}
	if err := b.span(off, int64(n), "read ahead"); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	cbs, uses, err := d.listsLocked("read ahead", cmds)
	if err != nil {
		return nil, err
	}
	lo, size := off, int64(n)
	if b.alloc <= minReadBuf {
		lo, size = 0, b.alloc
	}
	r, err := d.takeReadBufLocked(size)
	if err != nil {
		return nil, err
	}
	if err := r.recordLocked(b, lo, size); err != nil {
		r.free = true
		return nil, fmt.Errorf("vulkan: read ahead: %w", err)
	}
	cbs = append(cbs, r.cb)
	uses = append(uses, map[*buffer]struct{}{b: {}, r.b: {}})
	if err := d.submitLocked(cbs, uses); err != nil {
		r.free = true
		return nil, fmt.Errorf("vulkan: read ahead: %w", err)
	}
	return &pendingRead{d: d, buf: r, shift: off - lo, want: n}, nil
}

// errWaited reports a second Wait of one pending read.
var errWaited = errors.New("vulkan: pending read waited for twice")

// Wait (gpu.PendingRead) waits for the read's submission (and those
// before it), copies the bytes out and gives the read-back buffer back. A
// cancelled wait gives it back too: it is taken again only once its
// submission finished.
func (p *pendingRead) Wait(ctx context.Context, dst []byte) error {
	if p.done.Swap(true) {
		return errWaited
	}
	d := p.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("vulkan: pending read: %w", ErrClosed)
	}
	defer func() { p.buf.free = true }()
	if len(dst) != p.want {
		return fmt.Errorf("vulkan: pending read of %d bytes into %d: %w", p.want, len(dst), ErrInvalid)
	}
	if err := d.waitForLocked(ctx, p.buf.b); err != nil {
		return fmt.Errorf("vulkan: pending read: %w", err)
	}
	copy(dst, p.buf.b.bytes()[p.shift:])
	return nil
}
