package fusion

import (
	"errors"
	"testing"
)

// TestKVRotationRule holds KRotation and VRotation to llama.cpp's rule
// (llama_kv_cache at 81ff7abe5: attn_rot_k/attn_rot_v and
// build_input_k_rot/v_rot), case by case.
func TestKVRotationRule(t *testing.T) {
	rec := LayerState{ConvChannels: 4, ConvWindow: 2}
	for _, c := range []struct {
		name       string
		spec       KVSpec
		layer      int
		kRot, vRot int
	}{
		{"hd 128", KVSpec{Layers: 2, HeadDim: 128, K: KVQ4_0, V: KVQ4_0}, 1, 128, 64},
		{"hd 64", KVSpec{Layers: 2, HeadDim: 64, K: KVQ8_0, V: KVQ8_0}, 0, 64, 64},
		{"hd 192: the largest power of two dividing it", KVSpec{Layers: 2, HeadDim: 192, K: KVQ4_0, V: KVQ4_0}, 0, 64, 64},
		{"hd 256", KVSpec{Layers: 2, HeadDim: 256, K: KVQ4_0, V: KVQ4_0}, 0, 256, 64},
		{"hd 32: none", KVSpec{Layers: 2, HeadDim: 32, K: KVQ4_0, V: KVQ4_0}, 0, 0, 0},
		{"hd 96: none", KVSpec{Layers: 2, HeadDim: 96, K: KVQ4_0, V: KVQ4_0}, 0, 0, 0},
		{"float keys: only the values", KVSpec{Layers: 2, HeadDim: 128, F16: true, V: KVQ4_0}, 0, 0, 64},
		{"float values: only queries and keys", KVSpec{Layers: 2, HeadDim: 128, K: KVQ8_0}, 0, 128, 0},
		{"NoRotation", KVSpec{Layers: 2, HeadDim: 128, K: KVQ4_0, V: KVQ4_0, NoRotation: true}, 0, 0, 0},
		{"mixed head dims in one cache: none", KVSpec{Layers: 2, HeadDim: 256, HeadDims: []int{128, 256}, K: KVQ4_0, V: KVQ4_0}, 1, 0, 0},
		{"iSWA, sliding group", KVSpec{Layers: 5, HeadDim: 512, HeadDims: []int{256, 256, 512, 0, 0}, SWA: []bool{true, true, false, true, false}, K: KVQ4_0, V: KVQ4_0}, 1, 256, 64},
		{"iSWA, full group", KVSpec{Layers: 5, HeadDim: 512, HeadDims: []int{256, 256, 512, 0, 0}, SWA: []bool{true, true, false, true, false}, K: KVQ4_0, V: KVQ4_0}, 2, 512, 64},
		{"iSWA, layer 0's head dim not a multiple of 64: none", KVSpec{Layers: 2, HeadDim: 128, HeadDims: []int{32, 128}, SWA: []bool{true, false}, K: KVQ4_0, V: KVQ4_0}, 1, 0, 0},
		{"recurrent layers not counted", KVSpec{Layers: 3, HeadDim: 128, State: []LayerState{rec, {}, rec}, K: KVQ4_0, V: KVQ4_0}, 1, 128, 64},
	} {
		if k, v := c.spec.KRotation(c.layer), c.spec.VRotation(c.layer); k != c.kRot || v != c.vRot {
			t.Errorf("%s: rotations %d, %d, want %d, %d", c.name, k, v, c.kRot, c.vRot)
		}
	}
}

func TestKVTypes(t *testing.T) {
	for _, name := range KVTypeNames {
		typ, f16, err := ParseKVType(name)
		if err != nil {
			t.Fatal(err)
		}
		if typ.Quantized() && typ.String() != name || !typ.Quantized() && f16 != (name == "f16") {
			t.Errorf("%s: %v f16 %v", name, typ, f16)
		}
	}
	if _, _, err := ParseKVType("q4_k"); !errors.Is(err, ErrKVType) {
		t.Errorf("q4_k: %v", err)
	}
	if err := (KVSpec{Layers: 1, HeadDim: 16, K: KVQ8_0}).CheckTypes(); !errors.Is(err, ErrKVType) {
		t.Errorf("head dim 16 with q8_0 keys: %v", err)
	}
	if got := KVBytes(KVQ4_0, false, 64) + KVBytes(KVQ8_0, false, 64) + KVBytes(KVFloat, true, 64); got != 36+68+128 {
		t.Errorf("KVBytes: %d", got)
	}
}
