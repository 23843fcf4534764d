package compute

import (
	"fmt"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// kvCache holds per layer a K cache [kv_heads][max_len][head_dim] and a V
// cache [kv_heads][head_dim][max_len] of f32 values, or for spec.F16 of
// binary16 pairs packed along head_dim into u32 words (K
// [kv_heads][max_len][ceil(head_dim/2)], V [kv_heads][ceil(head_dim/2)][max_len]
// words; see shaders/wgsl/kv.wgsl).
type kvCache struct {
	spec fusion.KVSpec
	k, v []gpu.Buffer
}

func (c *kvCache) Release() {
	for i := range c.k {
		c.k[i].Release()
		c.v[i].Release()
	}
	c.k, c.v = nil, nil
}

// NewKVCache allocates the cache, zero-filled.
func (b *backend) NewKVCache(spec fusion.KVSpec) (gpu.KVCache, error) {
	if spec.Layers < 0 || spec.KVHeads <= 0 || spec.HeadDim <= 0 || spec.MaxLen <= 0 {
		return nil, fmt.Errorf("kernels: kv cache spec %+v: %w", spec, gpu.ErrUnsupported)
	}
	for _, r := range spec.Ring {
		if r > 0 {
			return nil, fmt.Errorf("kernels: kv cache with ring layers: %w", gpu.ErrUnsupported)
		}
	}
	per := int64(spec.KVHeads) * int64(kvWords(spec)) * int64(spec.MaxLen) * 4
	if spec.KVHeads > 1<<16 || spec.HeadDim > 1<<16 || spec.MaxLen > 1<<24 || per > b.devBinding {
		return nil, fmt.Errorf("kernels: kv cache layer of %+v exceeds one binding (%d bytes): %w", spec, b.devBinding, gpu.ErrUnsupported)
	}
	c := &kvCache{spec: spec}
	for l := 0; l < spec.Layers; l++ {
		k, err := b.dev.NewBuffer(per)
		if err != nil {
			c.Release()
			return nil, fmt.Errorf("kernels: kv cache: %w", err)
		}
		v, err := b.dev.NewBuffer(per)
		if err != nil {
			k.Release()
			c.Release()
			return nil, fmt.Errorf("kernels: kv cache: %w", err)
		}
		c.k, c.v = append(c.k, k), append(c.v, v)
	}
	return c, nil
}

// kvWords is the number of u32 words one cached key (or one position of
// one head's values) takes: head_dim f32 values or ceil(head_dim/2) pairs
// of halves.
func kvWords(spec fusion.KVSpec) int {
	if spec.F16 {
		return (spec.HeadDim + 1) / 2
	}
	return spec.HeadDim
}

// storeKernel is the store kernel of the cache's storage type.
func storeKernel(spec fusion.KVSpec) contract[shaders.KVParams, kvBindings] {
	if spec.F16 {
		return kStoreKvF16
	}
	return kStoreKv
}

// CopyKV copies positions [0, n) of every layer from src to dst
// (gpu.KVCopier) with one command list of buffer copies: per head one run
// of keys, and per head and word one run of values (the value cache is
// transposed, positions innermost).
func (b *backend) CopyKV(dst, src gpu.KVCache, n int) error {
	d, ok1 := dst.(*kvCache)
	s, ok2 := src.(*kvCache)
	if !ok1 || !ok2 || d.k == nil || s.k == nil {
		return fmt.Errorf("kernels: copy kv: %w: caches of another backend or released", gpu.ErrStep)
	}
	ds, ss := d.spec, s.spec
	if ds.Layers != ss.Layers || ds.KVHeads != ss.KVHeads || ds.HeadDim != ss.HeadDim || ds.F16 != ss.F16 {
		return fmt.Errorf("kernels: copy kv: %w: cache %+v into %+v", gpu.ErrStep, ss, ds)
	}
	if n < 0 || n > ds.MaxLen || n > ss.MaxLen {
		return fmt.Errorf("kernels: copy kv: %d positions between caches of %d and %d: %w", n, ss.MaxLen, ds.MaxLen, gpu.ErrCacheFull)
	}
	if n == 0 {
		return nil
	}
	cmds, err := b.dev.NewCommands()
	if err != nil {
		return fmt.Errorf("kernels: copy kv: %w", err)
	}
	defer cmds.Release()
	words := int64(kvWords(ds))
	dl, sl, cnt := int64(ds.MaxLen), int64(ss.MaxLen), int64(n)
	for l := range d.k {
		for h := range int64(ds.KVHeads) {
			if err := cmds.Copy(d.k[l], h*dl*words*4, s.k[l], h*sl*words*4, cnt*words*4); err != nil {
				return fmt.Errorf("kernels: copy kv: %w", err)
			}
			for w := range words {
				row := h*words + w
				if err := cmds.Copy(d.v[l], row*dl*4, s.v[l], row*sl*4, cnt*4); err != nil {
					return fmt.Errorf("kernels: copy kv: %w", err)
				}
			}
		}
	}
	if err := cmds.Finish(); err != nil {
		return fmt.Errorf("kernels: copy kv: %w", err)
	}
	if err := b.dev.Submit(cmds); err != nil {
		return fmt.Errorf("kernels: copy kv: %w", err)
	}
	// The list is released on return: wait for it to run.
	if err := b.dev.Wait(); err != nil {
		return fmt.Errorf("kernels: copy kv: %w", err)
	}
	return nil
}
