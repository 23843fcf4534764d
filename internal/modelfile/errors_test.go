package modelfile

import (
	"archive/zip"
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/modelfile/internal/tflite"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

func f32Bytes(n int) []byte { return make([]byte, 4*n) }

func TestParseRawLayouts(t *testing.T) {
	scaleName := model.ScaleName("q")
	goodQ := []rawTensor{
		{name: "q", typ: tflite.TensorTypeINT8, shape: []int32{2, 2}, data: []byte{1, 2, 3, 4}},
		{name: scaleName, typ: tflite.TensorTypeFLOAT32, shape: []int32{2}, data: f32Bytes(2)},
	}
	for _, tc := range []struct {
		name string
		m    rawModel
		want error // nil: parses
	}{
		{"inline data", rawModel{tensors: []rawTensor{{name: "w", typ: tflite.TensorTypeFLOAT16, shape: []int32{3}, data: make([]byte, 6)}}}, nil},
		{"activation without data skipped", rawModel{tensors: []rawTensor{{name: "act", typ: tflite.TensorTypeINT64, shape: []int32{1, 8}, noData: true}}}, nil},
		{"quantized with scales", rawModel{tensors: goodQ}, nil},
		{"no config is fine", rawModel{meta: map[string][]byte{"backend": []byte("cpu")}}, nil},
		{"unsupported type", rawModel{tensors: []rawTensor{{name: "w", typ: tflite.TensorTypeINT64, shape: []int32{1}, data: make([]byte, 8)}}}, ErrUnsupported},
		{"unknown type code", rawModel{tensors: []rawTensor{{name: "w", typ: 99, shape: []int32{1}, data: make([]byte, 8)}}}, ErrUnsupported},
		{"size mismatch", rawModel{tensors: []rawTensor{{name: "w", typ: tflite.TensorTypeFLOAT32, shape: []int32{3}, data: f32Bytes(2)}}}, ErrFormat},
		{"negative dim", rawModel{tensors: []rawTensor{{name: "w", typ: tflite.TensorTypeFLOAT32, shape: []int32{-1, -4}, data: f32Bytes(4)}}}, ErrFormat},
		{"huge dims", rawModel{tensors: []rawTensor{{name: "w", typ: tflite.TensorTypeFLOAT32, shape: []int32{1 << 30, 1 << 30, 1 << 30}, data: f32Bytes(1)}}}, ErrFormat},
		{"duplicate names", rawModel{tensors: []rawTensor{
			{name: "w", typ: tflite.TensorTypeFLOAT32, shape: []int32{1}, data: f32Bytes(1)},
			{name: "w", typ: tflite.TensorTypeFLOAT32, shape: []int32{1}, data: f32Bytes(1)}}}, ErrFormat},
		{"missing scales", rawModel{tensors: goodQ[:1]}, ErrFormat},
		{"scales of the wrong shape", rawModel{tensors: []rawTensor{goodQ[0],
			{name: scaleName, typ: tflite.TensorTypeFLOAT32, shape: []int32{3}, data: f32Bytes(3)}}}, tensors.ErrShape},
		{"int8 scales", rawModel{tensors: []rawTensor{goodQ[0],
			{name: scaleName, typ: tflite.TensorTypeINT8, shape: []int32{2}, data: make([]byte, 2)}}}, ErrFormat},
		{"odd int4 row", rawModel{tensors: []rawTensor{
			{name: "q", typ: tflite.TensorTypeINT4, shape: []int32{1, 3}, data: make([]byte, 2)},
			{name: scaleName, typ: tflite.TensorTypeFLOAT32, shape: []int32{1}, data: f32Bytes(1)}}}, ErrFormat},
		{"offset past the end", rawModel{tensors: []rawTensor{{name: "w", typ: tflite.TensorTypeFLOAT32, shape: []int32{4}, data: f32Bytes(4), external: 1 << 40}}}, ErrTruncated},
		{"bad config json", rawModel{meta: map[string][]byte{MetaConfig: []byte("{")}}, ErrFormat},
		{"invalid config", rawModel{meta: map[string][]byte{MetaConfig: []byte(`{"arch":"llama"}`)}}, model.ErrConfig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parse(buildRaw(t, tc.m))
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				for _, rt := range tc.m.tensors {
					if got := f.Tensor(rt.name); (got == nil) != rt.noData {
						t.Errorf("tensor %s present=%v", rt.name, got != nil)
					}
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
		})
	}
}

func TestParseNotAModel(t *testing.T) {
	good := writeModel(t, testTensors(t, 1, 32), WriteOptions{})
	noID := bytes.Clone(good)
	copy(noID[4:8], "XXXX")
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"short", []byte("TFL3"), ErrTruncated},
		{"no identifier", noID, ErrFormat},
		{"text", []byte("this is not a model file at all"), ErrFormat},
		{"zip header only", []byte("PK\x03\x04 and nothing else"), ErrFormat},
	} {
		if _, err := Parse(tc.data); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestTaskErrors(t *testing.T) {
	good := writeModel(t, testTensors(t, 1, 32), WriteOptions{})
	zipWith := func(entries map[string][]byte, method uint16) []byte {
		var buf bytes.Buffer
		zw := zip.NewWriter(&buf)
		for _, name := range []string{TaskModel, TaskTokenizer, "other"} {
			data, ok := entries[name]
			if !ok {
				continue
			}
			w, err := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
			if err != nil {
				t.Fatal(err)
			}
			w.Write(data)
		}
		zw.Close()
		return buf.Bytes()
	}
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"compressed model", zipWith(map[string][]byte{TaskModel: good}, zip.Deflate), ErrUnsupported},
		{"no model entry", zipWith(map[string][]byte{"other": good}, zip.Store), ErrFormat},
		{"model entry not a model", zipWith(map[string][]byte{TaskModel: []byte("nope nope")}, zip.Store), ErrFormat},
		{"bad metadata config", writeTask(t, buildRaw(t, rawModel{}), nil, []byte("not json")), ErrFormat},
	} {
		if _, err := Parse(tc.data); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// Stored entries written by archive/zip itself (data descriptor, no
	// alignment) still parse: alignment is a property of our writer only.
	if _, err := Parse(zipWith(map[string][]byte{TaskModel: good, TaskTokenizer: []byte("t")}, zip.Store)); err != nil {
		t.Errorf("plain stored zip: %v", err)
	}
}

func TestWriteErrors(t *testing.T) {
	good := testTensors(t, 1, 32)
	badCfg := testConfig()
	badCfg.Heads = 3
	f32, _ := tensors.FromF32("a", []int{2}, []float32{1, 2}, tensors.F32)
	short := &tensors.Tensor{Name: "short", DType: tensors.F32, Shape: []int{3}, Data: make([]byte, 8)}
	clash, _ := tensors.FromF32(model.ScaleName(good[4].t.Name), []int{1}, []float32{1}, tensors.F32)
	for _, tc := range []struct {
		name string
		cfg  model.Config
		ts   []*tensors.Tensor
		opts WriteOptions
		want error
	}{
		{"invalid config", badCfg, tensorList(good), WriteOptions{}, model.ErrConfig},
		{"duplicate", testConfig(), []*tensors.Tensor{f32, f32}, WriteOptions{}, ErrInvalid},
		{"scale name clash", testConfig(), []*tensors.Tensor{good[4].t, clash}, WriteOptions{}, ErrInvalid},
		{"bad tensor", testConfig(), []*tensors.Tensor{short}, WriteOptions{}, tensors.ErrShape},
		{"nil tensor", testConfig(), []*tensors.Tensor{nil}, WriteOptions{}, ErrInvalid},
		{"unnamed", testConfig(), []*tensors.Tensor{{DType: tensors.F32, Shape: []int{1}, Data: make([]byte, 4)}}, WriteOptions{}, ErrInvalid},
		{"reserved extra", testConfig(), nil, WriteOptions{Extra: map[string][]byte{MetaBackend: nil}}, ErrInvalid},
	} {
		var buf bytes.Buffer
		if err := Write(&buf, tc.cfg, tc.ts, tc.opts); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := Write(failWriter{}, testConfig(), tensorList(good), WriteOptions{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("write error not reported: %v", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }
