package lora

import (
	"errors"
	"math"
	"testing"

	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Spec
		err  bool
	}{
		{"a.gguf", Spec{Path: "a.gguf", Scale: 1}, false},
		{"a.gguf:0.5", Spec{Path: "a.gguf", Scale: 0.5}, false},
		{"dir/with:colon/a.gguf", Spec{Path: "dir/with:colon/a.gguf", Scale: 1}, false},
		{"C:/a.gguf:-1", Spec{Path: "C:/a.gguf", Scale: -1}, false},
		{"a.gguf:inf", Spec{}, true},
		{"", Spec{}, true},
		{":2", Spec{}, true},
	} {
		got, err := ParseSpec(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParseSpec(%q) = %+v, %v; want %+v (error %t)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// checkpointOf returns a one-layer checkpoint with a 2x3 WQ of dtype dt.
func checkpointOf(t *testing.T, dt tensors.DType) *model.Checkpoint {
	t.Helper()
	vals := []float32{1, 2, 3, 4, 5, 6}
	var w *tensors.Tensor
	var err error
	if dt == tensors.I8 {
		w, err = tensors.Quantize(model.Layer(0, model.WQ), []int{2, 3}, vals, dt, 0, tensors.F32)
	} else {
		w, err = tensors.FromF32(model.Layer(0, model.WQ), []int{2, 3}, vals, dt)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &model.Checkpoint{Config: model.Config{Arch: model.ArchLlama}, Tensors: []*tensors.Tensor{w}}
}

// rank1 is B·A = [[1 0 2] [2 0 4]] at scale 1 (alpha = rank = 1).
func rank1(target string) *Adapter {
	return &Adapter{Arch: model.ArchLlama, Alpha: 1, Pairs: []Pair{{Target: target, Rank: 1, In: 3, Out: 2, A: []float32{1, 0, 2}, B: []float32{1, 2}}}}
}

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		dt, want   tensors.DType
		requantize bool
	}{
		{tensors.F32, tensors.F32, false},
		{tensors.F16, tensors.F16, false},
		{tensors.BF16, tensors.BF16, false},
		{tensors.I8, tensors.F32, false},
		{tensors.I8, tensors.I8, true},
	} {
		ck := checkpointOf(t, tc.dt)
		orig := ck.Tensors[0]
		if err := Merge(ck, []Applied{{Adapter: rank1(orig.Name), Scale: 0.5}}, Options{Requantize: tc.requantize}); err != nil {
			t.Fatal(err)
		}
		w := ck.Tensors[0]
		if w.DType != tc.want || w == orig {
			t.Errorf("%s (requantize %t): merged %s, want a new %s", tc.dt, tc.requantize, w.DType, tc.want)
		}
		got, err := w.Float32()
		if err != nil {
			t.Fatal(err)
		}
		want := []float32{1.5, 2, 4, 5, 5, 8}
		for i := range got {
			if math.Abs(float64(got[i]-want[i])) > 0.05 {
				t.Errorf("%s: merged %v, want %v", tc.dt, got, want)
				break
			}
		}
	}
}

func TestMergeErrors(t *testing.T) {
	name := model.Layer(0, model.WQ)
	short := rank1(name)
	short.Pairs[0].B = short.Pairs[0].B[:1]
	wide := rank1(name)
	wide.Pairs[0].In, wide.Pairs[0].A = 2, []float32{1, 2}
	qwen := rank1(name)
	qwen.Arch = model.ArchQwen2
	for _, tc := range []struct {
		name string
		list []Applied
		want error
	}{
		{"nil adapter", []Applied{{}}, ErrFormat},
		{"NaN scale", []Applied{{Adapter: rank1(name), Scale: float32(math.NaN())}}, ErrFormat},
		{"sizes disagree", []Applied{{Adapter: short, Scale: 1}}, ErrFormat},
		{"no such weight", []Applied{{Adapter: rank1(model.Layer(0, model.WK)), Scale: 1}}, ErrMismatch},
		{"shape", []Applied{{Adapter: wide, Scale: 1}}, ErrMismatch},
		{"architecture", []Applied{{Adapter: qwen, Scale: 1}}, ErrMismatch},
		// The second adapter fails: the first must not have been merged.
		{"all or nothing", []Applied{{Adapter: rank1(name), Scale: 1}, {Adapter: wide, Scale: 1}}, ErrMismatch},
	} {
		ck := checkpointOf(t, tensors.F32)
		orig := ck.Tensors[0]
		if err := Merge(ck, tc.list, Options{}); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
		if ck.Tensors[0] != orig {
			t.Errorf("%s: the checkpoint changed", tc.name)
		}
	}
}

// TestUnmerged: the pairs come out as F32 tensors with B scaled, after the
// same checks as Merge.
func TestUnmerged(t *testing.T) {
	ck := checkpointOf(t, tensors.F32)
	name := ck.Tensors[0].Name
	ts, pairs, err := Unmerged(model.ArchLlama, ck.Tensors, []Applied{{Adapter: rank1(name), Scale: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || len(pairs) != 1 || pairs[0].Target != name || pairs[0].A != ts[0].Name || pairs[0].B != ts[1].Name || pairs[0].Rank != 1 {
		t.Fatalf("tensors %d, pairs %+v", len(ts), pairs)
	}
	b, _ := ts[1].Float32()
	if b[0] != 0.5 || b[1] != 1 {
		t.Errorf("scaled B %v, want [0.5 1]", b)
	}
	if _, _, err := Unmerged(model.ArchQwen2, ck.Tensors, []Applied{{Adapter: rank1(name), Scale: 1}}); !errors.Is(err, ErrMismatch) {
		t.Errorf("other architecture: %v", err)
	}
}
