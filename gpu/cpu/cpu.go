// Package cpu is the reference backend: it interprets fusion graphs in plain
// Go, one small function per op kind, in f32 with an f32 KV cache (or an
// f16 one when the graph's KVSpec asks for it). Matrix
// products read the weights in their stored type (f32, f16, bf16, int8,
// int4 with per-channel or block scales) and dequantize inside the dot
// product. Every GPU backend is tested against it, so its op semantics are
// exactly the contracts written in fusion/graph.go.
package cpu

import (
	"errors"
	"fmt"
	"runtime"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
)

// Options configures the backend.
type Options struct {
	// Threads is the number of goroutines a matrix product or attention is
	// split across; 0 means runtime.NumCPU().
	Threads int
}

// errToken reports a token id outside the embedding table.
var errToken = errors.New("cpu: token out of range")

type backend struct {
	pool pool
}

// New returns the CPU backend.
func New(opts Options) gpu.Backend {
	t := opts.Threads
	if t <= 0 {
		t = runtime.NumCPU()
	}
	return &backend{pool: pool{threads: t}}
}

func (b *backend) Info() gpu.Info {
	return gpu.Info{
		Backend:       "cpu",
		Name:          fmt.Sprintf("Go reference (%d threads, %s/%s)", b.pool.threads, runtime.GOOS, runtime.GOARCH),
		Type:          gpu.CPU,
		Driver:        runtime.Version(),
		F16:           false,
		MaxBufferSize: 1 << 62,
	}
}

func (b *backend) Close() error { return nil }

// kvCache holds, per layer, K and V as [MaxLen][KVHeads*HeadDim] values:
// f32, or binary16 bit patterns when spec.F16 (half the memory; see kv16.go).
type kvCache struct {
	spec   fusion.KVSpec
	layers []layerCache
}

// layerCache is one layer's keys and values: k and v for an f32 cache, k16
// and v16 for an f16 one (the other pair is nil).
type layerCache struct {
	k, v     []float32
	k16, v16 []uint16
}

func (c *kvCache) Release() { c.layers = nil }

// maxKVValues bounds a cache allocation (16 GiB of f32) so that a corrupt
// spec fails cleanly instead of exhausting memory.
const maxKVValues = 1 << 32

func (b *backend) NewKVCache(spec fusion.KVSpec) (gpu.KVCache, error) {
	if spec.Layers < 0 || spec.KVHeads <= 0 || spec.HeadDim <= 0 || spec.MaxLen <= 0 {
		return nil, fmt.Errorf("cpu: kv cache spec %+v: %w", spec, gpu.ErrUnsupported)
	}
	per := spec.KVHeads * spec.HeadDim
	if per > maxKVValues/spec.MaxLen || 2*spec.Layers > maxKVValues/(per*spec.MaxLen) {
		return nil, fmt.Errorf("cpu: kv cache spec %+v is too large: %w", spec, gpu.ErrUnsupported)
	}
	c := &kvCache{spec: spec, layers: make([]layerCache, spec.Layers)}
	for l := range c.layers {
		if spec.F16 {
			c.layers[l] = layerCache{k16: make([]uint16, spec.MaxLen*per), v16: make([]uint16, spec.MaxLen*per)}
		} else {
			c.layers[l] = layerCache{k: make([]float32, spec.MaxLen*per), v: make([]float32, spec.MaxLen*per)}
		}
	}
	return c, nil
}
