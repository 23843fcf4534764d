package modelfile

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gpurun/gpurun/internal/modelfile/internal/tflite"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// checkSamples compares parsed tensors with what was written: bytes
// bit-identical, scales attached, dequantized values within half a scale.
func checkSamples(t *testing.T, f *File, s []sample) {
	t.Helper()
	if got := len(f.Tensors()); got != len(s) {
		t.Fatalf("%d tensors, want %d", got, len(s))
	}
	for i, want := range s {
		got := f.Tensors()[i]
		w := want.t
		if got.Name != w.Name || got.DType != w.DType || !reflect.DeepEqual(got.Shape, w.Shape) || !bytes.Equal(got.Data, w.Data) {
			t.Fatalf("tensor %d: got %s %s%v (%d bytes), want %s %s%v (%d bytes)", i,
				got.Name, got.DType, got.Shape, len(got.Data), w.Name, w.DType, w.Shape, len(w.Data))
		}
		if f.Tensor(w.Name) != got {
			t.Errorf("Tensor(%q) does not find it", w.Name)
		}
		if (got.Scales == nil) != (w.Scales == nil) {
			t.Fatalf("%s: scales %v, want %v", w.Name, got.Scales != nil, w.Scales != nil)
		}
		if w.Scales != nil {
			gs, ws := got.Scales, w.Scales
			if gs.Name != model.ScaleName(w.Name) || gs.DType != ws.DType || !reflect.DeepEqual(gs.Shape, ws.Shape) || !bytes.Equal(gs.Data, ws.Data) {
				t.Fatalf("%s: scales %s %s%v, want %s%v", w.Name, gs.Name, gs.DType, gs.Shape, ws.DType, ws.Shape)
			}
		}
		vals, err := got.Float32()
		if err != nil {
			t.Fatal(err)
		}
		tol := func(int) float32 { return 0 }
		switch got.DType {
		case tensors.F16:
			tol = func(j int) float32 { return abs(want.vals[j]) / 2048 }
		case tensors.BF16:
			tol = func(j int) float32 { return abs(want.vals[j]) / 256 }
		case tensors.I8, tensors.I4:
			scales, _ := got.Scales.Float32()
			block := got.BlockSize()
			tol = func(j int) float32 { return scales[j/block] / 2 * 1.000001 }
		}
		for j, v := range want.vals {
			if d := abs(vals[j] - v); d > tol(j) {
				t.Fatalf("%s[%d] = %g, want %g within %g", w.Name, j, vals[j], v, tol(j))
			}
		}
	}
}

func abs(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

func TestRoundTrip(t *testing.T) {
	s := testTensors(t, 4, 64)
	tok := []byte("\x0a\x05hello tokenizer proto")
	var progress []int64
	opts := WriteOptions{
		Tokenizer: tok,
		Extra:     map[string][]byte{"note": []byte("x"), "empty": {}},
		Progress:  func(done, total int64) { progress = append(progress, done, total) },
	}
	data := writeModel(t, s, opts)
	f, err := parse(data)
	if err != nil {
		t.Fatal(err)
	}
	checkSamples(t, f, s)
	if f.Format() != FormatTFLite || !f.HasConfig() || !reflect.DeepEqual(f.Config(), testConfig()) {
		t.Errorf("format %s config %+v", f.Format(), f.Config())
	}
	if !bytes.Equal(f.Tokenizer(), tok) {
		t.Errorf("tokenizer %q", f.Tokenizer())
	}
	for k, want := range map[string]string{MetaBackend: "gpu", "note": "x", "empty": ""} {
		if got, ok := f.Metadata(k); !ok || string(got) != want {
			t.Errorf("metadata %s = %q, %v", k, got, ok)
		}
	}
	if got, want := f.MetadataNames(), []string{MetaBackend, "empty", MetaConfig, "note", MetaTokenizer}; !reflect.DeepEqual(got, want) {
		t.Errorf("metadata names %v, want %v", got, want)
	}
	var total int64
	for _, x := range s {
		total += int64(len(x.t.Data))
		if x.t.Scales != nil {
			total += int64(len(x.t.Scales.Data))
		}
	}
	if n := len(progress); n == 0 || progress[n-2] != total || progress[n-1] != total {
		t.Errorf("progress %v, want to end at %d/%d", progress, total, total)
	}
}

// The generated flatc reader, which knows TFLite's schema independently of
// our checked accessors, must see the same tensors, types and buffers.
func TestGeneratedReaderAgrees(t *testing.T) {
	s := testTensors(t, 2, 64)
	data := writeModel(t, s, WriteOptions{})
	if string(data[4:8]) != "TFL3" {
		t.Fatal("no TFL3 identifier")
	}
	m := tflite.GetRootAsModel(data, 0)
	if m.Version() != 3 || m.SubgraphsLength() != 1 {
		t.Fatalf("version %d, %d subgraphs", m.Version(), m.SubgraphsLength())
	}
	var sg tflite.SubGraph
	m.Subgraphs(&sg, 0)
	want := map[tensors.DType]tflite.TensorType{
		tensors.F32: tflite.TensorTypeFLOAT32, tensors.F16: tflite.TensorTypeFLOAT16, tensors.BF16: tflite.TensorTypeBFLOAT16,
		tensors.I32: tflite.TensorTypeINT32, tensors.I8: tflite.TensorTypeINT8, tensors.I4: tflite.TensorTypeINT4,
	}
	var expect []*tensors.Tensor
	for _, x := range s {
		expect = append(expect, x.t)
		if x.t.Scales != nil {
			expect = append(expect, x.t.Scales)
		}
	}
	if sg.TensorsLength() != len(expect) {
		t.Fatalf("%d tensors, want %d", sg.TensorsLength(), len(expect))
	}
	for i, e := range expect {
		var tt tflite.Tensor
		sg.Tensors(&tt, i)
		name := e.Name
		if i > 0 && expect[i-1].Scales == e {
			name = model.ScaleName(expect[i-1].Name)
		}
		if string(tt.Name()) != name || tt.Type() != want[e.DType] || tt.ShapeLength() != len(e.Shape) {
			t.Fatalf("tensor %d: %s %v, want %s %v", i, tt.Name(), tt.Type(), name, want[e.DType])
		}
		var buf tflite.Buffer
		m.Buffers(&buf, int(tt.Buffer()))
		off, size := buf.Offset(), buf.Size()
		if off%dataAlign != 0 || !bytes.Equal(data[off:off+size], e.Data) {
			t.Fatalf("%s: buffer at %d size %d does not hold the tensor bytes", name, off, size)
		}
		q := tt.Quantization(nil)
		if perChannel := e.Scales != nil && len(e.Scales.Shape) == 1; perChannel {
			scales, _ := e.Scales.Float32()
			if q == nil || q.ScaleLength() != len(scales) || q.ZeroPointLength() != len(scales) {
				t.Fatalf("%s: no per-channel quantization parameters", name)
			}
			for j, sc := range scales {
				if q.Scale(j) != sc || q.ZeroPoint(j) != 0 {
					t.Fatalf("%s: scale %d = %g/%d, want %g/0", name, j, q.Scale(j), q.ZeroPoint(j), sc)
				}
			}
		} else if q != nil {
			t.Fatalf("%s: unexpected quantization parameters", name)
		}
	}
}

func TestOpenMapsFile(t *testing.T) {
	s := testTensors(t, 2, 32)
	data := writeModel(t, s, WriteOptions{Tokenizer: []byte("tok")})
	dir := t.TempDir()
	paths := map[string][]byte{
		"model.tflite": data,
		"model.task":   writeTask(t, data, []byte("task tok"), nil),
	}
	for name, content := range paths {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		checkSamples(t, f, s)
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing")); err == nil {
		t.Error("Open of a missing file succeeded")
	}
}

func TestTaskRoundTrip(t *testing.T) {
	s := testTensors(t, 3, 64)
	modelBytes := writeModel(t, s, WriteOptions{Tokenizer: []byte("inner")})
	for _, tc := range []struct {
		name      string
		tokenizer []byte
		meta      []byte
		wantTok   string
	}{
		{"all entries", []byte("outer tokenizer"), []byte(`{"x":1}`), "outer tokenizer"},
		{"model only", nil, nil, "inner"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := writeTask(t, modelBytes, tc.tokenizer, tc.meta)
			zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			wantEntries := 1
			if tc.tokenizer != nil {
				wantEntries = 3
			}
			if len(zr.File) != wantEntries {
				t.Fatalf("%d entries, want %d", len(zr.File), wantEntries)
			}
			for _, zf := range zr.File {
				off, err := zf.DataOffset()
				if err != nil || off%4 != 0 || off%taskAlign != 0 || zf.Method != zip.Store {
					t.Errorf("%s: data at %d (%v), method %d", zf.Name, off, err, zf.Method)
				}
				// archive/zip checks the CRC while reading: the header is right.
				rc, err := zf.Open()
				if err != nil {
					t.Fatal(err)
				}
				var got bytes.Buffer
				if _, err := got.ReadFrom(rc); err != nil {
					t.Fatalf("%s: %v", zf.Name, err)
				}
				if zf.Name == TaskModel && !bytes.Equal(got.Bytes(), modelBytes) {
					t.Errorf("model entry differs")
				}
			}
			f, err := parse(data)
			if err != nil {
				t.Fatal(err)
			}
			checkSamples(t, f, s)
			if f.Format() != FormatTask || string(f.Tokenizer()) != tc.wantTok || !bytes.Equal(f.TaskMetadata(), tc.meta) {
				t.Errorf("format %s tokenizer %q metadata %q", f.Format(), f.Tokenizer(), f.TaskMetadata())
			}
		})
	}
}

// A model flatbuffer without gpurun.config takes its configuration from the
// bundle's METADATA.
func TestTaskConfigFromMetadata(t *testing.T) {
	bare := buildRaw(t, rawModel{tensors: []rawTensor{{name: "w", typ: tflite.TensorTypeFLOAT32, shape: []int32{1}, data: make([]byte, 4)}}})
	js, err := ConfigJSON(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	f, err := parse(writeTask(t, bare, nil, js))
	if err != nil {
		t.Fatal(err)
	}
	if !f.HasConfig() || !reflect.DeepEqual(f.Config(), testConfig()) {
		t.Errorf("config %+v", f.Config())
	}
}
