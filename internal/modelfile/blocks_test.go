package modelfile

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/modelfile/internal/tflite"
	"github.com/gpurun/gpurun/tensors"
)

// blockTensors returns one [2, 256] tensor of every block type with random
// block bytes.
func blockTensors() []*tensors.Tensor {
	rng := rand.New(rand.NewPCG(3, 4))
	var out []*tensors.Tensor
	for _, dt := range []tensors.DType{tensors.Q4_1, tensors.Q5_0, tensors.Q5_1, tensors.Q4K, tensors.Q5K, tensors.Q6K, tensors.Q2K, tensors.Q3K, tensors.Q8_0, tensors.MXFP4} {
		b := make([]byte, dt.ByteSize(2*256))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		out = append(out, &tensors.Tensor{Name: "blocks." + dt.String(), DType: dt, Shape: []int{2, 256}, Data: b})
	}
	return out
}

func TestBlockTypesRoundTrip(t *testing.T) {
	ts := blockTensors()
	var buf bytes.Buffer
	if err := Write(&buf, testConfig(), ts, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range ts {
		got := f.Tensor(want.Name)
		if got == nil || got.DType != want.DType || !bytes.Equal(got.Data, want.Data) || got.Scales != nil ||
			len(got.Shape) != 2 || got.Shape[0] != 2 || got.Shape[1] != 256 {
			t.Errorf("%s: got %+v", want.Name, got)
		}
	}
	// To TFLite tools they are UINT8 tensors with custom quantization.
	m := tflite.GetRootAsModel(buf.Bytes(), 0)
	var tt tflite.Tensor
	sg := new(tflite.SubGraph)
	m.Subgraphs(sg, 0)
	sg.Tensors(&tt, 0)
	if tt.Type() != tflite.TensorTypeUINT8 || tt.Quantization(nil).DetailsType() != tflite.QuantizationDetailsCustomQuantization {
		t.Errorf("tensor 0: type %s, details %d", tt.Type(), tt.Quantization(nil).DetailsType())
	}
}

func TestBlockTypeErrors(t *testing.T) {
	// A UINT8 tensor without custom quantization, and a row that is not
	// whole blocks, are refused with errors naming the problem.
	raw := buildRaw(t, rawModel{tensors: []rawTensor{{name: "w", typ: tflite.TensorTypeUINT8, shape: []int32{4}, data: make([]byte, 4)}}})
	if _, err := Parse(raw); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "UINT8") {
		t.Errorf("bare UINT8: err = %v", err)
	}
	for _, custom := range []string{"gpurun.blocks:int8", "gpurun.blocks:q9_k", "other"} {
		if _, err := blockType([]byte(custom)); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), custom) {
			t.Errorf("%q: err = %v", custom, err)
		}
	}
	bad := &tensors.Tensor{Name: "w", DType: tensors.Q4K, Shape: []int{1, 128}, Data: make([]byte, 144)}
	var buf bytes.Buffer
	if err := Write(&buf, testConfig(), []*tensors.Tensor{bad}, WriteOptions{}); err == nil || !strings.Contains(err.Error(), "whole blocks") {
		t.Errorf("half a Q4_K block: err = %v", err)
	}
}

func TestBlockTypeSummary(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, testConfig(), blockTensors()[3:4], WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	s := f.Summary()
	if q := s.Tensors[0].Quantization; q == nil || !q.InBlock || q.Block != 256 || s.Tensors[0].DType != "q4_k" {
		t.Fatalf("summary %+v", s.Tensors[0])
	}
	var text bytes.Buffer
	if err := s.WriteText(&text); err != nil || !strings.Contains(text.String(), "llama.cpp blocks of 256") {
		t.Errorf("text summary: %v\n%s", err, text.String())
	}
}
