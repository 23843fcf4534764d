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
	// MatVec picks the decode matrix-vector kernel: MatVecRows (one
	// invocation per output row: fastest on CPU drivers such as lavapipe),
	// MatVecLanes (16 invocations per row reading contiguous words:
	// coalesced loads on GPUs) or MatVecAuto (rows on CPU devices, lanes
	// elsewhere).
	MatVec MatVecKind
	// Attention picks the attention kernels (AttentionAuto: split over
	// the sequence for decode, per head and token for prefill).
	Attention AttentionKind
}

// MatVecKind selects the decode matrix-vector kernel.
type MatVecKind uint8

const (
	MatVecAuto MatVecKind = iota
	MatVecRows
	MatVecLanes
)

type backend struct {
	dev        gpu.Device
	info       gpu.Info
	lanes      bool // matvec_lanes rather than matvec
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
	lanes := opts.MatVec == MatVecLanes || (opts.MatVec == MatVecAuto && info.Type != gpu.CPU)
	return &backend{dev: dev, info: info, lanes: lanes, attention: opts.Attention, maxBinding: mb &^ 3, devBinding: dev0 &^ 3, kernels: map[string]gpu.Kernel{}}
}

func (b *backend) Info() gpu.Info { return b.info }

// kernel compiles a shaders kernel once per backend.
func (b *backend) kernel(name string) (gpu.Kernel, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if k, ok := b.kernels[name]; ok {
		return k, nil
	}
	spec, err := shaders.Get(name)
	if err != nil {
		return nil, fmt.Errorf("kernels: %w", err)
	}
	k, err := b.dev.NewKernel(spec)
	if err != nil {
		return nil, fmt.Errorf("kernels: compile %s: %w", name, err)
	}
	b.kernels[name] = k
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
