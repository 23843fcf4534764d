package modelfile

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/gpurun/gpurun/internal/modelfile/internal/tflite"
)

// corpusFiles are small valid files of both formats for corruption tests.
func corpusFiles(t testing.TB) map[string][]byte {
	s := testTensors(t, 1, 32)[3:6] // int32, int8 per channel, int8 block: small but with scales
	m := writeModel(t, s, WriteOptions{Tokenizer: []byte("tok"), Extra: map[string][]byte{"k": []byte("v")}})
	js, err := ConfigJSON(testConfig())
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"model": m,
		"task":  writeTask(t, m, []byte("tokenizer"), js),
	}
}

// checkParsed asserts what any successful parse must give: tensors whose
// shape, type, size and scales agree, so later code can trust them.
func checkParsed(t *testing.T, what string, f *File) {
	for _, x := range f.Tensors() {
		if err := x.Check(); err != nil {
			t.Fatalf("%s: parsed an inconsistent tensor: %v", what, err)
		}
	}
}

func TestTruncations(t *testing.T) {
	for name, data := range corpusFiles(t) {
		t.Run(name, func(t *testing.T) {
			for n := range len(data) {
				f, err := parse(data[:n:n])
				if err == nil {
					checkParsed(t, fmt.Sprintf("prefix %d", n), f)
				}
			}
		})
	}
}

func TestBitFlips(t *testing.T) {
	for name, data := range corpusFiles(t) {
		t.Run(name, func(t *testing.T) {
			buf := make([]byte, len(data))
			step := 1
			if testing.Short() {
				step = 7
			}
			for bit := 0; bit < 8*len(data); bit += step {
				copy(buf, data)
				buf[bit/8] ^= 1 << (bit % 8)
				f, err := parse(buf)
				if err == nil {
					checkParsed(t, fmt.Sprintf("bit %d", bit), f)
				}
			}
		})
	}
}

// Parsing must allocate no more than a small multiple of the input, however
// the input is corrupted: counts and offsets are checked against the data
// before anything is sized from them.
func TestParseAllocationBounded(t *testing.T) {
	for name, data := range corpusFiles(t) {
		t.Run(name, func(t *testing.T) {
			buf := make([]byte, len(data))
			var ms runtime.MemStats
			for bit := 3; bit < 8*len(data); bit += 61 {
				copy(buf, data)
				buf[bit/8] ^= 1 << (bit % 8)
				runtime.ReadMemStats(&ms)
				before := ms.TotalAlloc
				parse(buf)
				runtime.ReadMemStats(&ms)
				// The zip directory reader allocates a fixed amount on top.
				if got, limit := ms.TotalAlloc-before, uint64(6*len(data)+128<<10); got > limit {
					t.Fatalf("bit %d: parse allocated %d bytes for a %d byte file", bit, got, len(data))
				}
			}
		})
	}
}

// A file of many minimal tensors sharing one data buffer (about 30 file
// bytes each) must be refused before the parser's heap use, about 170 bytes
// per tensor, outgrows the file by more than the budget.
func TestManyTinyTensorsBounded(t *testing.T) {
	const n = 20000
	b := flatbuffers.NewBuilder(0)
	data := b.CreateByteVector(f32Bytes(1))
	tflite.BufferStart(b)
	empty := tflite.BufferEnd(b)
	tflite.BufferStart(b)
	tflite.BufferAddData(b, data)
	shared := tflite.BufferEnd(b)
	tens := make([]flatbuffers.UOffsetT, n)
	for i := range tens {
		name := b.CreateString(fmt.Sprintf("%x", i))
		tflite.TensorStart(b)
		tflite.TensorAddBuffer(b, 1)
		tflite.TensorAddName(b, name)
		tens[i] = tflite.TensorEnd(b)
	}
	tv := offsetVector(b, tflite.SubGraphStartTensorsVector, tens)
	tflite.SubGraphStart(b)
	tflite.SubGraphAddTensors(b, tv)
	sgs := offsetVector(b, tflite.ModelStartSubgraphsVector, []flatbuffers.UOffsetT{tflite.SubGraphEnd(b)})
	bv := offsetVector(b, tflite.ModelStartBuffersVector, []flatbuffers.UOffsetT{empty, shared})
	tflite.ModelStart(b)
	tflite.ModelAddSubgraphs(b, sgs)
	tflite.ModelAddBuffers(b, bv)
	b.FinishWithFileIdentifier(tflite.ModelEnd(b), []byte(fileIdentifier))
	file := b.FinishedBytes()

	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	f, err := parse(file)
	runtime.ReadMemStats(&ms)
	if got, limit := ms.TotalAlloc-before, uint64(6*len(file)+128<<10); got > limit {
		t.Fatalf("parse allocated %d bytes for a %d byte file (limit %d)", got, len(file), limit)
	}
	if err != nil && !errors.Is(err, ErrFormat) {
		t.Fatalf("error %v, want ErrFormat", err)
	}
	if err == nil && len(f.Tensors()) != n {
		t.Fatalf("%d tensors", len(f.Tensors()))
	}
	t.Logf("%d byte file: err=%v", len(file), err)
}
