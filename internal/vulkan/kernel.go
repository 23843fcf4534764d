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
	layoutBindings := make([]vk.DescriptorSetLayoutBinding, len(spec.Bindings))
	for i, kind := range spec.Bindings {
		t, ok := descriptorType(kind)
		if !ok {
			return nil, fmt.Errorf("vulkan: kernel %q: binding %d has unknown kind %d: %w", spec.Name, i, kind, ErrInvalid)
		}
		layoutBindings[i] = vk.DescriptorSetLayoutBinding{
			Binding:         uint32(i),
			DescriptorType:  t,
			DescriptorCount: 1,
			StageFlags:      vk.ShaderStageFlags(vk.ShaderStageComputeBit),
		}
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
	k := &kernel{d: d, name: spec.Name, bindings: append([]shaders.BindingKind(nil), spec.Bindings...)}
	fail := func(err error) (gpu.Kernel, error) {
		k.destroy()
		return nil, fmt.Errorf("vulkan: kernel %q: %w", spec.Name, err)
	}

	modInfo := vk.ShaderModuleCreateInfo{
		SType:    vk.StructureTypeShaderModuleCreateInfo,
		CodeSize: uint(len(spec.SPIRV)),
		PCode:    code,
	}
	var module vk.ShaderModule
	// Under noGC, as vkCreateComputePipelines below: the wrappers copy the
	// create infos (the SPIR-V words, the bindings, the set layouts) into C
	// memory that only a finalizer owns (gcguard.go); with kernels created
	// in parallel the validation rerun once found a module without valid
	// SPIR-V, as freed memory would read.
	if err := check("vkCreateShaderModule", noGC(func() vk.Result { return vk.CreateShaderModule(d.dev, &modInfo, nil, &module) })); err != nil {
		return fail(err)
	}
	k.module = module

	setInfo := vk.DescriptorSetLayoutCreateInfo{
		SType:        vk.StructureTypeDescriptorSetLayoutCreateInfo,
		BindingCount: uint32(len(layoutBindings)),
		PBindings:    layoutBindings,
	}
	var setLayout vk.DescriptorSetLayout
	if err := check("vkCreateDescriptorSetLayout", noGC(func() vk.Result { return vk.CreateDescriptorSetLayout(d.dev, &setInfo, nil, &setLayout) })); err != nil {
		return fail(err)
	}
	k.setLayout = setLayout

	plInfo := vk.PipelineLayoutCreateInfo{
		SType:          vk.StructureTypePipelineLayoutCreateInfo,
		SetLayoutCount: 1,
		PSetLayouts:    []vk.DescriptorSetLayout{setLayout},
	}
	var layout vk.PipelineLayout
	if err := check("vkCreatePipelineLayout", noGC(func() vk.Result { return vk.CreatePipelineLayout(d.dev, &plInfo, nil, &layout) })); err != nil {
		return fail(err)
	}
	k.layout = layout

	fb := d.newFeedback()
	defer fb.free()
	pipeInfo := []vk.ComputePipelineCreateInfo{{
		SType: vk.StructureTypeComputePipelineCreateInfo,
		PNext: fb.next(),
		Stage: vk.PipelineShaderStageCreateInfo{
			SType:  vk.StructureTypePipelineShaderStageCreateInfo,
			Stage:  vk.ShaderStageComputeBit,
			Module: module,
			PName:  entry + "\x00",
		},
		Layout:            layout,
		BasePipelineIndex: -1,
	}}
	pipes := make([]vk.Pipeline, 1)
	start := time.Now()
	if err := check("vkCreateComputePipelines", noGC(func() vk.Result {
		return vk.CreateComputePipelines(d.dev, d.pcache.handle, 1, pipeInfo, nil, pipes)
	})); err != nil {
		return fail(err)
	}
	d.pcache.created(time.Since(start), fb)
	k.pipeline = pipes[0]
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
