//go:build cgo

package vulkan

import (
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	vk "github.com/vulkan-go/vulkan"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// spirvMagic is the first word of every SPIR-V module.
const spirvMagic = 0x07230203

// kernel is a compute pipeline with its descriptor set layout (group 0).
type kernel struct {
	d         *Device
	name      string
	bindings  []shaders.BindingKind
	types     []int32 // each binding's VkDescriptorType
	module    vk.ShaderModule
	setLayout vk.DescriptorSetLayout
	layout    vk.PipelineLayout
	pipeline  vk.Pipeline
	released  atomic.Bool
}

var _ gpu.Kernel = (*kernel)(nil)

// descriptorType maps a binding kind to its Vulkan descriptor type.
func descriptorType(k shaders.BindingKind) (vk.DescriptorType, bool) {
	switch k {
	case shaders.StorageRead, shaders.StorageRW:
		return vk.DescriptorTypeStorageBuffer, true
	case shaders.Uniform:
		return vk.DescriptorTypeUniformBuffer, true
	}
	return 0, false
}

// NewKernel builds a compute pipeline from spec.SPIRV; binding i of
// spec.Bindings is descriptor set 0, binding i.
func (d *Device) NewKernel(spec shaders.KernelSpec) (gpu.Kernel, error) {
	if err := gpu.CheckBindingLimits(d.Caps(), spec); err != nil {
		return nil, fmt.Errorf("vulkan: %w", err)
	}
	code, err := spirvWords(spec.SPIRV)
	if err != nil {
		return nil, fmt.Errorf("vulkan: kernel %q: %w", spec.Name, err)
	}
	types := make([]int32, len(spec.Bindings))
	for i, kind := range spec.Bindings {
		t, ok := descriptorType(kind)
		if !ok {
			return nil, fmt.Errorf("vulkan: kernel %q: binding %d has unknown kind %d: %w", spec.Name, i, kind, ErrInvalid)
		}
		types[i] = int32(t)
	}
	entry := spec.Entry
	if entry == "" {
		entry = "main"
	}
	// The objects are created without the device's lock (the driver's
	// object creation and the pipeline cache are thread-safe), so that
	// kernels compile in parallel (lavapipe takes up to a second for a
	// pipeline) and submissions go on meanwhile; Close waits for
	// creations under way before it destroys the device.
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, ErrClosed
	}
	d.creating.Add(1)
	d.mu.Unlock()
	defer d.creating.Done()
	k := &kernel{d: d, name: spec.Name, bindings: append([]shaders.BindingKind(nil), spec.Bindings...), types: types}
	fail := func(err error) (gpu.Kernel, error) {
		k.destroy()
		return nil, fmt.Errorf("vulkan: kernel %q: %w", spec.Name, err)
	}

	// The objects are made through vkcalls.c, not the Go binding, whose
	// wrappers would hold the SPIR-V, the bindings and the create infos in
	// memory a garbage collection may free during the call (vkcalls.h).
	module, res := d.calls.createShaderModule(d.dev, code)
	if err := check("vkCreateShaderModule", res); err != nil {
		return fail(err)
	}
	k.module = module
	setLayout, err := d.calls.createSetLayout(d.dev, types)
	if err != nil {
		return fail(err)
	}
	k.setLayout = setLayout
	layout, res := d.calls.createPipelineLayout(d.dev, setLayout)
	if err := check("vkCreatePipelineLayout", res); err != nil {
		return fail(err)
	}
	k.layout = layout

	fb := d.newFeedback()
	defer fb.free()
	start := time.Now()
	pipeline, res := d.calls.createComputePipeline(d.dev, d.pcache.handle, module, entry, layout, fb.next())
	if err := check("vkCreateComputePipelines", res); err != nil {
		return fail(err)
	}
	d.pcache.created(time.Since(start), fb)
	k.pipeline = pipeline
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		// Closed meanwhile: Close is waiting for this creation to end
		// before it destroys the device.
		return fail(ErrClosed)
	}
	d.kernels[k] = struct{}{}
	return k, nil
}

// spirvWords checks the SPIR-V header and returns the module as words.
func spirvWords(b []byte) ([]uint32, error) {
	if len(b) < 20 || len(b)%4 != 0 {
		return nil, fmt.Errorf("SPIR-V of %d bytes is not a whole number of words with a header: %w", len(b), ErrInvalid)
	}
	if binary.LittleEndian.Uint32(b) != spirvMagic {
		return nil, fmt.Errorf("SPIR-V magic number missing (want little-endian 0x%08x): %w", spirvMagic, ErrInvalid)
	}
	words := make([]uint32, len(b)/4)
	for i := range words {
		words[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return words, nil
}

// Release waits for submitted work and frees the pipeline.
func (k *kernel) Release() {
	d := k.d
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || k.released.Load() {
		return
	}
	if err := d.waitLocked(); err != nil {
		vk.DeviceWaitIdle(d.dev)
	}
	delete(d.kernels, k)
	k.destroy()
}

func (k *kernel) destroy() {
	if k.released.Swap(true) {
		return
	}
	dev := k.d.dev
	if k.pipeline != vk.NullPipeline {
		vk.DestroyPipeline(dev, k.pipeline, nil)
	}
	if k.layout != vk.NullPipelineLayout {
		vk.DestroyPipelineLayout(dev, k.layout, nil)
	}
	if k.setLayout != vk.NullDescriptorSetLayout {
		vk.DestroyDescriptorSetLayout(dev, k.setLayout, nil)
	}
	if k.module != vk.NullShaderModule {
		vk.DestroyShaderModule(dev, k.module, nil)
	}
}
