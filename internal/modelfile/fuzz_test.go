package modelfile

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/tensors"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the committed fuzz seed corpora under testdata/fuzz")

// fuzzCheck parses data without the recover safety net, so a panic fails the
// fuzzer, and checks what a successful parse promises.
func fuzzCheck(t *testing.T, data []byte) {
	f, err := parse(data)
	if err != nil {
		return
	}
	for _, x := range f.Tensors() {
		if err := x.Check(); err != nil {
			t.Fatalf("parsed an inconsistent tensor: %v", err)
		}
		if x.NumElements() > 0 {
			row := make([]float32, x.Cols())
			if err := x.RowFloat32(0, row); err != nil {
				t.Fatalf("%s: %v", x.Name, err)
			}
		}
	}
	f.Summary()
}

func FuzzParse(f *testing.F) {
	files := corpusFiles(f)
	f.Add(files["model"])
	f.Add(buildRaw(f, rawModel{tensors: []rawTensor{{name: "w", typ: 1, shape: []int32{2}, data: make([]byte, 4)}}}))
	f.Fuzz(fuzzCheck)
}

func FuzzTask(f *testing.F) {
	files := corpusFiles(f)
	f.Add(files["task"])
	f.Add(writeTask(f, buildRaw(f, rawModel{}), nil, nil))
	f.Fuzz(fuzzCheck)
}

// TestWriteSeeds regenerates testdata/fuzz/Fuzz*/ from the writers when run
// with -update-seeds; otherwise it checks the committed seeds still parse, so
// a format change that strands them is noticed.
func TestWriteSeeds(t *testing.T) {
	files := corpusFiles(t)
	seeds := map[string]map[string][]byte{
		"FuzzParse": {
			"model":       files["model"],
			"inline_f16":  buildRaw(t, rawModel{tensors: []rawTensor{{name: "w", typ: 1, shape: []int32{2, 2}, data: make([]byte, 8)}}}),
			"scales_int4": writeModel(t, testTensors(t, 1, 32)[6:7], WriteOptions{}),
			"blocks_q4_k": writeBlocks(t, blockTensors()[3:4]),
			"activations": buildRaw(t, rawModel{tensors: []rawTensor{{name: "a", typ: 4, shape: []int32{1}, noData: true}}, meta: map[string][]byte{"backend": []byte("gpu")}}),
		},
		"FuzzTask": {
			"task":       files["task"],
			"model_only": writeTask(t, buildRaw(t, rawModel{}), nil, nil),
		},
	}
	for target, set := range seeds {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, data := range set {
			path := filepath.Join(dir, name)
			if *updateSeeds {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
				if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			content, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("missing seed (run go test -run TestWriteSeeds -update-seeds): %v", err)
			}
			if !bytes.HasPrefix(content, []byte("go test fuzz v1\n")) {
				t.Fatalf("%s: not a fuzz corpus file", path)
			}
		}
	}
}

// writeBlocks writes a model file of block-type tensors.
func writeBlocks(t testing.TB, ts []*tensors.Tensor) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, testConfig(), ts, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
