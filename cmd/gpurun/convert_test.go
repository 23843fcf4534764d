package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/modelfile"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// llama2cOffsets lays out a llama2.c checkpoint from its header alone, as
// llama2.c's run.c memory-maps it, so the test does not trust the importer.
func llama2cOffsets(t *testing.T, data []byte) map[string][2]int {
	t.Helper()
	h := make([]int, 7)
	for i := range h {
		h[i] = int(int32(binary.LittleEndian.Uint32(data[4*i:])))
	}
	dim, hidden, layers, heads, kvHeads, vocab := h[0], h[1], h[2], h[3], h[4], h[5]
	if vocab < 0 {
		vocab = -vocab
	}
	kvDim := dim / heads * kvHeads
	off := 28
	spans := map[string][2]int{}
	take := func(name string, n int) {
		spans[name] = [2]int{off, off + 4*n}
		off += 4 * n
	}
	perLayer := func(suffix string, n int) {
		for l := 0; l < layers; l++ {
			take(model.Layer(l, suffix), n)
		}
	}
	take(model.TokenEmbedding, vocab*dim)
	perLayer(model.AttnNorm, dim)
	perLayer(model.WQ, dim*dim)
	perLayer(model.WK, kvDim*dim)
	perLayer(model.WV, kvDim*dim)
	perLayer(model.WO, dim*dim)
	perLayer(model.FFNNorm, dim)
	perLayer(model.WGate, hidden*dim)
	perLayer(model.WDown, dim*hidden)
	perLayer(model.WUp, hidden*dim)
	take(model.FinalNorm, dim)
	return spans
}

// TestConvertStories260K converts the llama2.c model to .task bundles under
// each recipe, inspects them, and checks f32 weights bit for bit against the
// llama2.c file.
func TestConvertStories260K(t *testing.T) {
	dir := testmodels.Dir(t)
	src := filepath.Join(dir, "stories260K.bin")
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	spans := llama2cOffsets(t, raw)
	for _, tc := range []struct {
		quant  string
		matrix tensors.DType // storage of the attention / FFN matrices
		embed  tensors.DType
	}{
		{"f32", tensors.F32, tensors.F32},
		{"f16", tensors.F16, tensors.F16},
		{"int8", tensors.I8, tensors.I8},
		{"int4", tensors.I4, tensors.I8},
	} {
		t.Run(tc.quant, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "stories260K-"+tc.quant+".task")
			mustRun(t, "", "convert", src, "--tokenizer", filepath.Join(dir, "tok512.model"), "--quant", tc.quant, "-o", out, "-q")

			var sum modelfile.Summary
			if err := json.Unmarshal([]byte(mustRun(t, "", "inspect", "--json", out)), &sum); err != nil {
				t.Fatal(err)
			}
			if sum.Format != modelfile.FormatTask || sum.Config == nil || sum.Config.Dim != 64 || sum.TokenizerBytes == 0 {
				t.Fatalf("inspect: format %s config %+v tokenizer %d bytes", sum.Format, sum.Config, sum.TokenizerBytes)
			}
			if len(sum.Tensors) != len(spans) {
				t.Errorf("inspect lists %d tensors, the llama2.c file has %d", len(sum.Tensors), len(spans))
			}
			text := mustRun(t, "", "inspect", out)
			if !bytes.Contains([]byte(text), []byte(model.TokenEmbedding)) {
				t.Errorf("inspect text lacks the embedding:\n%s", text)
			}

			f, err := modelfile.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for name, span := range spans {
				w := f.Tensor(name)
				if w == nil {
					t.Fatalf("%s missing", name)
				}
				want := tensors.F32
				switch {
				case len(w.Shape) == 1:
				case name == model.TokenEmbedding:
					want = tc.embed
				default:
					want = tc.matrix
				}
				if w.DType != want {
					t.Errorf("%s stored as %s, want %s", name, w.DType, want)
				}
				if w.DType == tensors.F32 && !bytes.Equal(w.Data, raw[span[0]:span[1]]) {
					t.Errorf("%s: f32 bytes differ from the llama2.c file", name)
				}
			}
		})
	}
}

// TestConvertGGUF converts every architecture GGUF with the keep recipe and
// checks the model file's tensors equal the importer's bit for bit, so F32
// weights and Q8_0 / Q4_0 blocks survive conversion exactly. (The importer's
// own tests check it against the raw GGUF blocks.)
func TestConvertGGUF(t *testing.T) {
	matches, err := filepath.Glob(filepath.Join(testmodels.Dir(t), "arch", "*.gguf"))
	if err != nil || len(matches) < 9 {
		t.Fatalf("want the 9 architecture GGUFs, found %d (%v)", len(matches), err)
	}
	// Today's architectures: their config carries the new fields (rope
	// factors, q/k norms, sliding layers, NoPE, experts).
	for _, name := range []string{"llama3", "qwen2", "qwen3", "gemma3", "phi3", "smollm3", "qwen3moe"} {
		matches = append(matches, filepath.Join(testmodels.Dir(t), "arch2", name+".gguf"))
	}
	for _, src := range matches {
		name := filepath.Base(src)
		t.Run(name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), name+".tflite")
			mustRun(t, "", "convert", src, "-o", out, "-q")
			ck, err := gguf.Load(src)
			if err != nil {
				t.Fatal(err)
			}
			f, err := modelfile.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Tokenizer() == nil {
				t.Error("the GGUF's vocabulary did not become an embedded tokenizer")
			}
			if got, want := f.Config(), ck.Config; !reflect.DeepEqual(got, want) {
				t.Errorf("config\n got %+v\nwant %+v", got, want)
			}
			if got, want := len(f.Tensors()), len(ck.Tensors); got != want {
				t.Errorf("%d tensors, importer gave %d", got, want)
			}
			quantized := 0
			for _, want := range ck.Tensors {
				got := f.Tensor(want.Name)
				if got == nil {
					t.Errorf("%s missing", want.Name)
					continue
				}
				sameTensor(t, got, want)
				if want.Scales != nil {
					quantized++
					sameTensor(t, got.Scales, want.Scales)
				}
			}
			if (name == "llama-q8_0.gguf" || name == "llama-q4_0.gguf") && quantized == 0 {
				t.Error("no quantized tensors in a quantized GGUF")
			}
		})
	}
}

func sameTensor(t *testing.T, got, want *tensors.Tensor) {
	t.Helper()
	if got.DType != want.DType || !slices.Equal(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
		t.Errorf("%s: got %s%v (%d bytes), want %s%v (%d bytes), equal bytes %v", want.Name,
			got.DType, got.Shape, len(got.Data), want.DType, want.Shape, len(want.Data), bytes.Equal(got.Data, want.Data))
	}
}

// TestBundle: a model file without a tokenizer plus llama2.c's tokenizer.bin
// bundle into a .task that generates the golden ids from text and tokenizes
// like tok512.model.
func TestBundle(t *testing.T) {
	dir := testmodels.Dir(t)
	tmp := t.TempDir()
	bare := filepath.Join(tmp, "stories.tflite")
	mustRun(t, "", "convert", filepath.Join(dir, "stories260K.bin"), "-o", bare, "-q")
	f, err := modelfile.Open(bare)
	if err != nil {
		t.Fatal(err)
	}
	if f.Tokenizer() != nil {
		t.Error("a conversion without --tokenizer embedded one")
	}
	f.Close()
	if _, _, err := runCLI(t, "", "convert", filepath.Join(dir, "stories260K.bin"), "-o", filepath.Join(tmp, "x.task"), "-q"); err == nil {
		t.Error("a .task without a tokenizer: want an error")
	}
	task := filepath.Join(tmp, "stories.task")
	mustRun(t, "", "bundle", bare, "-t", filepath.Join(dir, "tok512.bin"), "-o", task)
	c := testmodels.StoriesCases(t)[0]
	res := runJSON(t, "-m", task, "--backend", "cpu", "-p", c.Prompt, "--temperature", "0", "--max-tokens", "16")
	if !slices.Equal(res.PromptIDs, c.PromptIDs) || !slices.Equal(res.GeneratedIDs, c.GeneratedIDs[:16]) {
		t.Errorf("bundled model: prompt %v generated %v", res.PromptIDs, res.GeneratedIDs)
	}
	for _, args := range [][]string{
		{"bundle", bare, "-t", filepath.Join(dir, "tok512.bin"), "-o", filepath.Join(tmp, "x.tflite")},
		{"bundle", bare, "-o", filepath.Join(tmp, "y.task")},
		{"bundle", filepath.Join(dir, "tok512.model"), "-t", filepath.Join(dir, "tok512.bin"), "-o", filepath.Join(tmp, "z.task")},
	} {
		if _, _, err := runCLI(t, "", args...); err == nil {
			t.Errorf("gpurun %v: want an error", args)
		}
	}
}
