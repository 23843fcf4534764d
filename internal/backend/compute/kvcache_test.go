package compute

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/gpu"
	"github.com/gpurun/gpurun/internal/gputest"
	"github.com/gpurun/gpurun/internal/webgpu"
)

// TestKVCacheBytes: an f16 cache takes half the bytes of an f32 one (for an
// odd head dim, the padded last half included), layer by layer.
func TestKVCacheBytes(t *testing.T) {
	dev, err := webgpu.Open(context.Background())
	gputest.NoDevice(t, "webgpu", err)
	defer dev.Close()
	be := New(dev)
	defer be.Close()
	tests := []struct {
		kvHeads, headDim, maxLen int
		f16                      bool
		want                     int64 // bytes of each layer's K (and V) buffer
	}{
		{4, 8, 512, false, 4 * 8 * 512 * 4},
		{4, 8, 512, true, 4 * 8 * 512 * 2},
		{2, 7, 100, false, 2 * 7 * 100 * 4},
		{2, 7, 100, true, 2 * 8 * 100 * 2}, // 7 halves padded to 4 words
		{1, 256, 33, true, 256 * 33 * 2},
	}
	for _, tc := range tests {
		spec := fusion.KVSpec{Layers: 3, KVHeads: tc.kvHeads, HeadDim: tc.headDim, MaxLen: tc.maxLen, F16: tc.f16}
		c, err := be.NewKVCache(spec)
		if err != nil {
			t.Fatalf("%+v: %v", spec, err)
		}
		kv := c.(*kvCache)
		if len(kv.k) != spec.Layers || len(kv.v) != spec.Layers {
			t.Errorf("%+v: %d K and %d V buffers, want %d", spec, len(kv.k), len(kv.v), spec.Layers)
		}
		for l := range kv.k {
			if kv.k[l].Size() != tc.want || kv.v[l].Size() != tc.want {
				t.Errorf("%+v: layer %d: K %d bytes, V %d, want %d", spec, l, kv.k[l].Size(), kv.v[l].Size(), tc.want)
			}
		}
		c.Release()
	}
}

// TestKVCacheRings: a ring layer's K and V buffers hold 2*ring slots per
// head (the CPU backend's mirrored ring), a full layer MaxLen; specs the
// CPU backend refuses (a ring past MaxLen or negative, ring lengths for
// another number of layers) are refused with gpu.ErrUnsupported.
func TestKVCacheRings(t *testing.T) {
	dev, err := webgpu.Open(context.Background())
	gputest.NoDevice(t, "webgpu", err)
	defer dev.Close()
	be := New(dev)
	defer be.Close()
	for _, f16 := range []bool{false, true} {
		spec := fusion.KVSpec{Layers: 3, KVHeads: 2, HeadDim: 8, MaxLen: 64, F16: f16, Ring: []int{0, 16, 5}}
		c, err := be.NewKVCache(spec)
		if err != nil {
			t.Fatalf("%+v: %v", spec, err)
		}
		elem := int64(4)
		if f16 {
			elem = 2
		}
		kv := c.(*kvCache)
		for l, slots := range []int64{64, 32, 10} {
			want := 2 * 8 * slots * elem
			if kv.k[l].Size() != want || kv.v[l].Size() != want {
				t.Errorf("%+v: layer %d: K %d bytes, V %d, want %d", spec, l, kv.k[l].Size(), kv.v[l].Size(), want)
			}
		}
		c.Release()
	}
	for _, ring := range [][]int{{0, 65}, {0, -1}, {16}} {
		spec := fusion.KVSpec{Layers: 2, KVHeads: 1, HeadDim: 8, MaxLen: 64, Ring: ring}
		if _, err := be.NewKVCache(spec); !errors.Is(err, gpu.ErrUnsupported) {
			t.Errorf("NewKVCache(%+v) = %v, want gpu.ErrUnsupported", spec, err)
		}
	}
}

// TestCopyKVRings: CopyKV copies a ring layer whole (its 2R slots hold the
// last R positions, wherever the ring stands) between caches of the same
// rings, positions [0, n) of a full layer, and refuses caches whose rings
// differ (a full cache cannot be filled from a ring) with gpu.ErrStep.
func TestCopyKVRings(t *testing.T) {
	dev, err := webgpu.Open(context.Background())
	gputest.NoDevice(t, "webgpu", err)
	defer dev.Close()
	be := New(dev)
	defer be.Close()
	spec := fusion.KVSpec{Layers: 2, KVHeads: 2, HeadDim: 4, MaxLen: 32, Ring: []int{0, 5}}
	src, err := be.NewKVCache(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Release()
	dst, err := be.NewKVCache(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Release()
	s, d := src.(*kvCache), dst.(*kvCache)
	fill := func(b gpu.Buffer, seed byte) []byte {
		data := make([]byte, b.Size())
		for i := range data {
			data[i] = seed + byte(i*7)
		}
		if err := dev.Write(b, 0, data); err != nil {
			t.Fatal(err)
		}
		return data
	}
	var want [2][2][]byte
	for l := range 2 {
		want[l][0], want[l][1] = fill(s.k[l], byte(l)), fill(s.v[l], byte(l+9))
	}
	const n = 17 // past the ring of 5: its 10 slots all live
	if err := be.CopyKV(dst, src, n); err != nil {
		t.Fatal(err)
	}
	read := func(b gpu.Buffer) []byte {
		out := make([]byte, b.Size())
		if err := dev.Read(b, 0, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	// Layer 1 (the ring) whole; layer 0 (full) positions [0, n) of each
	// head's keys, and of each value row.
	if k, v := read(d.k[1]), read(d.v[1]); !bytes.Equal(k, want[1][0]) || !bytes.Equal(v, want[1][1]) {
		t.Error("ring layer not copied whole")
	}
	k, v := read(d.k[0]), read(d.v[0])
	for h := range 2 {
		run := n * 4 * 4
		at := h * 32 * 4 * 4
		if !bytes.Equal(k[at:at+run], want[0][0][at:at+run]) {
			t.Errorf("full layer, head %d: keys of [0, %d) not copied", h, n)
		}
		for w := range 4 {
			at := (h*4 + w) * 32 * 4
			if !bytes.Equal(v[at:at+n*4], want[0][1][at:at+n*4]) {
				t.Errorf("full layer, head %d, dim %d: values of [0, %d) not copied", h, w, n)
			}
		}
	}
	full, err := be.NewKVCache(fusion.KVSpec{Layers: 2, KVHeads: 2, HeadDim: 4, MaxLen: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Release()
	if err := be.CopyKV(full, src, n); !errors.Is(err, gpu.ErrStep) {
		t.Errorf("CopyKV(full cache, ring cache) = %v, want gpu.ErrStep", err)
	}
	if err := be.CopyKV(src, full, n); !errors.Is(err, gpu.ErrStep) {
		t.Errorf("CopyKV(ring cache, full cache) = %v, want gpu.ErrStep", err)
	}
}

// TestKVCacheStates: a recurrent layer (fusion.KVSpec.State) holds no
// keys and values but one f32 state buffer of LayerState.Values() words,
// the convolution window and the state matrices (Gated DeltaNet's,
// Mamba-2's) together; CopyKV copies it whole when the source's states
// hold the position copied, refuses any other position and states of
// another shape with gpu.ErrStep (nothing copied), and n = 0 resets the
// destination (its next step must be at 0); a spec's states for another
// number of layers are refused with gpu.ErrUnsupported.
func TestKVCacheStates(t *testing.T) {
	dev, err := webgpu.Open(context.Background())
	gputest.NoDevice(t, "webgpu", err)
	defer dev.Close()
	be := New(dev)
	defer be.Close()
	conv := fusion.LayerState{ConvChannels: 6, ConvWindow: 3}
	delta := fusion.LayerState{ConvChannels: 10, ConvWindow: 3, MatrixHeads: 2, MatrixRows: 4, MatrixCols: 5}
	spec := fusion.KVSpec{Layers: 3, KVHeads: 1, HeadDim: 4, MaxLen: 16, State: []fusion.LayerState{conv, {}, delta}}
	newCache := func(spec fusion.KVSpec) *kvCache {
		c, err := be.NewKVCache(spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Release)
		return c.(*kvCache)
	}
	src, dst := newCache(spec), newCache(spec)
	for l, st := range spec.State {
		if st.Recurrent() {
			if src.k[l] != nil || src.v[l] != nil || src.state[l] == nil || src.state[l].Size() != align16(int64(st.Values())*4) {
				t.Errorf("layer %d: keys %v, values %v, state %v (want a state of %d values only)", l, src.k[l], src.v[l], src.state[l], st.Values())
			}
		} else if src.k[l] == nil || src.state[l] != nil {
			t.Errorf("layer %d: keys %v, state %v (want keys and values only)", l, src.k[l], src.state[l])
		}
	}
	want := make([]byte, src.state[2].Size())
	for i := range want {
		want[i] = byte(i*13 + 1)
	}
	if err := dev.Write(src.state[2], 0, want); err != nil {
		t.Fatal(err)
	}
	src.statePos = 9 // as after steps over [0, 9)
	if err := be.CopyKV(dst, src, 8); !errors.Is(err, gpu.ErrStep) {
		t.Errorf("copy of 8 positions from states at 9: %v, want gpu.ErrStep", err)
	}
	got := make([]byte, len(want))
	if err := dev.Read(dst.state[2], 0, got); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) || dst.statePos != 0 {
		t.Errorf("a refused copy changed the destination (states at %d)", dst.statePos)
	}
	if err := be.CopyKV(dst, src, 9); err != nil {
		t.Fatal(err)
	}
	if err := dev.Read(dst.state[2], 0, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) || dst.statePos != 9 {
		t.Errorf("states not copied whole (matrices included), or not at 9 (%d)", dst.statePos)
	}
	if err := be.CopyKV(dst, src, 0); err != nil || dst.statePos != 0 {
		t.Errorf("reset: %v, states at %d", err, dst.statePos)
	}
	other := spec
	other.State = []fusion.LayerState{conv, {}, conv}
	if err := be.CopyKV(newCache(other), src, 9); !errors.Is(err, gpu.ErrStep) {
		t.Errorf("copy between caches of other states: %v, want gpu.ErrStep", err)
	}
	bad := spec
	bad.State = bad.State[:2]
	if _, err := be.NewKVCache(bad); !errors.Is(err, gpu.ErrUnsupported) {
		t.Errorf("states for 2 of 3 layers: %v, want gpu.ErrUnsupported", err)
	}
}

// TestKVCacheStateCopy: CopyState copies the state buffers (matrices
// included) and their position between caches of the same states, into a
// cache of one position (a checkpoint) and back, leaving keys and values
// alone; it refuses caches of other states and states a failed step left
// unknown.
func TestKVCacheStateCopy(t *testing.T) {
	dev, err := webgpu.Open(context.Background())
	gputest.NoDevice(t, "webgpu", err)
	defer dev.Close()
	be := New(dev)
	defer be.Close()
	if !be.Caps().CopyState {
		t.Fatal("Caps().CopyState is off")
	}
	conv := fusion.LayerState{ConvChannels: 6, ConvWindow: 3}
	delta := fusion.LayerState{ConvChannels: 10, ConvWindow: 3, MatrixHeads: 2, MatrixRows: 4, MatrixCols: 5}
	spec := fusion.KVSpec{Layers: 3, KVHeads: 1, HeadDim: 4, MaxLen: 16, State: []fusion.LayerState{conv, {}, delta}}
	one := spec
	one.MaxLen = 1
	newCache := func(spec fusion.KVSpec) *kvCache {
		c, err := be.NewKVCache(spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Release)
		return c.(*kvCache)
	}
	src, point, dst := newCache(spec), newCache(one), newCache(spec)
	fill := func(b gpu.Buffer, seed int) []byte {
		data := make([]byte, b.Size())
		for i := range data {
			data[i] = byte(i*seed + 1)
		}
		if err := dev.Write(b, 0, data); err != nil {
			t.Fatal(err)
		}
		return data
	}
	read := func(b gpu.Buffer) []byte {
		got := make([]byte, b.Size())
		if err := dev.Read(b, 0, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want0, want2 := fill(src.state[0], 7), fill(src.state[2], 13)
	keys := fill(dst.k[1], 3)
	src.statePos = 9
	if err := be.CopyState(point, src); err != nil || point.statePos != 9 {
		t.Fatalf("checkpoint: %v, states at %d", err, point.statePos)
	}
	fill(src.state[2], 5) // the sequence goes on
	src.statePos = 12
	if err := be.CopyState(dst, point); err != nil || dst.statePos != 9 {
		t.Fatalf("restore: %v, states at %d", err, dst.statePos)
	}
	if !bytes.Equal(read(dst.state[0]), want0) || !bytes.Equal(read(dst.state[2]), want2) {
		t.Error("the restored states are not the checkpoint's (window and matrices)")
	}
	if !bytes.Equal(read(dst.k[1]), keys) {
		t.Error("the copy of states changed keys")
	}
	other := spec
	other.State = []fusion.LayerState{conv, {}, conv}
	if err := be.CopyState(newCache(other), src); !errors.Is(err, gpu.ErrStep) {
		t.Errorf("copy between caches of other states: %v, want gpu.ErrStep", err)
	}
	src.statePos = -1
	if err := be.CopyState(dst, src); !errors.Is(err, gpu.ErrStep) || dst.statePos != 9 {
		t.Errorf("copy of unknown states: %v (destination at %d), want gpu.ErrStep and nothing copied", err, dst.statePos)
	}
}

// TestCopyKVQuant: CopyKV copies positions [0, n) of block caches, whose
// keys and values are both rows of kvRowWords words per slot (q4_0 keys,
// q5_1 values; q8_0 keys beside float values, transposed per word), and
// refuses caches of other types or rotation with gpu.ErrStep.
func TestCopyKVQuant(t *testing.T) {
	dev, err := webgpu.Open(context.Background())
	gputest.NoDevice(t, "webgpu", err)
	defer dev.Close()
	be := New(dev)
	defer be.Close()
	const n, heads, slots = 17, 2, 32
	for _, spec := range []fusion.KVSpec{
		{Layers: 1, KVHeads: heads, HeadDim: 64, MaxLen: slots, K: fusion.KVQ4_0, V: fusion.KVQ5_1},
		{Layers: 1, KVHeads: heads, HeadDim: 96, MaxLen: slots, K: fusion.KVQ8_0},
	} {
		src, err := be.NewKVCache(spec)
		if err != nil {
			t.Fatal(err)
		}
		dst, err := be.NewKVCache(spec)
		if err != nil {
			t.Fatal(err)
		}
		s, d := src.(*kvCache), dst.(*kvCache)
		rw := func(b gpu.Buffer, data []byte) []byte {
			if data != nil {
				if err := dev.Write(b, 0, data); err != nil {
					t.Fatal(err)
				}
				return data
			}
			out := make([]byte, b.Size())
			if err := dev.Read(b, 0, out); err != nil {
				t.Fatal(err)
			}
			return out
		}
		pattern := func(size int64, seed byte) []byte {
			p := make([]byte, size)
			for i := range p {
				p[i] = seed + byte(i*7)
			}
			return p
		}
		wk, wv := rw(s.k[0], pattern(s.k[0].Size(), 1)), rw(s.v[0], pattern(s.v[0].Size(), 5))
		if err := be.CopyKV(dst, src, n); err != nil {
			t.Fatal(err)
		}
		gk, gv := rw(d.k[0], nil), rw(d.v[0], nil)
		kw, vw := kvRowWords(spec, spec.K, 0)*4, kvRowWords(spec, spec.V, 0)*4
		for h := range heads {
			if at := h * slots * kw; !bytes.Equal(gk[at:at+n*kw], wk[at:at+n*kw]) {
				t.Errorf("%v/%v, head %d: keys of [0, %d) not copied", spec.K, spec.V, h, n)
			}
			if spec.V.Quantized() {
				if at := h * slots * vw; !bytes.Equal(gv[at:at+n*vw], wv[at:at+n*vw]) {
					t.Errorf("%v/%v, head %d: values of [0, %d) not copied", spec.K, spec.V, h, n)
				}
				continue
			}
			for w := range spec.HeadDim {
				if at := (h*spec.HeadDim + w) * slots * 4; !bytes.Equal(gv[at:at+n*4], wv[at:at+n*4]) {
					t.Errorf("%v/%v, head %d, dim %d: values of [0, %d) not copied", spec.K, spec.V, h, w, n)
				}
			}
		}
		other := spec
		other.K = fusion.KVQ5_0
		o, err := be.NewKVCache(other)
		if err != nil {
			t.Fatal(err)
		}
		if err := be.CopyKV(o, src, n); !errors.Is(err, gpu.ErrStep) {
			t.Errorf("CopyKV(%v keys, %v keys) = %v, want gpu.ErrStep", other.K, spec.K, err)
		}
		o.Release()
		src.Release()
		dst.Release()
	}
}
