package compute

import (
	"fmt"
	"slices"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/shaders"
)

// kvCache holds per layer a K cache [kv_heads][max_len][head_dim] and a V
// cache [kv_heads][head_dim][max_len] of f32 values, or for spec.F16 of
// binary16 pairs packed along head_dim into u32 words (K
// [kv_heads][max_len][ceil(head_dim/2)], V [kv_heads][ceil(head_dim/2)][max_len]
// words; see shaders/wgsl/kv.wgsl). A ring layer (spec.Ring, a
// sliding-window layer) keeps its last R = spec.RingLen(l) positions in 2R
// slots in place of max_len, the CPU backend's mirrored ring: position p
// at slot p % R and again at p % R + R (kv.wgsl's store kernels write
// both; the attention kernels read a window as consecutive slots from
// the slot of its first position).
//
// A recurrent layer (spec.State, fusion.LayerState) has no keys and
// values (k and v are nil there) but its state: one f32 buffer of
// LayerState.Values() words, the convolution window [ConvWindow][ConvChannels]
// (oldest position first, as the CPU backend keeps it) followed by the
// state matrices. statePos is the position the states describe (every
// recurrent layer's, since a step runs every layer): a step at 0 starts
// them afresh (the kernels read no state there), any other step must
// begin at statePos (checkState, shortconv.go), and -1 marks states a failed
// step left unknown, which only a step at 0 takes.
type kvCache struct {
	spec     fusion.KVSpec
	k, v     []gpu.Buffer
	state    []gpu.Buffer
	statePos int
}

func (c *kvCache) Release() {
	for _, bufs := range [][]gpu.Buffer{c.k, c.v, c.state} {
		for _, b := range bufs {
			if b != nil {
				b.Release()
			}
		}
	}
	c.k, c.v, c.state = nil, nil, nil
}

// NewKVCache allocates the cache, zero-filled.
func (b *backend) NewKVCache(spec fusion.KVSpec) (gpu.KVCache, error) {
	if spec.Layers < 0 || spec.KVHeads <= 0 || spec.HeadDim <= 0 || spec.MaxLen <= 0 {
		return nil, fmt.Errorf("compute: kv cache spec %+v: %w", spec, gpu.ErrUnsupported)
	}
	if spec.Quantized() {
		if err := checkQuantKV(spec); err != nil {
			return nil, err
		}
	}
	if spec.HeadDims != nil {
		if len(spec.HeadDims) != spec.Layers {
			return nil, fmt.Errorf("compute: kv cache spec %+v: head dims for %d layers: %w", spec, len(spec.HeadDims), gpu.ErrUnsupported)
		}
		for _, hd := range spec.HeadDims {
			if hd < 0 || hd > spec.HeadDim {
				return nil, fmt.Errorf("compute: kv cache spec %+v: layer head dim %d: %w", spec, hd, gpu.ErrUnsupported)
			}
		}
	}
	if spec.State != nil && len(spec.State) != spec.Layers {
		return nil, fmt.Errorf("compute: kv cache spec %+v: states for %d layers: %w", spec, len(spec.State), gpu.ErrUnsupported)
	}
	for l, st := range spec.State {
		if d := []int{st.ConvChannels, st.ConvWindow, st.MatrixHeads, st.MatrixRows, st.MatrixCols}; slices.Min(d) < 0 || slices.Max(d) > 1<<24 || st.Values() > 1<<28 {
			return nil, fmt.Errorf("compute: kv cache: layer %d's state %+v: %w", l, st, gpu.ErrUnsupported)
		}
	}
	if spec.Ring != nil && len(spec.Ring) != spec.Layers {
		return nil, fmt.Errorf("compute: kv cache spec %+v: ring lengths for %d layers: %w", spec, len(spec.Ring), gpu.ErrUnsupported)
	}
	for l := range spec.Layers {
		if r := spec.RingLen(l); r < 0 || r > spec.MaxLen {
			return nil, fmt.Errorf("compute: kv cache spec %+v: ring of %d: %w", spec, r, gpu.ErrUnsupported)
		}
	}
	if spec.KVHeads > 1<<16 || spec.HeadDim > 1<<16 || spec.MaxLen > 1<<24 ||
		int64(spec.KVHeads)*int64(kvWords(spec, -1))*int64(spec.MaxLen)*4 > b.devBinding {
		return nil, fmt.Errorf("compute: kv cache layer of %+v exceeds one binding (%d bytes): %w", spec, b.devBinding, gpu.ErrUnsupported)
	}
	c := &kvCache{spec: spec, k: make([]gpu.Buffer, 0, spec.Layers)}
	if spec.Recurrent() {
		c.state = make([]gpu.Buffer, spec.Layers)
	}
	for l := 0; l < spec.Layers; l++ {
		if st := spec.LayerState(l); st.Recurrent() {
			// Zero-filled: the empty state (a step at 0 reads none anyway).
			size := int64(st.Values()) * 4
			if size > b.devBinding {
				c.Release()
				return nil, fmt.Errorf("compute: kv cache: layer %d's state of %d bytes exceeds one binding: %w", l, size, gpu.ErrUnsupported)
			}
			s, err := b.dev.NewBuffer(max(align16(size), 16))
			if err != nil {
				c.Release()
				return nil, fmt.Errorf("compute: kv cache: %w", err)
			}
			c.state[l] = s
			c.k, c.v = append(c.k, nil), append(c.v, nil)
			continue
		}
		if spec.LayerHeadDim(l) == 0 {
			// A layer reading another's cache (fusion.KVSpec.HeadDims).
			c.k, c.v = append(c.k, nil), append(c.v, nil)
			continue
		}
		slots := int64(spec.KVHeads) * int64(kvSlots(spec, l)) * 4
		k, err := b.dev.NewBuffer(slots * int64(kvRowWords(spec, spec.K, l)))
		if err != nil {
			c.Release()
			return nil, fmt.Errorf("compute: kv cache: %w", err)
		}
		v, err := b.dev.NewBuffer(slots * int64(kvRowWords(spec, spec.V, l)))
		if err != nil {
			k.Release()
			c.Release()
			return nil, fmt.Errorf("compute: kv cache: %w", err)
		}
		c.k, c.v = append(c.k, k), append(c.v, v)
	}
	return c, nil
}

// kvWords is the number of u32 words one cached key (or one position of
// one head's values) of layer l takes: its head dim's f32 values or
// ceil(head_dim/2) pairs of halves; l < 0: of the largest head dim,
// spec.HeadDim.
func kvWords(spec fusion.KVSpec, l int) int {
	hd := spec.HeadDim
	if l >= 0 {
		hd = spec.LayerHeadDim(l)
	}
	if spec.F16 {
		return (hd + 1) / 2
	}
	return hd
}

// quantKVTypes are the block types the kernels keep (gpu.Caps.QuantKVTypes).
var quantKVTypes = fusion.AllKVTypes()

// maxQuantHeadDim is the largest head dim of a quantized cache
// (KVQ_MAX, shaders/wgsl/lib/kv_quant.wgsl: a row is rotated and
// quantized in one invocation's private array).
const maxQuantHeadDim = 256

// checkQuantKV refuses a quantized cache the kernels do not keep: a block
// type other than quantKVTypes' (the float half of a mixed cache is
// kept), or a head dim past maxQuantHeadDim.
func checkQuantKV(spec fusion.KVSpec) error {
	if err := spec.CheckTypes(); err != nil {
		return fmt.Errorf("compute: %w: %w", err, gpu.ErrUnsupported)
	}
	for _, t := range []fusion.KVType{spec.K, spec.V} {
		if t.Quantized() && !quantKVTypes.Has(t) {
			return fmt.Errorf("compute: a %v/%v kv cache: the GPU kernels keep %v blocks only: %w", spec.K, spec.V, quantKVTypes, gpu.ErrUnsupported)
		}
	}
	for l := range spec.Layers {
		if hd := spec.LayerHeadDim(l); hd > maxQuantHeadDim && !spec.LayerState(l).Recurrent() {
			return fmt.Errorf("compute: a %v/%v kv cache: layer %d's head dim %d is over %d: %w", spec.K, spec.V, l, hd, maxQuantHeadDim, gpu.ErrUnsupported)
		}
	}
	return nil
}

// kvRowWords is the words of one head's keys (t = spec.K) or values (t =
// spec.V) at one slot of layer l: kvWords for a float cache, or a block
// row's quants (q8_0: 8 words a block; q4_0, q4_1, iq4_nl: 4 of nibbles; q5_0,
// q5_1: 5, with the high bits) and scales (binary16 d two to a word; q4_1
// and q5_1: d and m, a word per block): kv_quant.wgsl's kvq_words. A
// block cache keeps keys and values alike as [kv_heads][slots][row words].
func kvRowWords(spec fusion.KVSpec, t fusion.KVType, l int) int {
	if !t.Quantized() {
		return kvWords(spec, l)
	}
	nb := spec.LayerHeadDim(l) / fusion.KVBlock
	per, scales := 4, (nb+1)/2
	switch t {
	case fusion.KVQ8_0:
		per = 8
	case fusion.KVQ5_0, fusion.KVQ5_1:
		per = 5
	}
	if t == fusion.KVQ4_1 || t == fusion.KVQ5_1 {
		scales = nb
	}
	return nb*per + scales
}

// kvQuant is the kernels' kv_quant code of layer l's cache
// (shaders.KVQuant; 0 for a float cache).
func kvQuant(spec fusion.KVSpec, l int) uint32 {
	if !spec.Quantized() {
		return 0
	}
	return shaders.KVQuant(uint8(spec.K), uint8(spec.V), spec.KRotation(l), spec.VRotation(l), spec.F16)
}

// kvSlots is the positions layer l's cache holds per head: MaxLen, or
// twice the ring of a ring layer.
func kvSlots(spec fusion.KVSpec, l int) int {
	if r := spec.RingLen(l); r > 0 {
		return 2 * r
	}
	return spec.MaxLen
}

// storeKernel is the store kernel of the cache's storage type (store_kv_q
// for block caches: kvQuant's code says the rest).
func storeKernel(spec fusion.KVSpec) contract[shaders.KVParams, kvBindings] {
	if spec.Quantized() {
		return kStoreKvQ
	}
	if spec.F16 {
		return kStoreKvF16
	}
	return kStoreKv
}

// CopyKV copies positions [0, n) of every layer from src to dst
// (gpu.Backend.CopyKV) with one command list of buffer copies: per head one run
// of keys, and per head and word one run of values (the value cache is
// transposed, positions innermost). A ring layer (rings of one length in
// both caches) is copied whole, its 2R slots holding the last R positions.
func (b *backend) CopyKV(dst, src gpu.KVCache, n int) error {
	d, ok1 := dst.(*kvCache)
	s, ok2 := src.(*kvCache)
	if !ok1 || !ok2 || d.k == nil || s.k == nil {
		return fmt.Errorf("compute: copy kv: %w: caches of another backend or released", gpu.ErrStep)
	}
	ds, ss := d.spec, s.spec
	if ds.Layers != ss.Layers || ds.KVHeads != ss.KVHeads || ds.HeadDim != ss.HeadDim || ds.F16 != ss.F16 || !slices.Equal(ds.HeadDims, ss.HeadDims) ||
		ds.K != ss.K || ds.V != ss.V || ds.NoRotation != ss.NoRotation {
		return fmt.Errorf("compute: copy kv: %w: cache %+v into %+v", gpu.ErrStep, ss, ds)
	}
	for l := range ds.Layers {
		if ds.RingLen(l) != ss.RingLen(l) {
			return fmt.Errorf("compute: copy kv: %w: layer %d: ring of %d into one of %d", gpu.ErrStep, l, ss.RingLen(l), ds.RingLen(l))
		}
	}
	if n < 0 || n > ds.MaxLen || n > ss.MaxLen {
		return fmt.Errorf("compute: copy kv: %d positions between caches of %d and %d: %w", n, ss.MaxLen, ds.MaxLen, gpu.ErrCacheFull)
	}
	if !slices.Equal(ds.State, ss.State) {
		return fmt.Errorf("compute: copy kv: %w: states %+v into %+v", gpu.ErrStep, ss.State, ds.State)
	}
	recurrent := ds.Recurrent()
	if recurrent && n != 0 && s.statePos != n {
		return fmt.Errorf("compute: copy kv: %w: the recurrent states hold position %d, not %d (a state cannot roll back)", gpu.ErrStep, s.statePos, n)
	}
	if n == 0 {
		// Empty keys and values need no copy; empty states are a
		// position of 0, whose step reads none.
		d.statePos = 0
		return nil
	}
	cmds, err := b.dev.NewCommands()
	if err != nil {
		return fmt.Errorf("compute: copy kv: %w", err)
	}
	defer cmds.Release()
	for l := range d.k {
		if ds.LayerState(l).Recurrent() {
			if err := cmds.Copy(d.state[l], 0, s.state[l], 0, d.state[l].Size()); err != nil {
				return fmt.Errorf("compute: copy kv: %w", err)
			}
			continue
		}
		if d.k[l] == nil {
			continue // a layer reading another's cache
		}
		words := int64(kvWords(ds, l))
		kw, vw := int64(kvRowWords(ds, ds.K, l)), int64(kvRowWords(ds, ds.V, l))
		dl, sl, cnt := int64(kvSlots(ds, l)), int64(kvSlots(ss, l)), int64(n)
		if ds.RingLen(l) > 0 {
			cnt = dl
		}
		for h := range int64(ds.KVHeads) {
			if err := cmds.Copy(d.k[l], h*dl*kw*4, s.k[l], h*sl*kw*4, cnt*kw*4); err != nil {
				return fmt.Errorf("compute: copy kv: %w", err)
			}
			if ds.V.Quantized() {
				// Quantized values are laid out as keys: a run per head.
				if err := cmds.Copy(d.v[l], h*dl*vw*4, s.v[l], h*sl*vw*4, cnt*vw*4); err != nil {
					return fmt.Errorf("compute: copy kv: %w", err)
				}
				continue
			}
			for w := range words {
				row := h*words + w
				if err := cmds.Copy(d.v[l], row*dl*4, s.v[l], row*sl*4, cnt*4); err != nil {
					return fmt.Errorf("compute: copy kv: %w", err)
				}
			}
		}
	}
	if err := cmds.Finish(); err != nil {
		return fmt.Errorf("compute: copy kv: %w", err)
	}
	if err := b.dev.Submit(cmds); err != nil {
		return fmt.Errorf("compute: copy kv: %w", err)
	}
	// dst's states are unknown until the copy ran.
	d.statePos = -1
	// The list is released on return: wait for it to run.
	if err := b.dev.Wait(); err != nil {
		return fmt.Errorf("compute: copy kv: %w", err)
	}
	if recurrent {
		d.statePos = n
	}
	return nil
}

// CopyState copies every recurrent layer's state buffer, and the position
// the states describe, from src to dst (gpu.Backend.CopyState) with one
// command list, leaving keys and values alone; the caches' states must
// match layer for layer. States a failed step left unknown are refused.
func (b *backend) CopyState(dst, src gpu.KVCache) error {
	d, ok1 := dst.(*kvCache)
	s, ok2 := src.(*kvCache)
	if !ok1 || !ok2 || d.k == nil || s.k == nil {
		return fmt.Errorf("compute: copy state: %w: caches of another backend or released", gpu.ErrStep)
	}
	if d.spec.Layers != s.spec.Layers || !slices.Equal(d.spec.State, s.spec.State) {
		return fmt.Errorf("compute: copy state: %w: states %+v into %+v", gpu.ErrStep, s.spec.State, d.spec.State)
	}
	if !s.spec.Recurrent() {
		return nil
	}
	if s.statePos < 0 {
		return fmt.Errorf("compute: copy state: %w: the source's states are unknown (a failed step)", gpu.ErrStep)
	}
	if s.statePos == 0 {
		// Empty states: a step at 0 reads none.
		d.statePos = 0
		return nil
	}
	cmds, err := b.dev.NewCommands()
	if err != nil {
		return fmt.Errorf("compute: copy state: %w", err)
	}
	defer cmds.Release()
	for l := range d.state {
		if d.spec.LayerState(l).Recurrent() {
			if err := cmds.Copy(d.state[l], 0, s.state[l], 0, d.state[l].Size()); err != nil {
				return fmt.Errorf("compute: copy state: %w", err)
			}
		}
	}
	if err := cmds.Finish(); err != nil {
		return fmt.Errorf("compute: copy state: %w", err)
	}
	if err := b.dev.Submit(cmds); err != nil {
		return fmt.Errorf("compute: copy state: %w", err)
	}
	// dst's states are unknown until the copy ran.
	d.statePos = -1
	// The list is released on return: wait for it to run.
	if err := b.dev.Wait(); err != nil {
		return fmt.Errorf("compute: copy state: %w", err)
	}
	d.statePos = s.statePos
	return nil
}
