// Package compute is the GPU backend: it implements gpu.Backend on any
// gpu.Device (internal/vulkan, internal/webgpu) with the kernels of the shaders
// package. Every op of a fusion graph becomes one or more dispatches (one per row block of a weight split under the device's
// binding limit), recorded once into a command list with its parameters
// written once; each Run only writes the small step buffer (position, token
// count, token ids) and submits the same list again.
//
// Every device runs one kernel set: a software driver (lavapipe,
// SwiftShader) gets exactly the kernels a discrete GPU gets. The planner
// picks among variants only by what a kernel needs of the device
// (capabilities: subgroup operations and their size, shader f16, storage
// bindings per stage) and by the shape of the work, never by the device's
// type (see caps); chooseMatKernel is that choice for the matrix products,
// a pure function of the capabilities and the shape.
//
// The planner dispatches through kernel contracts generated from the WGSL
// (kernels_gen.go, by `go generate ./internal/backend/compute`, held current by
// a test): one value per entry point, typed by its family's uniform struct
// (package shaders) and a bindings struct named after the family's WGSL
// bindings, so the compiler checks every dispatch's parameters and
// buffers; no kernel name is built from strings and no binding list is
// positional. The bindings structs live here, not in package shaders,
// because they hold gpu.Binding values and shaders is a leaf that does not
// import gpu: shaders reports the WGSL names (Family.BindingNames,
// Family.Params) and internal/kernelgen turns them into Go.
package compute

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/tuning"
	"github.com/gpurun/gpurun/shaders"
)

// caps is what the planner may choose kernels by: the capabilities of the
// device the kernels need, with the options that turn them off. It holds
// nothing of the device's type, so a software driver that offers what a
// GPU offers gets the GPU's kernels.
type caps struct {
	subgroups      bool // decode products reduce through subgroup operations (matvec_sg)
	f16            bool // ... and may do so in f16 arithmetic (matvec_sg_h, for f16 activations)
	storageBuffers int  // storage buffers per shader stage (0: unknown, taken as enough)
}

// capsOf returns the capabilities of a device as the options allow them.
func capsOf(dc gpu.Caps, opts tuning.Options) caps {
	// The subgroup kernels read their size from a builtin, so every size
	// the device may run must suit them.
	subgroups := opts.Subgroups == tuning.SubgroupsAuto && shaders.SubgroupVariantFits(dc.SubgroupSize) &&
		shaders.SubgroupVariantFits(max(dc.SubgroupSize, dc.SubgroupMaxSize))
	// The f16 variants hold the subgroup reduction and keep f16 in storage
	// and arithmetic; WebGPU (no f16 in its naga) and SwiftShader (no f16
	// feature) report neither.
	f16 := subgroups && dc.F16() && opts.F16 == tuning.F16Auto
	return caps{subgroups: subgroups, f16: f16, storageBuffers: dc.MaxStorageBuffers}
}

type backend struct {
	dev        gpu.Device
	info       gpu.Info
	devCaps    gpu.Caps // the device's, read once
	caps       caps
	attention  tuning.AttentionKind
	maxBinding int64 // bytes per weight binding
	devBinding int64 // bytes per binding of the device

	mu      sync.Mutex
	kernels map[string]*kernelEntry
}

// New returns a backend running on dev. The backend does not own dev:
// Close releases the compiled kernels, not the device.
func New(dev gpu.Device) gpu.Backend { return NewWithOptions(dev, tuning.Options{}) }

// NewWithOptions is New with the knobs of internal/tuning, which only
// the module's tests turn (a package outside the module cannot name them).
func NewWithOptions(dev gpu.Device, opts tuning.Options) gpu.Backend {
	dc := dev.Caps()
	mb := dc.MaxStorageBinding
	if mb <= 0 {
		mb = 128 << 20
	}
	dev0 := mb
	if opts.MaxBinding > 0 && opts.MaxBinding < mb {
		mb = opts.MaxBinding
	}
	return &backend{dev: dev, info: dev.Info(), devCaps: dc, caps: capsOf(dc, opts), attention: opts.Attention, maxBinding: mb &^ 3, devBinding: dev0 &^ 3, kernels: map[string]*kernelEntry{}}
}

func (b *backend) Info() gpu.Info { return b.info }

// Caps are the device's (its shaders' features and limits) with the
// backend's: batched graphs, cache copies, decode programs that keep their
// sampling rule in their step tensor and run several steps per submission,
// recurrent layer states (fusion.KVSpec.State) beside keys and values.
func (b *backend) Caps() gpu.Caps {
	c := b.devCaps
	c.Host, c.HalfLoRA = false, false
	c.Batch, c.CopyKV, c.Sampling = true, true, true
	c.RecurrentState = true // caches keep states; ShortConv, Mamba2 and DeltaNet run (shortconv.go, mamba2.go, deltanet.go)
	c.CopyState = true      // CopyState copies them (checkpoints)
	c.MaxSteps, c.MaxStops = shaders.MaxSteps, shaders.MaxStops
	c.QuantKV, c.QuantKVTypes = true, quantKVTypes // every block type (kvcache.go; heads of at most 256 dims)
	return c
}

// MemoryUse is the device's count of what it allocated.
func (b *backend) MemoryUse() gpu.MemoryUse { return b.dev.MemoryUse() }

// ResetPeakMemory resets the device's peak.
func (b *backend) ResetPeakMemory() { b.dev.ResetPeakMemory() }

// kernelEntry is a kernel of the backend's cache: done is closed once k
// or err is set.
type kernelEntry struct {
	done chan struct{}
	k    gpu.Kernel
	err  error
}

// kernelKey is the cache key of kernel name at variant v.
func kernelKey(name string, v shaders.Variant) string {
	if v.Key != "" {
		return name + "." + v.Key
	}
	return name
}

// kernel compiles a shaders kernel (of variant v when v.Key is set) once
// per backend. Kernels compile concurrently: a caller asking for one that
// another is compiling waits for that compile; a failed compile is not
// kept, so a later call tries again.
func (b *backend) kernel(name string, v shaders.Variant) (gpu.Kernel, error) {
	key := kernelKey(name, v)
	b.mu.Lock()
	if e, ok := b.kernels[key]; ok {
		b.mu.Unlock()
		<-e.done
		return e.k, e.err
	}
	e := &kernelEntry{done: make(chan struct{})}
	b.kernels[key] = e
	b.mu.Unlock()
	e.k, e.err = b.compileKernel(name, v, key)
	if e.err != nil {
		b.mu.Lock()
		delete(b.kernels, key)
		b.mu.Unlock()
	}
	close(e.done)
	return e.k, e.err
}

func (b *backend) compileKernel(name string, v shaders.Variant, key string) (gpu.Kernel, error) {
	var spec shaders.KernelSpec
	var err error
	if v.Key != "" {
		spec, err = shaders.GetVariant(name, v)
	} else {
		spec, err = shaders.Get(name)
	}
	if err != nil {
		return nil, fmt.Errorf("compute: %w", err)
	}
	k, err := b.dev.NewKernel(spec)
	if err != nil {
		return nil, fmt.Errorf("compute: compile %s: %w", key, err)
	}
	return k, nil
}

// kernelRef names a kernel and its variant.
type kernelRef struct {
	name    string
	variant shaders.Variant
}

// compileKernels compiles the kernels of refs that the backend has not
// compiled yet, up to compileWorkers at once (a software driver's pipeline
// creation runs on the calling thread: lavapipe takes up to a second for
// one), stopping early when ctx is done; it returns the first error.
func (b *backend) compileKernels(ctx context.Context, refs []kernelRef) error {
	var todo []kernelRef
	seen := map[string]bool{}
	b.mu.Lock()
	for _, r := range refs {
		key := kernelKey(r.name, r.variant)
		if _, ok := b.kernels[key]; !ok && !seen[key] {
			seen[key] = true
			todo = append(todo, r)
		}
	}
	b.mu.Unlock()
	if len(todo) == 0 {
		return nil
	}
	// Workers take the kernels in order; the first error stops them.
	var (
		next     atomic.Int64
		firstErr error
		errOnce  sync.Once
		wg       sync.WaitGroup
	)
	stop := make(chan struct{})
	for range max(1, min(compileWorkers(), len(todo))) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(todo) {
					return
				}
				select {
				case <-stop:
					return
				default:
				}
				err := ctx.Err()
				if err == nil {
					_, err = b.kernel(todo[i].name, todo[i].variant)
				} else {
					err = fmt.Errorf("kernels: compile: %w", err)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err; close(stop) })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// Close releases the compiled kernels.
func (b *backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.kernels {
		<-e.done
		if e.k != nil {
			e.k.Release()
		}
	}
	b.kernels = map[string]*kernelEntry{}
	return nil
}
