//go:build cgo || js

package webgpu

import (
	"fmt"
	"sync/atomic"

	"github.com/cogentcore/webgpu/wgpu"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// kernel is a compute pipeline with an explicit bind group layout (group 0,
// binding i of kind Bindings[i]), so every kernel of a family binds the same
// way whether or not its entry point uses every binding.
type kernel struct {
	dev      *Device
	name     string
	kinds    []shaders.BindingKind
	module   *wgpu.ShaderModule
	layout   *wgpu.BindGroupLayout
	pipeLay  *wgpu.PipelineLayout
	pipeline *wgpu.ComputePipeline
	released atomic.Bool
}

func (k *kernel) Release() {
	if k.released.Swap(true) {
		return
	}
	k.pipeline.Release()
	k.pipeLay.Release()
	k.layout.Release()
	k.module.Release()
}

func bindingType(k shaders.BindingKind) (wgpu.BufferBindingType, error) {
	switch k {
	case shaders.StorageRead:
		return wgpu.BufferBindingTypeReadOnlyStorage, nil
	case shaders.StorageRW:
		return wgpu.BufferBindingTypeStorage, nil
	case shaders.Uniform:
		return wgpu.BufferBindingTypeUniform, nil
	}
	return 0, fmt.Errorf("webgpu: binding kind %d: %w", k, gpu.ErrUnsupported)
}

// NewKernel compiles spec.WGSL.
func (d *Device) NewKernel(spec shaders.KernelSpec) (gpu.Kernel, error) {
	if spec.WGSL == "" {
		return nil, fmt.Errorf("webgpu: kernel %q has no WGSL: %w", spec.Name, gpu.ErrUnsupported)
	}
	if err := gpu.CheckBindingLimits(d.caps, spec); err != nil {
		return nil, fmt.Errorf("webgpu: %w", err)
	}
	entry := spec.Entry
	if entry == "" {
		entry = "main"
	}
	entries := make([]wgpu.BindGroupLayoutEntry, len(spec.Bindings))
	for i, kind := range spec.Bindings {
		t, err := bindingType(kind)
		if err != nil {
			return nil, fmt.Errorf("webgpu: kernel %q: %w", spec.Name, err)
		}
		entries[i] = wgpu.BindGroupLayoutEntry{Binding: uint32(i), Visibility: wgpu.ShaderStageCompute, Buffer: wgpu.BufferBindingLayout{Type: t}}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, ErrClosed
	}
	k := &kernel{dev: d, name: spec.Name, kinds: append([]shaders.BindingKind(nil), spec.Bindings...)}
	var err error
	k.module, err = d.dev.CreateShaderModule(&wgpu.ShaderModuleDescriptor{Label: spec.Name, WGSLDescriptor: &wgpu.ShaderModuleWGSLDescriptor{Code: spec.WGSL}})
	if err != nil {
		return nil, fmt.Errorf("webgpu: compile %q: %w", spec.Name, err)
	}
	k.layout, err = d.dev.CreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{Label: spec.Name, Entries: entries})
	if err != nil {
		k.module.Release()
		return nil, fmt.Errorf("webgpu: bind group layout of %q: %w", spec.Name, err)
	}
	k.pipeLay, err = d.dev.CreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{Label: spec.Name, BindGroupLayouts: []*wgpu.BindGroupLayout{k.layout}})
	if err != nil {
		k.layout.Release()
		k.module.Release()
		return nil, fmt.Errorf("webgpu: pipeline layout of %q: %w", spec.Name, err)
	}
	desc := computePipeline(spec.Name, k.pipeLay, wgpu.ProgrammableStageDescriptor{Module: k.module, EntryPoint: entry})
	if compileUnlocked {
		// The page awaits the browser's compile (pipeline_js.go): other
		// kernels' compiles start meanwhile.
		d.mu.Unlock()
		k.pipeline, err = createPipeline(d.dev, desc)
		d.mu.Lock()
		if err == nil && d.closed {
			k.pipeline.Release()
			err = ErrClosed
		}
	} else {
		k.pipeline, err = createPipeline(d.dev, desc)
	}
	if err != nil {
		k.pipeLay.Release()
		k.layout.Release()
		k.module.Release()
		return nil, fmt.Errorf("webgpu: pipeline %q: %w", spec.Name, err)
	}
	d.pipelines.Add(1)
	return k, nil
}

// PipelinesCreated counts the compute pipelines (kernels) the device has
// compiled: the browser page reports how many a model's load compiled, which
// a second load of the same model on the same backend must not repeat.
func (d *Device) PipelinesCreated() int64 { return d.pipelines.Load() }
