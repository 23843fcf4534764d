package modelfile

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// testConfig is a small but valid configuration.
func testConfig() model.Config {
	return model.Config{
		Arch: model.ArchLlama, VocabSize: 32, Dim: 64, HiddenDim: 128, Layers: 1,
		Heads: 4, KVHeads: 2, HeadDim: 16, MaxSeqLen: 128,
		Norm: model.NormRMS, NormEps: 1e-5, RopeStyle: model.RopeInterleaved, RopeDims: 16, RopeBase: 10000,
		Act: model.ActSiLU, GatedFFN: true, BOS: 1, EOS: 2, AddBOS: true, StopTokens: []int{2},
	}
}

// sample is one test tensor together with the values it was made from.
type sample struct {
	t    *tensors.Tensor
	vals []float32
}

func randomValues(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// testTensors builds one tensor of every stored kind: plain types and
// quantized ones with per-channel and block scales of both scale types.
func testTensors(t testing.TB, rows, cols int) []sample {
	rng := rand.New(rand.NewPCG(7, uint64(rows*cols)))
	var out []sample
	for _, dt := range []tensors.DType{tensors.F32, tensors.F16, tensors.BF16} {
		v := randomValues(rng, rows*cols)
		x, err := tensors.FromF32("plain."+dt.String(), []int{rows, cols}, v, dt)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sample{x, v})
	}
	ids, err := tensors.FromI32("ids", []int{3}, []int32{-5, 0, math.MaxInt32})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, sample{ids, []float32{-5, 0, math.MaxInt32}})
	for _, q := range []struct {
		dt    tensors.DType
		block int
		st    tensors.DType
	}{
		{tensors.I8, 0, tensors.F32}, {tensors.I8, 32, tensors.F16},
		{tensors.I4, 0, tensors.F16}, {tensors.I4, 32, tensors.F32},
	} {
		v := randomValues(rng, rows*cols)
		name := model.Layer(0, fmt.Sprintf("q_%s_block%d_%s.w", q.dt, q.block, q.st))
		x, err := tensors.Quantize(name, []int{rows, cols}, v, q.dt, q.block, q.st)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sample{x, v})
	}
	return out
}

func tensorList(s []sample) []*tensors.Tensor {
	ts := make([]*tensors.Tensor, len(s))
	for i := range s {
		ts[i] = s[i].t
	}
	return ts
}

// writeModel writes a small model file with the sample tensors.
func writeModel(t testing.TB, s []sample, opts WriteOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, testConfig(), tensorList(s), opts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeTask bundles a model flatbuffer.
func writeTask(t testing.TB, modelBytes, tokenizer, meta []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteTask(&buf, bytes.NewReader(modelBytes), int64(len(modelBytes)), tokenizer, meta); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
