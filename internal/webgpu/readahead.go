//go:build cgo || js

package webgpu

import (
	"context"
	"errors"
	"fmt"

	"github.com/cogentcore/webgpu/wgpu"

	"github.com/gpurun/gpurun/gpu"
)

// Reads ahead (gpu.Caps.ReadAhead, Device.SubmitRead): a submission is
// followed, in queue order, by a copy of what the host wants back into a
// map-readable buffer of its own, and that buffer's map is asked for at
// once; the host then queues its next submission and only afterwards
// waits for the map. On the page the wait is a round trip through the
// browser's GPU process (device done, GPU process, the map promise, Go:
// milliseconds), which the next submission's device time then hides;
// natively it is a poll. Each pending read holds a buffer of the pool
// below until its Wait.

// readBuf is a map-readable buffer of the read-ahead pool.
type readBuf struct {
	b    *wgpu.Buffer
	size int64
}

// minReadBuf is the smallest read-ahead buffer made (a decode step
// tensor is 352 bytes).
const minReadBuf = 4 << 10

// takeReadBuf returns a free pool buffer of at least n bytes, made when
// none is free. d.mu is held.
func (d *Device) takeReadBuf(n int64) (readBuf, error) {
	for i, r := range d.readBufs {
		if r.size >= n {
			d.readBufs = append(d.readBufs[:i], d.readBufs[i+1:]...)
			return r, nil
		}
	}
	size := align4(max(n, minReadBuf))
	b, err := d.dev.CreateBuffer(&wgpu.BufferDescriptor{Usage: wgpu.BufferUsageMapRead | wgpu.BufferUsageCopyDst, Size: uint64(size)})
	if err != nil {
		return readBuf{}, fmt.Errorf("webgpu: read-ahead buffer of %d bytes: %w", size, err)
	}
	d.mem.Add(size)
	return readBuf{b: b, size: size}, nil
}

// giveReadBuf puts r back into the pool (ok) or releases it (a buffer
// whose map did not finish). d.mu is held.
func (d *Device) giveReadBuf(r readBuf, ok bool) {
	if ok && !d.closed {
		d.readBufs = append(d.readBufs, r)
		return
	}
	r.b.Release()
	d.mem.Sub(r.size)
}

// releaseReadBufs frees the pool. d.mu is held.
func (d *Device) releaseReadBufs() {
	for _, r := range d.readBufs {
		r.b.Release()
		d.mem.Sub(r.size)
	}
	d.readBufs = nil
}

// pendingRead is a read SubmitRead started (gpu.PendingRead).
type pendingRead struct {
	d     *Device
	buf   readBuf
	m     mapping // the platform's map in flight (mapread.go, replay_js.go)
	n     int64   // bytes copied, whole words
	shift int64   // offset of the bytes asked for in them
	want  int
	done  bool
}

// SubmitRead (gpu.Device, Caps().ReadAhead) submits cmds and, after them,
// copies src[off:off+n] into a read-ahead buffer whose map it starts; the
// copy range is widened to whole words as Read's is.
func (d *Device) SubmitRead(src gpu.Buffer, off int64, n int, cmds ...gpu.Commands) (gpu.PendingRead, error) {
	if !d.caps.ReadAhead {
		return nil, fmt.Errorf("webgpu: reads ahead: %w", gpu.ErrUnsupported)
	}
	wb, err := d.own(src)
	if err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, fmt.Errorf("webgpu: read ahead of %d bytes", n)
	}
	if err := checkRange(wb, off, int64(n)); err != nil {
		return nil, err
	}
	cs, err := d.submittable(cmds)
	if err != nil {
		return nil, err
	}
	lo, hi := off&^3, align4(off+int64(n))
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	r, err := d.takeReadBuf(hi - lo)
	if err != nil {
		return nil, err
	}
	m, err := startRead(d, cs, wb, lo, r.b, hi-lo)
	if err != nil {
		d.giveReadBuf(r, false)
		return nil, err
	}
	return &pendingRead{d: d, buf: r, m: m, n: hi - lo, shift: off - lo, want: n}, nil
}

// errWaited reports a second Wait of one pending read.
var errWaited = errors.New("webgpu: pending read waited for twice")

// Wait (gpu.PendingRead) waits for the map, copies the bytes and gives
// the read-ahead buffer back.
func (r *pendingRead) Wait(ctx context.Context, dst []byte) error {
	if r.done {
		return errWaited
	}
	r.done = true
	if len(dst) != r.want {
		// Still wait, so the buffer goes back unmapped.
		_ = r.wait(ctx, make([]byte, r.n))
		return fmt.Errorf("webgpu: pending read of %d bytes into %d", r.want, len(dst))
	}
	tmp := dst
	if r.shift != 0 || r.n != int64(len(dst)) {
		tmp = make([]byte, r.n)
	}
	if err := r.wait(ctx, tmp); err != nil {
		return err
	}
	if &tmp[0] != &dst[0] {
		copy(dst, tmp[r.shift:])
	}
	return nil
}

// wait waits for the map into raw (r.n bytes) and gives the buffer back.
func (r *pendingRead) wait(ctx context.Context, raw []byte) error {
	err := waitRead(ctx, r.d, r.m, r.buf.b, raw)
	r.d.mu.Lock()
	r.d.giveReadBuf(r.buf, err == nil)
	r.d.mu.Unlock()
	if err != nil {
		return fmt.Errorf("webgpu: pending read: %w", err)
	}
	return nil
}
