package convert

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/internal/modelfile"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// checkpoint builds a tiny llama checkpoint with f32 weights whose values
// are a smooth function of the index, so quantization errors are bounded.
func checkpoint(t *testing.T, hidden int) *model.Checkpoint {
	t.Helper()
	cfg := model.Config{Arch: model.ArchLlama, VocabSize: 16, Dim: 64, HiddenDim: hidden, Layers: 1, Heads: 2, KVHeads: 2,
		HeadDim: 32, MaxSeqLen: 32, Norm: model.NormRMS, NormEps: 1e-5, RopeStyle: model.RopeInterleaved, RopeDims: 32,
		RopeBase: 10000, Act: model.ActSiLU, GatedFFN: true, Tied: true, BOS: 1, EOS: 2}
	build := func(name string, shape ...int) *tensors.Tensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Sin(float64(i)*0.37)) * 0.1
		}
		w, err := tensors.FromF32(name, shape, v, tensors.F32)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	mat := func(name string, rows, cols int) *tensors.Tensor { return build(name, rows, cols) }
	vec := func(name string, n int) *tensors.Tensor { return build(name, n) }
	ck := &model.Checkpoint{Config: cfg}
	ck.Tensors = append(ck.Tensors,
		mat(model.TokenEmbedding, 16, 64), vec(model.FinalNorm, 64), vec(model.Layer(0, model.AttnNorm), 64),
		mat(model.Layer(0, model.WQ), 64, 64), mat(model.Layer(0, model.WK), 64, 64), mat(model.Layer(0, model.WV), 64, 64),
		mat(model.Layer(0, model.WO), 64, 64), vec(model.Layer(0, model.FFNNorm), 64),
		mat(model.Layer(0, model.WGate), hidden, 64), mat(model.Layer(0, model.WUp), hidden, 64), mat(model.Layer(0, model.WDown), 64, hidden))
	return ck
}

func TestRecipes(t *testing.T) {
	type want struct {
		dtype tensors.DType
		block int // 0: per channel or unquantized
	}
	down := model.Layer(0, model.WDown) // its rows have `hidden` columns
	q := model.Layer(0, model.WQ)
	for _, tc := range []struct {
		recipe string
		hidden int
		checks map[string]want
	}{
		{Keep, 128, map[string]want{q: {tensors.F32, 0}, model.TokenEmbedding: {tensors.F32, 0}}},
		{F32, 128, map[string]want{q: {tensors.F32, 0}, model.FinalNorm: {tensors.F32, 0}}},
		{F16, 128, map[string]want{q: {tensors.F16, 0}, model.TokenEmbedding: {tensors.F16, 0}, model.FinalNorm: {tensors.F32, 0}}},
		{Int8, 128, map[string]want{q: {tensors.I8, 0}, model.TokenEmbedding: {tensors.I8, 0}, model.FinalNorm: {tensors.F32, 0}}},
		{Int4, 128, map[string]want{q: {tensors.I4, 0}, model.TokenEmbedding: {tensors.I8, 0}, down: {tensors.I4, 0}}},
		{Int4Block32, 128, map[string]want{q: {tensors.I4, 32}, down: {tensors.I4, 32}, model.TokenEmbedding: {tensors.I8, 0}}},
		{Int4Block128, 256, map[string]want{q: {tensors.I4, 0}, down: {tensors.I4, 128}}}, // 64-wide rows fall back to per channel
		{Int4Block32, 48, map[string]want{down: {tensors.I4, 0}, model.Layer(0, model.WUp): {tensors.I4, 32}}},
		{Mixed, 128, map[string]want{q: {tensors.I8, 0}, down: {tensors.I4, 32}, model.Layer(0, model.WGate): {tensors.I4, 32}, model.TokenEmbedding: {tensors.I8, 0}}},
	} {
		t.Run(tc.recipe, func(t *testing.T) {
			ck := checkpoint(t, tc.hidden)
			notes := 0
			ts, err := Tensors(context.Background(), ck, Options{Recipe: tc.recipe, Notef: func(string, ...any) { notes++ }})
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]*tensors.Tensor{}
			for _, w := range ts {
				if err := w.Check(); err != nil {
					t.Fatal(err)
				}
				byName[w.Name] = w
			}
			for name, w := range tc.checks {
				got := byName[name]
				block := 0
				if got.Scales != nil && len(got.Scales.Shape) == 2 {
					block = got.BlockSize()
				}
				if got.DType != w.dtype || block != w.block {
					t.Errorf("%s: %s block %d, want %s block %d", name, got.DType, block, w.dtype, w.block)
				}
			}
			for i, w := range ts {
				src, err := ck.Tensors[i].Float32()
				if err != nil {
					t.Fatal(err)
				}
				got, err := w.Float32()
				if err != nil {
					t.Fatal(err)
				}
				// The largest error any recipe may make: half an int4 step
				// of the row's largest magnitude (0.1 / 7 / 2), f16 rounding
				// of the scale included.
				for j := range src {
					if d := math.Abs(float64(got[j] - src[j])); d > 0.1/7/2*1.01 {
						t.Fatalf("%s[%d]: %g after %s, was %g", w.Name, j, got[j], tc.recipe, src[j])
					}
				}
			}
			if tc.hidden == 48 && notes == 0 {
				t.Error("a block-size fallback was not reported")
			}
		})
	}
}

func TestUnknownRecipe(t *testing.T) {
	if _, err := Tensors(context.Background(), checkpoint(t, 128), Options{Recipe: "int3"}); err == nil {
		t.Error("want an error for an unknown recipe")
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Tensors(ctx, checkpoint(t, 128), Options{Recipe: F16}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

// TestWriteFile writes both container kinds and reads them back; a failed
// write leaves nothing at the destination.
func TestWriteFile(t *testing.T) {
	ck := checkpoint(t, 128)
	ts, err := Tensors(context.Background(), ck, Options{Recipe: Int8})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, name := range []string{"m.tflite", "m.task"} {
		path := filepath.Join(dir, name)
		if err := WriteFile(path, ck.Config, ts, []byte("not checked here"), nil); err != nil {
			t.Fatal(err)
		}
		f, err := modelfile.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Tensors()) != len(ts) || string(f.Tokenizer()) != "not checked here" || f.Config().Dim != 64 {
			t.Errorf("%s: %d tensors, tokenizer %q, dim %d", name, len(f.Tensors()), f.Tokenizer(), f.Config().Dim)
		}
		f.Close()
	}
	bad := ck.Config
	bad.Heads = 3
	path := filepath.Join(dir, "bad.task")
	if err := WriteFile(path, bad, ts, nil, nil); err == nil {
		t.Error("want an error for an invalid config")
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*")); len(m) != 2 {
		t.Errorf("directory holds %v: temporary files left behind or output written", m)
	}
}
