//go:build cgo

package vulkan

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"

	vk "github.com/vulkan-go/vulkan"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// Descriptor pools are allocated in blocks of this many sets; a command list
// grows a new block when a dispatch does not fit in the current one.
const (
	poolSets     = 256
	poolStorage  = 8 * poolSets
	poolUniforms = 2 * poolSets
)

// descPool is one descriptor pool block with what is left in it.
type descPool struct {
	pool                    vk.DescriptorPool
	sets, storage, uniforms int
}

// commands is a primary command buffer from its own command pool (pools
// are externally synchronized, so lists recorded on different goroutines
// must not share one) plus the descriptor pools its dispatches use.
type commands struct {
	d    *Device
	pool vk.CommandPool
	cb   vk.CommandBuffer
	desc []*descPool
	// sets holds the descriptor set of every distinct dispatch recorded
	// so far (kernel and bound windows): a dispatch bound as an earlier
	// one binds that set again instead of allocating and writing its own.
	// A multi-step list repeats a decode step's dispatches N times with
	// the same bindings, so it writes one step's sets, not N.
	sets     map[setKey]vk.DescriptorSet
	bufIDs   map[*buffer]uint64 // each bound buffer's number in setKey
	buffers  map[*buffer]struct{}
	kernels  map[*kernel]struct{}
	hazards  hazards
	finished bool
	released atomic.Bool
}

var _ gpu.Commands = (*commands)(nil)

// NewCommands starts recording a command list. Lists are recorded with
// simultaneous use, so one list may be submitted again while it still runs.
func (d *Device) NewCommands() (gpu.Commands, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	c := &commands{d: d, sets: map[setKey]vk.DescriptorSet{}, bufIDs: map[*buffer]uint64{}, buffers: map[*buffer]struct{}{}, kernels: map[*kernel]struct{}{}}
	pool, res := d.calls.createCommandPool(d.dev, 0, d.phys.family)
	if err := check("vkCreateCommandPool", res); err != nil {
		return nil, err
	}
	c.pool = pool
	cb, res := d.calls.allocateCommandBuffer(d.dev, pool)
	if err := check("vkAllocateCommandBuffers", res); err != nil {
		c.destroy()
		return nil, err
	}
	c.cb = cb
	if err := check("vkBeginCommandBuffer", d.calls.beginCommandBuffer(c.cb, vk.CommandBufferUsageSimultaneousUseBit)); err != nil {
		c.destroy()
		return nil, err
	}
	d.commands[c] = struct{}{}
	return c, nil
}

// recording reports why c cannot take more commands, if it cannot.
func (c *commands) recording() error {
	if c.released.Load() {
		return fmt.Errorf("vulkan: command list: %w", ErrReleased)
	}
	if c.finished {
		return fmt.Errorf("vulkan: command list already finished: %w", ErrInvalid)
	}
	return nil
}

// submittable reports why c cannot be submitted, if it cannot: it must be
// finished and everything it recorded must still exist.
func (c *commands) submittable() error {
	if c.released.Load() {
		return ErrReleased
	}
	if !c.finished {
		return fmt.Errorf("not finished: %w", ErrInvalid)
	}
	for b := range c.buffers {
		if b.released.Load() {
			return fmt.Errorf("uses a released buffer of %d bytes: %w", b.size, ErrReleased)
		}
	}
	for k := range c.kernels {
		if k.released.Load() {
			return fmt.Errorf("uses released kernel %q: %w", k.name, ErrReleased)
		}
	}
	return nil
}

// Dispatch records kernel k over x*y*z workgroups with bindings in order.
func (c *commands) Dispatch(gk gpu.Kernel, bindings []gpu.Binding, x, y, z int) error {
	if err := c.recording(); err != nil {
		return err
	}
	d := c.d
	k, ok := gk.(*kernel)
	if !ok || k == nil || k.d != d {
		return fmt.Errorf("vulkan: dispatch: kernel is not from this device: %w", ErrInvalid)
	}
	if k.released.Load() {
		return fmt.Errorf("vulkan: dispatch %q: %w", k.name, ErrReleased)
	}
	if len(bindings) != len(k.bindings) {
		return fmt.Errorf("vulkan: dispatch %q: %d bindings, kernel declares %d: %w", k.name, len(bindings), len(k.bindings), ErrInvalid)
	}
	for i, n := range [3]int{x, y, z} {
		if n < 0 || n > d.info.MaxWorkgroupCount[i] {
			return fmt.Errorf("vulkan: dispatch %q: workgroup count %d in dimension %d outside [0, %d]: %w",
				k.name, n, i, d.info.MaxWorkgroupCount[i], ErrInvalid)
		}
	}
	infos := make([]vk.DescriptorBufferInfo, len(bindings))
	bufs := make([]*buffer, len(bindings))
	storage, uniforms := 0, 0
	for i, bind := range bindings {
		b, info, err := c.bufferInfo(k, i, bind)
		if err != nil {
			return err
		}
		bufs[i], infos[i] = b, info
		if k.bindings[i] == shaders.Uniform {
			uniforms++
		} else {
			storage++
		}
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	key := c.setKey(k, bufs, infos)
	set, reused := c.sets[key]
	if !reused {
		var err error
		if set, err = c.allocateSet(k, storage, uniforms); err != nil {
			return fmt.Errorf("vulkan: dispatch %q: %w", k.name, err)
		}
		c.sets[key] = set
	}
	if len(infos) > 0 && !reused {
		if err := d.calls.updateSet(d.dev, set, k.types, infos); err != nil {
			delete(c.sets, key)
			return fmt.Errorf("vulkan: dispatch %q: %w", k.name, err)
		}
	}
	var reads, writes []*buffer
	for i, b := range bufs {
		if k.bindings[i] == shaders.StorageRW {
			writes = append(writes, b)
		} else {
			reads = append(reads, b)
		}
	}
	if c.hazards.access(reads, writes) {
		d.fullBarrier(c.cb)
	}
	vk.CmdBindPipeline(c.cb, vk.PipelineBindPointCompute, k.pipeline)
	vk.CmdBindDescriptorSets(c.cb, vk.PipelineBindPointCompute, k.layout, 0, 1, []vk.DescriptorSet{set}, 0, nil)
	vk.CmdDispatch(c.cb, uint32(x), uint32(y), uint32(z))
	for _, b := range bufs {
		c.buffers[b] = struct{}{}
	}
	c.kernels[k] = struct{}{}
	return nil
}

// setKey names a descriptor set's contents: the kernel (its set layout)
// and each binding's buffer (numbered in the order the list first bound
// it) and window.
type setKey struct {
	k       *kernel
	windows string // per binding: buffer number, offset, range (3 x 8 bytes)
}

func (c *commands) setKey(k *kernel, bufs []*buffer, infos []vk.DescriptorBufferInfo) setKey {
	w := make([]byte, 0, 24*len(bufs))
	for i, b := range bufs {
		id, ok := c.bufIDs[b]
		if !ok {
			id = uint64(len(c.bufIDs))
			c.bufIDs[b] = id
		}
		w = binary.LittleEndian.AppendUint64(w, id)
		w = binary.LittleEndian.AppendUint64(w, uint64(infos[i].Offset))
		w = binary.LittleEndian.AppendUint64(w, uint64(infos[i].Range))
	}
	return setKey{k: k, windows: string(w)}
}

// bufferInfo validates binding i of a dispatch against the device limits.
func (c *commands) bufferInfo(k *kernel, i int, bind gpu.Binding) (*buffer, vk.DescriptorBufferInfo, error) {
	d := c.d
	what := fmt.Sprintf("dispatch %q binding %d", k.name, i)
	b, err := d.own(bind.Buf, what)
	if err != nil {
		return nil, vk.DescriptorBufferInfo{}, err
	}
	off, size := bind.Offset, bind.Size
	if off < 0 || size < 0 || off > b.size || size > b.size-off {
		return nil, vk.DescriptorBufferInfo{}, fmt.Errorf("vulkan: %s: window [%d, +%d) outside buffer of %d bytes: %w", what, off, size, b.size, ErrInvalid)
	}
	if size == 0 {
		// To the end, including the zero padding to a whole word.
		size = b.alloc - off
	}
	if size == 0 {
		return nil, vk.DescriptorBufferInfo{}, fmt.Errorf("vulkan: %s: empty window at the end of the buffer: %w", what, ErrInvalid)
	}
	limit, align, kind := int64(d.phys.limits.MaxStorageBufferRange), int64(d.phys.limits.MinStorageBufferOffsetAlignment), "maxStorageBufferRange"
	if k.bindings[i] == shaders.Uniform {
		limit, align, kind = int64(d.phys.limits.MaxUniformBufferRange), int64(d.phys.limits.MinUniformBufferOffsetAlignment), "maxUniformBufferRange"
	}
	if align > 1 && off%align != 0 {
		return nil, vk.DescriptorBufferInfo{}, fmt.Errorf("vulkan: %s: offset %d is not a multiple of the device's offset alignment %d: %w", what, off, align, ErrInvalid)
	}
	if size > limit {
		return nil, vk.DescriptorBufferInfo{}, fmt.Errorf("vulkan: %s: window of %d bytes exceeds %s (%d bytes); split the tensor or bind a window: %w", what, size, kind, limit, ErrTooLarge)
	}
	return b, vk.DescriptorBufferInfo{Buffer: b.buf, Offset: vk.DeviceSize(off), Range: vk.DeviceSize(size)}, nil
}

// allocateSet allocates a descriptor set for k from the list's pools,
// growing a new pool block when the current one cannot hold it.
func (c *commands) allocateSet(k *kernel, storage, uniforms int) (vk.DescriptorSet, error) {
	var p *descPool
	if n := len(c.desc); n > 0 {
		p = c.desc[n-1]
	}
	if p == nil || p.sets < 1 || p.storage < storage || p.uniforms < uniforms {
		var err error
		if p, err = c.newDescPool(max(poolStorage, storage), max(poolUniforms, uniforms)); err != nil {
			return vk.NullDescriptorSet, err
		}
	}
	set, res := c.d.calls.allocateSet(c.d.dev, p.pool, k.setLayout)
	if err := check("vkAllocateDescriptorSets", res); err != nil {
		return vk.NullDescriptorSet, err
	}
	p.sets--
	p.storage -= storage
	p.uniforms -= uniforms
	return set, nil
}

func (c *commands) newDescPool(storage, uniforms int) (*descPool, error) {
	pool, res := c.d.calls.createDescriptorPool(c.d.dev, poolSets, storage, uniforms)
	if err := check("vkCreateDescriptorPool", res); err != nil {
		return nil, err
	}
	p := &descPool{pool: pool, sets: poolSets, storage: storage, uniforms: uniforms}
	c.desc = append(c.desc, p)
	return p, nil
}

// Copy records a buffer-to-buffer copy. Any offsets and size are allowed;
// overlapping ranges of one buffer are not (Vulkan forbids them).
func (c *commands) Copy(gdst gpu.Buffer, dstOff int64, gsrc gpu.Buffer, srcOff int64, size int64) error {
	if err := c.recording(); err != nil {
		return err
	}
	dst, err := c.d.own(gdst, "copy destination")
	if err != nil {
		return err
	}
	src, err := c.d.own(gsrc, "copy source")
	if err != nil {
		return err
	}
	if err := dst.span(dstOff, size, "copy destination"); err != nil {
		return err
	}
	if err := src.span(srcOff, size, "copy source"); err != nil {
		return err
	}
	if size == 0 {
		return nil
	}
	if dst == src && dstOff < srcOff+size && srcOff < dstOff+size {
		return fmt.Errorf("vulkan: copy within one buffer overlaps ([%d,+%d) to [%d,+%d)): %w", srcOff, size, dstOff, size, ErrInvalid)
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if c.d.closed {
		return ErrClosed
	}
	if c.hazards.access([]*buffer{src}, []*buffer{dst}) {
		c.d.fullBarrier(c.cb)
	}
	c.d.calls.copyBuffer(c.cb, src.buf, dst.buf, srcOff, dstOff, size)
	c.buffers[src] = struct{}{}
	c.buffers[dst] = struct{}{}
	return nil
}

// Finish ends recording; the list can then be submitted any number of times.
func (c *commands) Finish() error {
	if err := c.recording(); err != nil {
		return err
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if c.d.closed {
		return ErrClosed
	}
	c.d.hostBarrier(c.cb)
	if err := check("vkEndCommandBuffer", vk.EndCommandBuffer(c.cb)); err != nil {
		return err
	}
	c.finished = true
	return nil
}

// Release waits for submitted work and frees the list and its descriptors.
func (c *commands) Release() {
	d := c.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || c.released.Load() {
		return
	}
	if err := d.waitLocked(); err != nil {
		vk.DeviceWaitIdle(d.dev)
	}
	delete(d.commands, c)
	c.destroy()
}

func (c *commands) destroy() {
	if c.released.Swap(true) {
		return
	}
	for _, p := range c.desc {
		vk.DestroyDescriptorPool(c.d.dev, p.pool, nil)
	}
	c.desc = nil
	if c.pool != vk.NullCommandPool {
		// Destroying the pool frees its command buffer.
		vk.DestroyCommandPool(c.d.dev, c.pool, nil)
	}
	c.sets, c.bufIDs, c.buffers, c.kernels = nil, nil, nil, nil
}
