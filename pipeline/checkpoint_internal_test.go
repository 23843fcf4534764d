package pipeline

import (
	"testing"

	"github.com/gpurun/gpurun/fusion"
	"github.com/gpurun/gpurun/internal/backend/cpu"
)

// TestStateStoreBudget: the store of state checkpoints counts each at the
// bytes of a cache of one position (the states of its recurrent layers
// and one position of keys and values of the others), never holds more
// than its budget, evicts the least recently used checkpoint (a restore
// counts as a use) to make room, skips evicted ones, reuses the caches of
// dropped ones and keeps none where one does not fit.
func TestStateStoreBudget(t *testing.T) {
	be := cpu.New(cpu.Options{Threads: 1})
	defer be.Close()
	spec := fusion.KVSpec{Layers: 3, KVHeads: 2, HeadDim: 4, MaxLen: 16,
		State: []fusion.LayerState{{ConvChannels: 8, ConvWindow: 2}, {}, {ConvChannels: 8, ConvWindow: 2}}}
	// Two states of 8x2 f32 values; keys and values of 2 heads x 4 f32
	// values for one position of the attention layer.
	const per = 2*8*2*4 + 2*2*4*4
	m := &Model{backend: be, caps: be.Caps(), kvSpec: spec}
	kv, err := be.NewKVCache(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Release()

	if st := newStateStore(m, -1, 0); st != nil {
		t.Error("a negative budget keeps a store")
	}
	if st := newStateStore(&Model{backend: be, caps: be.Caps(), kvSpec: fusion.KVSpec{Layers: 1, KVHeads: 1, HeadDim: 4, MaxLen: 4}}, 0, 0); st != nil {
		t.Error("a model without recurrent states keeps a store")
	}
	if st := newStateStore(m, 0, 0); st == nil || st.budget != DefaultStateCheckpointBytes || st.every != DefaultCheckpointEvery || st.bytes != per {
		t.Fatalf("default store %+v, want budget %d, interval %d, %d bytes each", st, DefaultStateCheckpointBytes, DefaultCheckpointEvery, per)
	}

	small := newStateStore(m, per-1, 4)
	if ck := small.take(m, kv, 3); ck != nil || small.used != 0 {
		t.Errorf("a budget below one checkpoint took one (%d bytes used)", small.used)
	}

	st := newStateStore(m, 2*per+per/2, 4)
	defer st.release()
	a, b := st.take(m, kv, 1), st.take(m, kv, 2)
	if a == nil || b == nil || st.used != 2*per {
		t.Fatalf("two checkpoints: %v %v, %d bytes used, want %d", a, b, st.used, 2*per)
	}
	if !st.restore(m, kv, a) { // a is now the more recently used
		t.Fatal("restore failed")
	}
	c := st.take(m, kv, 3)
	if c == nil || b.kv != nil || a.kv == nil || st.evicted != 1 || st.used != 2*per {
		t.Errorf("third checkpoint: evicted %d (b evicted %v, a kept %v), %d bytes used, want the least recently used (b) out and %d bytes", st.evicted, b.kv == nil, a.kv != nil, st.used, 2*per)
	}
	if st.restore(m, kv, b) {
		t.Error("an evicted checkpoint restored")
	}
	if got := st.latest([]*checkpoint{a, b, c}, 2); got != a {
		t.Errorf("latest up to 2 of a@1, evicted b@2, c@3: %v, want a", got)
	}
	st.drop([]*checkpoint{a})
	if a.kv != nil || len(st.spare) != 1 || st.used != 2*per || len(st.held) != 1 {
		t.Errorf("after a drop: %d spares, %d held, %d bytes used; want the cache kept as a spare within the budget", len(st.spare), len(st.held), st.used)
	}
	if d := st.take(m, kv, 4); d == nil || len(st.spare) != 0 || st.used != 2*per || st.evicted != 1 {
		t.Errorf("a checkpoint after a drop: %d spares, %d bytes used, %d evicted; want the spare reused", len(st.spare), st.used, st.evicted)
	}
	for i, tc := range []struct{ pos, total, stop int }{
		{0, 100, 4}, {3, 100, 4}, {4, 100, 8}, {96, 99, 98}, {98, 99, 99}, {0, 3, 2}, {2, 3, 3},
	} {
		if got := st.stop(tc.pos, tc.total); got != tc.stop {
			t.Errorf("case %d: chunk from %d of %d stops at %d, want %d", i, tc.pos, tc.total, got, tc.stop)
		}
	}
}
