package cpu

import (
	"fmt"
	"slices"

	"github.com/gpurun/gpurun/gpu"
)

// CopyKV copies positions [0, n) of every layer and head from src to dst
// (gpu.Backend.CopyKV). A ring layer keeps only its last positions, so it is
// copied whole into a ring of the same length, and refused (gpu.ErrStep)
// between caches whose rings differ: a full cache cannot be filled from a
// ring, nor a ring from positions [0, n) alone.
//
// A recurrent layer's state describes one position only (fusion.LayerState),
// so it is copied when src's describes position n, and n = 0 gives dst the
// empty state whatever src holds (a reset); any other n is refused
// (gpu.ErrStep) before anything is copied.
func (b *backend) CopyKV(dst, src gpu.KVCache, n int) error {
	d, ok1 := dst.(*kvCache)
	s, ok2 := src.(*kvCache)
	if !ok1 || !ok2 || d.layers == nil || s.layers == nil {
		return fmt.Errorf("cpu: copy kv: %w: caches of another backend or released", gpu.ErrStep)
	}
	ds, ss := d.spec, s.spec
	if ds.Layers != ss.Layers || ds.KVHeads != ss.KVHeads || ds.HeadDim != ss.HeadDim || ds.F16 != ss.F16 || ds.K != ss.K || ds.V != ss.V || ds.NoRotation != ss.NoRotation || !slices.Equal(ds.SWA, ss.SWA) || !slices.Equal(ds.HeadDims, ss.HeadDims) {
		return fmt.Errorf("cpu: copy kv: %w: cache %+v into %+v", gpu.ErrStep, ss, ds)
	}
	if n < 0 || n > ds.MaxLen || n > ss.MaxLen {
		return fmt.Errorf("cpu: copy kv: %d positions between caches of %d and %d: %w", n, ss.MaxLen, ds.MaxLen, gpu.ErrCacheFull)
	}
	if !slices.Equal(ds.State, ss.State) {
		return fmt.Errorf("cpu: copy kv: %w: states %+v into %+v", gpu.ErrStep, ss.State, ds.State)
	}
	for l := range s.layers {
		if sl := &s.layers[l]; sl.state.Recurrent() && n != 0 && sl.statePos != n {
			return fmt.Errorf("cpu: copy kv: %w: layer %d's state holds position %d, not %d (a state cannot roll back)", gpu.ErrStep, l, sl.statePos, n)
		}
	}
	for l := range ds.Layers {
		if ds.RingLen(l) != ss.RingLen(l) {
			return fmt.Errorf("cpu: copy kv: %w: layer %d: ring of %d into one of %d", gpu.ErrStep, l, ss.RingLen(l), ds.RingLen(l))
		}
	}
	for l := range d.layers {
		dl, sl := &d.layers[l], &s.layers[l]
		if sl.state.Recurrent() {
			if n == 0 {
				clear(dl.conv)
			} else {
				copy(dl.conv, sl.conv)
			}
			dl.statePos = n
			continue
		}
		run := n * sl.hd
		if sl.ring > 0 {
			run = sl.slots * sl.hd
		}
		for h := range ds.KVHeads {
			di, si := dl.at(h, 0), sl.at(h, 0)
			switch {
			case sl.kq != nil:
				bs := sl.kt.BlockBytes()
				copy(dl.kq[di/qk*bs:(di+run)/qk*bs], sl.kq[si/qk*bs:(si+run)/qk*bs])
			case sl.k16 != nil:
				copy(dl.k16[di:di+run], sl.k16[si:si+run])
			default:
				copy(dl.k[di:di+run], sl.k[si:si+run])
			}
			switch {
			case sl.vq != nil:
				bs := sl.vt.BlockBytes()
				copy(dl.vq[di/qk*bs:(di+run)/qk*bs], sl.vq[si/qk*bs:(si+run)/qk*bs])
			case sl.v16 != nil:
				copy(dl.v16[di:di+run], sl.v16[si:si+run])
			default:
				copy(dl.v[di:di+run], sl.v[si:si+run])
			}
		}
	}
	return nil
}

// CopyState copies every recurrent layer's state, and the position it
// describes, from src to dst (gpu.Backend.CopyState), leaving keys and
// values alone; the caches' states must match layer for layer.
func (b *backend) CopyState(dst, src gpu.KVCache) error {
	d, ok1 := dst.(*kvCache)
	s, ok2 := src.(*kvCache)
	if !ok1 || !ok2 || d.layers == nil || s.layers == nil {
		return fmt.Errorf("cpu: copy state: %w: caches of another backend or released", gpu.ErrStep)
	}
	if d.spec.Layers != s.spec.Layers || !slices.Equal(d.spec.State, s.spec.State) {
		return fmt.Errorf("cpu: copy state: %w: states %+v into %+v", gpu.ErrStep, s.spec.State, d.spec.State)
	}
	for l := range d.layers {
		if dl, sl := &d.layers[l], &s.layers[l]; sl.state.Recurrent() {
			copy(dl.conv, sl.conv)
			dl.statePos = sl.statePos
		}
	}
	return nil
}
