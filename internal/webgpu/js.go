//go:build js

package webgpu

// The browser side (GOOS=js) of what differs between the binding's
// wgpu-native and navigator.gpu implementations (native.go is the other).
// The page's WebGPU records timestamps only at pass boundaries (an empty
// pass stands for each), reports its adapter through adapter.info, and maps buffers with a promise that
// mapRead awaits: the calling goroutine blocks on a channel while the JS
// event loop runs, so gpurun must never be called from a JS callback's own
// goroutine (cmd/gpurun-web runs every request in a goroutine of its own).

import (
	"errors"
	"fmt"
	"syscall/js"
	"unsafe"

	"github.com/cogentcore/webgpu/jsx"
	"github.com/cogentcore/webgpu/wgpu"
)

// querySet is the page's GPUQuerySet of timestamps, made where the adapter
// offers "timestamp-query" (Chromium does; it may quantize the times to
// 100 µs unless its WebGPU developer features are on).
type querySet struct{ v js.Value }

func (q *querySet) Release() {
	if q != nil && q.v.Truthy() {
		q.v.Call("destroy")
	}
}

// noAdapter says, in the page's terms, that there is no adapter.
const noAdapter = "the browser's WebGPU (navigator.gpu) offers this page no adapter"

// usableBackend: the page's one adapter is whatever the browser offers.
func usableBackend(wgpu.AdapterInfo) bool { return true }

// enumerateUsable lists the page's adapter.
func enumerateUsable(inst *wgpu.Instance) []*wgpu.Adapter { return inst.EnumerateAdapters(nil) }

// timestampFeature is WebGPU's name of the timestamp queries.
const timestampFeature = "timestamp-query"

func hasTimestamps(a *wgpu.Adapter) bool {
	return jsValue(a).Get("features").Call("has", timestampFeature).Truthy()
}

// subgroupFeature is WebGPU's name of subgroup operations.
const subgroupFeature = "subgroups"

// subgroupSizes is adapter.info's subgroupMinSize and subgroupMaxSize
// where adapter a offers WebGPU's subgroups; none where it does not (or
// does not say its sizes). Whether the kernels suit them is the backend's
// call (gpu.Caps.SubgroupSize, SubgroupMaxSize).
func subgroupSizes(a *wgpu.Adapter) subgroupRange {
	av := jsValue(a)
	if !av.Get("features").Call("has", subgroupFeature).Truthy() {
		return subgroupRange{}
	}
	info := av.Get("info")
	lo, hi := info.Get("subgroupMinSize"), info.Get("subgroupMaxSize")
	if lo.Type() != js.TypeNumber || hi.Type() != js.TypeNumber || lo.Int() < 1 {
		return subgroupRange{}
	}
	return subgroupRange{lo.Int(), hi.Int()}
}

func createTimestamps(dev *wgpu.Device, n uint32) (q *querySet, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("webgpu: createQuerySet: %v", r)
		}
	}()
	desc := js.Global().Get("Object").New()
	desc.Set("type", "timestamp")
	desc.Set("count", n)
	return &querySet{v: handle(dev).Call("createQuerySet", desc)}, nil
}

// timestampPass is the descriptor of an empty compute pass that writes
// the device time into slot: WebGPU records timestamps only at the
// boundaries of passes (GPUCommandEncoder.writeTimestamp left the
// standard), so a timestamp between two passes is a pass of its own.
func timestampPass(qs *querySet, slot uint32) js.Value {
	tw := js.Global().Get("Object").New()
	tw.Set("querySet", qs.v)
	tw.Set("beginningOfPassWriteIndex", slot)
	desc := js.Global().Get("Object").New()
	desc.Set("timestampWrites", tw)
	return desc
}

func writeTimestamp(enc *wgpu.CommandEncoder, qs *querySet, slot uint32) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("webgpu: timestamp: %v", r)
		}
	}()
	handle(enc).Call("beginComputePass", timestampPass(qs, slot)).Call("end")
	return nil
}

func resolveTimestamps(enc *wgpu.CommandEncoder, qs *querySet, n uint32, dst *wgpu.Buffer) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("webgpu: resolveQuerySet: %v", r)
		}
	}()
	handle(enc).Call("resolveQuerySet", qs.v, 0, n, handle(dst), 0)
	return nil
}

func endComputePass(p *wgpu.ComputePassEncoder) error {
	p.End()
	return nil
}

func computePipeline(_ string, layout *wgpu.PipelineLayout, stage wgpu.ProgrammableStageDescriptor) *wgpu.ComputePipelineDescriptor {
	return &wgpu.ComputePipelineDescriptor{Layout: layout, Compute: stage}
}

// jsValue is the GPUAdapter behind the binding's Adapter, whose only field
// is that js.Value (v0.23.0's adapter_js.go).
func jsValue(a *wgpu.Adapter) js.Value { return *(*js.Value)(unsafe.Pointer(a)) }

func adapterFeatures(a *wgpu.Adapter) []string {
	var out []string
	jsValue(a).Get("features").Call("forEach", js.FuncOf(func(_ js.Value, args []js.Value) any {
		out = append(out, args[0].String())
		return nil
	}))
	return out
}

// adapterInfo fills the binding's AdapterInfo (left empty by its browser
// side) from GPUAdapter.info: vendor and architecture name the adapter
// ("google swiftshader" on Chromium's software adapter).
func adapterInfo(a *wgpu.Adapter) wgpu.AdapterInfo {
	info := jsValue(a).Get("info")
	if !info.Truthy() {
		return wgpu.AdapterInfo{Name: "browser WebGPU adapter"}
	}
	str := func(k string) string {
		if v := info.Get(k); v.Type() == js.TypeString {
			return v.String()
		}
		return ""
	}
	name := str("vendor")
	if arch := str("architecture"); arch != "" {
		name += " " + arch
	}
	if d := str("device"); d != "" {
		name += " " + d
	}
	if name == "" {
		name = "browser WebGPU adapter"
	}
	ai := wgpu.AdapterInfo{Name: name, VendorName: str("vendor"), DriverDescription: str("description")}
	if jsValue(a).Get("isFallbackAdapter").Truthy() || str("architecture") == "swiftshader" {
		ai.AdapterType = wgpu.AdapterTypeCPU
	}
	return ai
}

// requestDevice asks for the adapter's own limits: the binding's browser
// side drops RequiredLimits, which would leave the WebGPU defaults (128 MiB
// storage bindings, 8 storage buffers per stage).
func requestDevice(a *wgpu.Adapter, desc *wgpu.DeviceDescriptor, subgroups bool) (*wgpu.Device, error) {
	av := jsValue(a)
	limits := js.Global().Get("Object").New()
	al := av.Get("limits")
	for _, k := range []string{
		"maxBufferSize", "maxStorageBufferBindingSize", "maxStorageBuffersPerShaderStage",
		"maxUniformBuffersPerShaderStage", "maxComputeWorkgroupStorageSize",
		"maxComputeInvocationsPerWorkgroup", "maxComputeWorkgroupSizeX", "maxComputeWorkgroupSizeY",
		"maxComputeWorkgroupSizeZ", "maxComputeWorkgroupsPerDimension", "maxBindGroups",
		"maxUniformBufferBindingSize",
	} {
		if v := al.Get(k); v.Type() == js.TypeNumber {
			limits.Set(k, v)
		}
	}
	d := js.Global().Get("Object").New()
	d.Set("label", desc.Label)
	d.Set("requiredLimits", limits)
	features := js.Global().Get("Array").New()
	for _, f := range desc.RequiredFeatures {
		if f == wgpu.FeatureNameTimestampQuery {
			features.Call("push", timestampFeature)
		}
	}
	if subgroups {
		features.Call("push", subgroupFeature)
	}
	d.Set("requiredFeatures", features)
	dev, ok := jsx.Await(av.Call("requestDevice", d))
	if !ok || !dev.Truthy() {
		return nil, fmt.Errorf("webgpu: the browser refused a device: %s", dev.Call("toString").String())
	}
	wd := wgpu.NewDevice(dev)
	return &wd, nil
}

// mapRead copies the first len(dst) bytes of the map-readable buffer b into
// dst through GPUBuffer.mapAsync, which waits for the work submitted before
// it. The binding's MapAsync awaits the promise but reports success even on
// a rejection; a rejected map unmaps nothing and getMappedRange throws, which
// this turns into an error.
func mapRead(_ *wgpu.Device, b *wgpu.Buffer, dst []byte) (err error) {
	if len(dst) == 0 {
		return nil
	}
	bv := *(*js.Value)(unsafe.Pointer(b)) // Buffer's only field (buffer_js.go)
	_, ok := jsx.Await(bv.Call("mapAsync", 1 /* GPUMapMode.READ */, 0, len(dst)))
	if !ok {
		return errors.New("webgpu: buffer map failed (mapAsync rejected)")
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("webgpu: mapped range: %v", r)
		}
		bv.Call("unmap")
	}()
	ab := bv.Call("getMappedRange", 0, len(dst))
	if n := js.CopyBytesToGo(dst, js.Global().Get("Uint8Array").New(ab)); n != len(dst) {
		return fmt.Errorf("webgpu: mapped %d bytes, want %d", n, len(dst))
	}
	return nil
}

// queueIdle reports true: the binding's Poll is a no-op that always says
// "busy" in the browser, and a goroutine spinning on it would never let the
// JS event loop run the queue. The page's queue is ordered, and mapRead
// awaits its map promise after the work it reads, so there is nothing to
// wait for here.
func queueIdle(*wgpu.Device) bool { return true }
