//go:build cgo || js

package webgpu

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cogentcore/webgpu/wgpu"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// ErrNotFinished reports submitting a command list before Finish.
var ErrNotFinished = errors.New("webgpu: command list not finished")

type cmdKind uint8

const (
	cmdDispatch cmdKind = iota
	cmdCopy
	cmdTimestamp
)

type command struct {
	kind    cmdKind
	k       *kernel
	group   *wgpu.BindGroup
	x, y, z uint32
	dst     *buffer
	src     *buffer
	dstOff  uint64
	srcOff  uint64
	size    uint64
	slot    uint32
}

// commands records dispatches, copies and timestamps with their bind groups
// built and validated up front. A WebGPU command buffer can be submitted only
// once, so Submit encodes the recorded list again each time: that is cheap
// next to the dispatches, and it keeps lists replayable as gpu.Device
// promises.
type commands struct {
	dev      *Device
	cmds     []command
	bufs     map[*buffer]struct{} // every buffer referenced, checked at Submit
	kernels  map[*kernel]struct{}
	finished bool
	released atomic.Bool
	replay   replay // the page's encoding of the list (replay_js.go)
}

// NewCommands starts a command list.
func (d *Device) NewCommands() (gpu.Commands, error) {
	return &commands{dev: d, bufs: map[*buffer]struct{}{}, kernels: map[*kernel]struct{}{}}, nil
}

func (c *commands) usable() error {
	if c.released.Load() {
		return errors.New("webgpu: command list used after Release")
	}
	if c.finished {
		return errors.New("webgpu: command list already finished")
	}
	return nil
}

// Dispatch records a kernel dispatch. Bindings are validated here (kind
// count, alignment, the binding size limit, writable aliasing), since a
// validation error inside Queue.Submit would abort the process.
func (c *commands) Dispatch(k gpu.Kernel, bindings []gpu.Binding, x, y, z int) error {
	if err := c.usable(); err != nil {
		return err
	}
	d := c.dev
	wk, ok := k.(*kernel)
	if !ok || wk == nil || wk.dev != d {
		return fmt.Errorf("webgpu: dispatch: %T is not a kernel of this device", k)
	}
	if wk.released.Load() {
		return fmt.Errorf("webgpu: dispatch %s: kernel used after Release", wk.name)
	}
	if len(bindings) != len(wk.kinds) {
		return fmt.Errorf("webgpu: dispatch %s: %d bindings, kernel has %d", wk.name, len(bindings), len(wk.kinds))
	}
	maxGroups := int(d.limits.MaxComputeWorkgroupsPerDimension)
	for _, n := range []int{x, y, z} {
		if n < 0 || n > maxGroups {
			return fmt.Errorf("webgpu: dispatch %s: %d workgroups exceed %d: %w", wk.name, n, maxGroups, gpu.ErrUnsupported)
		}
	}
	entries := make([]wgpu.BindGroupEntry, len(bindings))
	used := make([]*buffer, len(bindings))
	for i, bd := range bindings {
		wb, err := d.own(bd.Buf)
		if err != nil {
			return fmt.Errorf("webgpu: dispatch %s binding %d: %w", wk.name, i, err)
		}
		size := bd.Size
		if size == 0 {
			size = wb.alloc - bd.Offset
		}
		align, limit := int64(d.limits.MinStorageBufferOffsetAlignment), int64(d.limits.MaxStorageBufferBindingSize)
		if wk.kinds[i] == shaders.Uniform {
			align, limit = int64(d.limits.MinUniformBufferOffsetAlignment), int64(d.limits.MaxUniformBufferBindingSize)
		}
		switch {
		case bd.Offset < 0 || size <= 0 || bd.Offset+size > wb.alloc:
			return fmt.Errorf("webgpu: dispatch %s binding %d: range [%d, +%d) outside %d bytes", wk.name, i, bd.Offset, size, wb.alloc)
		case bd.Offset%align != 0:
			return fmt.Errorf("webgpu: dispatch %s binding %d: offset %d not a multiple of %d", wk.name, i, bd.Offset, align)
		case size > limit:
			return fmt.Errorf("webgpu: dispatch %s binding %d: %d bytes exceed the binding limit %d: %w", wk.name, i, size, limit, gpu.ErrUnsupported)
		case size%4 != 0:
			return fmt.Errorf("webgpu: dispatch %s binding %d: size %d not a multiple of 4", wk.name, i, size)
		}
		used[i] = wb
		entries[i] = wgpu.BindGroupEntry{Binding: uint32(i), Buffer: wb.b, Offset: uint64(bd.Offset), Size: uint64(size)}
	}
	// A buffer bound writable must not be bound again in the same dispatch.
	for i, kind := range wk.kinds {
		if kind != shaders.StorageRW {
			continue
		}
		for j := range used {
			if j != i && used[j] == used[i] {
				return fmt.Errorf("webgpu: dispatch %s: buffer of writable binding %d also bound at %d", wk.name, i, j)
			}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	group, err := d.dev.CreateBindGroup(&wgpu.BindGroupDescriptor{Layout: wk.layout, Entries: entries})
	if err != nil {
		return fmt.Errorf("webgpu: dispatch %s: %w", wk.name, err)
	}
	for _, wb := range used {
		c.bufs[wb] = struct{}{}
	}
	c.kernels[wk] = struct{}{}
	c.cmds = append(c.cmds, command{kind: cmdDispatch, k: wk, group: group, x: uint32(x), y: uint32(y), z: uint32(z)})
	return nil
}

// Copy records a buffer-to-buffer copy (4-byte aligned, distinct buffers).
func (c *commands) Copy(dst gpu.Buffer, dstOff int64, src gpu.Buffer, srcOff int64, size int64) error {
	if err := c.usable(); err != nil {
		return err
	}
	db, err := c.dev.own(dst)
	if err != nil {
		return fmt.Errorf("webgpu: copy destination: %w", err)
	}
	sb, err := c.dev.own(src)
	if err != nil {
		return fmt.Errorf("webgpu: copy source: %w", err)
	}
	if db == sb {
		return errors.New("webgpu: copy within one buffer")
	}
	if dstOff%4 != 0 || srcOff%4 != 0 || size%4 != 0 {
		return fmt.Errorf("webgpu: copy offsets and size must be multiples of 4 (%d, %d, %d)", dstOff, srcOff, size)
	}
	if size < 0 || srcOff < 0 || dstOff < 0 || srcOff+size > sb.alloc || dstOff+size > db.alloc {
		return fmt.Errorf("webgpu: copy of %d bytes out of range", size)
	}
	c.bufs[db], c.bufs[sb] = struct{}{}, struct{}{}
	c.cmds = append(c.cmds, command{kind: cmdCopy, dst: db, src: sb, dstOff: uint64(dstOff), srcOff: uint64(srcOff), size: uint64(size)})
	return nil
}

// Timestamp records the device time into slot i.
func (c *commands) Timestamp(i int) error {
	if err := c.usable(); err != nil {
		return err
	}
	if !c.dev.caps.Timestamps {
		return fmt.Errorf("webgpu: timestamps: %w", gpu.ErrUnsupported)
	}
	if i < 0 || i >= timestampSlots {
		return fmt.Errorf("webgpu: timestamp slot %d outside [0, %d)", i, timestampSlots)
	}
	c.cmds = append(c.cmds, command{kind: cmdTimestamp, slot: uint32(i)})
	return nil
}

// Finish closes the list for recording.
func (c *commands) Finish() error {
	if err := c.usable(); err != nil {
		return err
	}
	c.finished = true
	return nil
}

// Release frees the recorded bind groups.
func (c *commands) Release() {
	if c.released.Swap(true) {
		return
	}
	c.dev.mu.Lock()
	defer c.dev.mu.Unlock()
	for _, cmd := range c.cmds {
		if cmd.group != nil {
			cmd.group.Release()
		}
	}
	c.cmds = nil
}

// Submit encodes and queues the lists in order after checking that every
// list is finished and every buffer and kernel it uses is still alive.
func (d *Device) Submit(lists ...gpu.Commands) error {
	cs, err := d.submittable(lists)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	return d.submitLocked(cs)
}

// submittable checks lists for Submit: finished lists of this device
// whose buffers and kernels are alive.
func (d *Device) submittable(lists []gpu.Commands) ([]*commands, error) {
	cs := make([]*commands, len(lists))
	for i, l := range lists {
		c, ok := l.(*commands)
		if !ok || c == nil || c.dev != d {
			return nil, fmt.Errorf("webgpu: submit: %T is not a command list of this device", l)
		}
		if c.released.Load() {
			return nil, errors.New("webgpu: submit: command list used after Release")
		}
		if !c.finished {
			return nil, ErrNotFinished
		}
		for b := range c.bufs {
			if b.released.Load() {
				return nil, errors.New("webgpu: submit: a recorded buffer was released")
			}
		}
		for k := range c.kernels {
			if k.released.Load() {
				return nil, fmt.Errorf("webgpu: submit: kernel %s was released", k.name)
			}
		}
		cs[i] = c
	}
	return cs, nil
}

// submitLocked encodes and queues cs. d.mu is held.
func (d *Device) submitLocked(cs []*commands) error {
	noteSubmit(d, cs)
	if handled, err := submitReplay(d, cs); handled {
		return err
	}
	enc, err := d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return fmt.Errorf("webgpu: submit: %w", err)
	}
	defer enc.Release()
	var pass *wgpu.ComputePassEncoder
	var cur *kernel // the pipeline set in pass
	endPass := func() error {
		if pass == nil {
			return nil
		}
		err := endComputePass(pass)
		// The binding requires releasing the pass before Finish.
		pass.Release()
		pass = nil
		return err
	}
	for _, c := range cs {
		for _, cmd := range c.cmds {
			switch cmd.kind {
			case cmdDispatch:
				if cmd.x == 0 || cmd.y == 0 || cmd.z == 0 {
					continue
				}
				if pass == nil {
					pass, cur = enc.BeginComputePass(nil), nil
				}
				if cmd.k != cur {
					// Consecutive dispatches of one kernel (a split
					// weight's row blocks, a multi-step submission's
					// repeated steps) set its pipeline once.
					pass.SetPipeline(cmd.k.pipeline)
					cur = cmd.k
				}
				pass.SetBindGroup(0, cmd.group, nil)
				pass.DispatchWorkgroups(cmd.x, cmd.y, cmd.z)
			case cmdCopy:
				if err := endPass(); err != nil {
					return fmt.Errorf("webgpu: submit: %w", err)
				}
				if err := enc.CopyBufferToBuffer(cmd.src.b, cmd.srcOff, cmd.dst.b, cmd.dstOff, cmd.size); err != nil {
					return fmt.Errorf("webgpu: submit copy: %w", err)
				}
			case cmdTimestamp:
				if err := endPass(); err != nil {
					return fmt.Errorf("webgpu: submit: %w", err)
				}
				if err := writeTimestamp(enc, d.queries, cmd.slot); err != nil {
					return fmt.Errorf("webgpu: submit timestamp: %w", err)
				}
			}
		}
	}
	if err := endPass(); err != nil {
		return fmt.Errorf("webgpu: submit: %w", err)
	}
	cb, err := enc.Finish(nil)
	if err != nil {
		return fmt.Errorf("webgpu: submit: %w", err)
	}
	d.queue.Submit(cb)
	cb.Release()
	return nil
}

// ReadTimestamps waits for submitted work and returns the first n timestamp
// slots in nanoseconds. wgpu-native reports raw ticks; lavapipe and most
// desktop drivers tick once per nanosecond.
func (d *Device) ReadTimestamps(n int) ([]uint64, error) {
	if !d.caps.Timestamps {
		return nil, fmt.Errorf("webgpu: timestamps: %w", gpu.ErrUnsupported)
	}
	if n < 0 || n > timestampSlots {
		return nil, fmt.Errorf("webgpu: %d timestamps outside [0, %d]", n, timestampSlots)
	}
	if n == 0 {
		return []uint64{}, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	if ts, ok := cachedTimestamps(d, n); ok {
		return ts, nil
	}
	if err := d.ensureStaging(int64(n) * 8); err != nil {
		return nil, err
	}
	enc, err := d.dev.CreateCommandEncoder(nil)
	if err != nil {
		return nil, fmt.Errorf("webgpu: timestamps: %w", err)
	}
	defer enc.Release()
	if err := resolveTimestamps(enc, d.queries, uint32(n), d.resolved); err != nil {
		return nil, fmt.Errorf("webgpu: resolve timestamps: %w", err)
	}
	if err := enc.CopyBufferToBuffer(d.resolved, 0, d.staging, 0, uint64(n)*8); err != nil {
		return nil, fmt.Errorf("webgpu: timestamps: %w", err)
	}
	cb, err := enc.Finish(nil)
	if err != nil {
		return nil, fmt.Errorf("webgpu: timestamps: %w", err)
	}
	d.queue.Submit(cb)
	cb.Release()
	raw := make([]byte, n*8)
	if err := mapRead(d.dev, d.staging, raw); err != nil {
		return nil, err
	}
	out := make([]uint64, n)
	for i := range out {
		for j := 7; j >= 0; j-- {
			out[i] = out[i]<<8 | uint64(raw[i*8+j])
		}
	}
	return out, nil
}
