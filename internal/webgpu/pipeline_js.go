//go:build js

package webgpu

import (
	"fmt"
	"strings"
	"syscall/js"
	"unsafe"

	"github.com/cogentcore/webgpu/jsx"
	"github.com/cogentcore/webgpu/wgpu"
)

// compileUnlocked: NewKernel leaves the device's mutex while it awaits
// createPipeline, so the page's kernels compile at once (the browser
// compiles async pipelines off its GPU process's main thread, in parallel
// where it has the cores) where they compiled one after another, each
// load's kernels awaited in turn (compute's compileKernels starts them
// together: compileWorkers).
const compileUnlocked = true

// createPipeline creates a compute pipeline with createComputePipelineAsync
// and waits for it. The binding's CreateComputePipeline calls the
// synchronous createComputePipeline, which returns at once: the browser
// compiles the pipeline when a dispatch first needs it, so every kernel's
// compile (10-18 s on SwiftShader for a model) landed in the first
// generation's prefill. Awaited here, the compile belongs to the model's
// load (the plan compiles its kernels then).
//
// A pipeline the browser rejects (its WGSL fails the browser's checks,
// such as WGSL's uniformity analysis, which naga does not do) is logged to
// the console with the compiler's messages and made the synchronous way, as
// before: an invalid pipeline the browser reports when a dispatch uses it,
// so one kernel the model may never run (sampling, for greedy decoding)
// does not stop the page loading every model.
func createPipeline(dev *wgpu.Device, desc *wgpu.ComputePipelineDescriptor) (*wgpu.ComputePipeline, error) {
	// Each of the binding's handles is a struct of one js.Value (v0.23.0's
	// device_js.go, pipeline_js.go, shader_js.go, compute_pipeline_js.go).
	compute := js.Global().Get("Object").New()
	compute.Set("module", *(*js.Value)(unsafe.Pointer(desc.Compute.Module)))
	compute.Set("entryPoint", desc.Compute.EntryPoint)
	d := js.Global().Get("Object").New()
	d.Set("layout", *(*js.Value)(unsafe.Pointer(desc.Layout)))
	d.Set("compute", compute)
	v, ok := jsx.Await((*(*js.Value)(unsafe.Pointer(dev))).Call("createComputePipelineAsync", d))
	if !ok {
		js.Global().Get("console").Call("warn", fmt.Sprintf("gpurun: the page's WebGPU rejected the compute pipeline of %q: %s%s",
			desc.Compute.EntryPoint, v.Call("toString").String(), compileMessages(desc.Compute.Module)))
		return dev.CreateComputePipeline(desc)
	}
	p := new(wgpu.ComputePipeline)
	*(*js.Value)(unsafe.Pointer(p)) = v
	return p, nil
}

// compileMessages is the shader module's compilation errors
// (GPUShaderModule.getCompilationInfo), one per line, for an error message.
func compileMessages(m *wgpu.ShaderModule) string {
	info, ok := jsx.Await((*(*js.Value)(unsafe.Pointer(m))).Call("getCompilationInfo"))
	if !ok || !info.Truthy() {
		return ""
	}
	var b strings.Builder
	msgs := info.Get("messages")
	for i := range msgs.Length() {
		msg := msgs.Index(i)
		if msg.Get("type").String() != "error" {
			continue
		}
		fmt.Fprintf(&b, "\n  line %d:%d: %s", msg.Get("lineNum").Int(), msg.Get("linePos").Int(), msg.Get("message").String())
	}
	return b.String()
}
