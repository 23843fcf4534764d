// Package kernels implements gpu.Backend on any gpu.Device with the kernels
// of the shaders package: every op of a fusion graph becomes one or more
// dispatches (one per row block of a weight split under the device's
// binding limit), recorded once into a command list with its parameters
// written once; each Run only writes the small step buffer (position, token
// count, token ids) and submits the same list again.
package kernels

import (
	"fmt"
	"sync"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// Options tunes the backend.
type Options struct {
	// MaxBinding caps the bytes one weight binding covers; 0 means the
	// device's MaxStorageBinding. Tests lower it to exercise the split of
	// weights into row blocks; activations and the cache keep the device
	// limit.
	MaxBinding int64
	// Class picks the matrix kernel variants: ClassAuto (by the device
	// type), ClassCPU or ClassGPU (forced; the conformance tests run both
	// on any device).
	Class DeviceClass
	// Attention picks the attention kernels (AttentionAuto: split over
	// the sequence for decode, tiled over queries and keys for prefill).
	Attention AttentionKind
	// Subgroups picks the GPU-class decode kernel's reduction:
	// SubgroupsAuto uses subgroup operations where the device offers them
	// (gpu.Info.SubgroupSize: Vulkan devices with basic and shuffle
	// subgroup operations), SubgroupsOff keeps the portable
	// workgroup-memory reduction everywhere.
	Subgroups SubgroupMode
	// F16 picks the arithmetic of the GPU-class decode kernel where it
	// reduces through subgroups: F16Auto uses f16 arithmetic
	// (matvec_sg_h) for f16 activations (the model's activation policy)
	// and f16, int8 or int4 weights on devices reporting it (gpu.Info.F16:
	// Vulkan with shaderFloat16 and 16-bit storage), F16Off keeps f32
	// arithmetic everywhere.
	F16 F16Mode
}

// F16Mode selects whether kernels may use f16 arithmetic.
type F16Mode uint8

const (
	F16Auto F16Mode = iota
	F16Off
)

func (m F16Mode) String() string {
	if m == F16Off {
		return "nof16"
	}
	return "f16"
}

// SubgroupMode selects whether kernels use subgroup operations.
type SubgroupMode uint8

const (
	SubgroupsAuto SubgroupMode = iota
	SubgroupsOff
)

func (m SubgroupMode) String() string {
	if m == SubgroupsOff {
		return "nosubgroups"
	}
	return "subgroups"
}

// DeviceClass selects a family of kernel variants.
//
// CPU-class variants (CPU devices such as lavapipe, where a workgroup runs
// on one thread as SIMD lanes, every storage load is a per-lane loop and a
// barrier is expensive): matvec_w (the weights and their scales read
// through 64 KiB uniform windows, eight per dispatch, whose loads are
// gathers where storage loads are lane loops; the step's activations from
// a 64 KiB uniform binding) where the device has 13 uniform bindings per
// stage and a window holds a row, else matvec (8 rows per invocation
// sharing each activation load, no barriers; matvec_u where the
// activations fit the uniform binding); for prefill matmul_few_w (the same
// windows, 4 tokens per invocation) or matmul_few_u once per 4 tokens (their
// activations bound as a 64 KiB uniform window; matmul_direct, 4 tokens x
// 8 rows per invocation from memory, where the window does not fit) and,
// for batched steps of up to 4 rows, matmul_few(_u). CPU-class backends pad
// every weight buffer by 64 KiB for the windows.
//
// GPU-class variants (everything else): matvec_lanes (groups of lanes read
// consecutive 16-byte chunks of a row, coalesced; workgroup-memory
// reduction) and matmul (weight tiles dequantized once into workgroup
// memory, 4 tokens x 8 rows per invocation). Shapes whose rows or scale
// blocks do not hold whole 16-byte chunks take the CPU-class kernels, which
// have an element-wise path.
type DeviceClass uint8

const (
	ClassAuto DeviceClass = iota
	ClassCPU
	ClassGPU
)

func (c DeviceClass) String() string {
	switch c {
	case ClassAuto:
		return "auto"
	case ClassCPU:
		return "cpuclass"
	case ClassGPU:
		return "gpuclass"
	}
	return fmt.Sprintf("DeviceClass(%d)", uint8(c))
}

type backend struct {
	dev        gpu.Device
	info       gpu.Info
	gpuClass   bool // GPU-class kernel variants
	subgroups  bool // GPU-class decode reduces through subgroup operations
	f16        bool // ... and may do so in f16 arithmetic (for f16 activations)
	attention  AttentionKind
	maxBinding int64 // bytes per weight binding
	devBinding int64 // bytes per binding of the device

	mu      sync.Mutex
	kernels map[string]gpu.Kernel
}

// New returns a backend running on dev. The backend does not own dev:
// Close releases the compiled kernels, not the device.
func New(dev gpu.Device) gpu.Backend { return NewWithOptions(dev, Options{}) }

// NewWithOptions is New with options.
func NewWithOptions(dev gpu.Device, opts Options) gpu.Backend {
	info := dev.Info()
	mb := info.MaxStorageBinding
	if mb <= 0 {
		mb = 128 << 20
	}
	dev0 := mb
	if opts.MaxBinding > 0 && opts.MaxBinding < mb {
		mb = opts.MaxBinding
	}
	gpuClass := opts.Class == ClassGPU || (opts.Class == ClassAuto && info.Type != gpu.CPU)
	subgroups := gpuClass && opts.Subgroups == SubgroupsAuto && shaders.SubgroupVariantFits(info.SubgroupSize)
	// The f16 variants hold the subgroup reduction; WebGPU (no f16 in its
	// naga) and SwiftShader (no f16 feature) report F16 false.
	f16 := subgroups && info.F16 && info.Backend == "vulkan" && opts.F16 == F16Auto
	return &backend{dev: dev, info: info, gpuClass: gpuClass, subgroups: subgroups, f16: f16, attention: opts.Attention, maxBinding: mb &^ 3, devBinding: dev0 &^ 3, kernels: map[string]gpu.Kernel{}}
}

func (b *backend) Info() gpu.Info { return b.info }

// kernel compiles a shaders kernel (of variant v when v.Key is set) once
// per backend.
func (b *backend) kernel(name string, v shaders.Variant) (gpu.Kernel, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := name
	if v.Key != "" {
		key += "." + v.Key
	}
	if k, ok := b.kernels[key]; ok {
		return k, nil
	}
	var spec gpu.KernelSpec
	var err error
	if v.Key != "" {
		spec, err = shaders.GetVariant(name, v)
	} else {
		spec, err = shaders.Get(name)
	}
	if err != nil {
		return nil, fmt.Errorf("kernels: %w", err)
	}
	k, err := b.dev.NewKernel(spec)
	if err != nil {
		return nil, fmt.Errorf("kernels: compile %s: %w", key, err)
	}
	b.kernels[key] = k
	return k, nil
}

// Close releases the compiled kernels.
func (b *backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range b.kernels {
		k.Release()
	}
	b.kernels = map[string]gpu.Kernel{}
	return nil
}
