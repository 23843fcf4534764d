package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// inspectJSON runs `gpurun inspect --json args...` and decodes it.
func inspectJSON(t *testing.T, args ...string) checkpointSummary {
	t.Helper()
	out := mustRun(t, "", append([]string{"inspect", "--json"}, args...)...)
	var s checkpointSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("inspect --json %v: %v\n%s", args, err, out)
	}
	return s
}

// TestInspectGGUF: inspect shows a GGUF file's metadata and tensors as
// llama.cpp recorded them (the golden hparams and ggml shapes, in ggml's
// ne order as the file stores them, which the header says), and the
// configuration gpurun runs it with.
func TestInspectGGUF(t *testing.T) {
	for _, name := range []string{"llama", "phi2_fusedqkv", "gemma2", "falcon", "stablelm"} {
		t.Run(name, func(t *testing.T) {
			path := testmodels.Path(t, "arch", name+".gguf")
			g := testmodels.Arch(t, name)
			s := inspectJSON(t, path)
			if s.Format != "gguf" || s.Config == nil || s.Config.Arch != g.Hparams["general.architecture"] || s.ImportError != "" {
				t.Errorf("format %q config %+v import error %q", s.Format, s.Config, s.ImportError)
			}
			meta := map[string]string{}
			for _, kv := range s.GGUFMetadata {
				meta[kv.Key] = kv.Value
			}
			for k, v := range g.Hparams {
				got, ok := meta[k]
				switch v := v.(type) {
				case string:
					if strings.HasPrefix(v, "<array of ") {
						n := strings.Fields(v)[2]
						ok = ok && strings.HasPrefix(got, "["+n+"]")
					} else {
						ok = ok && got == fmt.Sprintf("%q", v)
					}
				case float64:
					var f float64
					_, err := fmt.Sscan(got, &f)
					ok = ok && err == nil && f == v
				}
				if !ok {
					t.Errorf("metadata %s = %q, llama.cpp %v", k, got, v)
				}
			}
			shapes := map[string][]int{}
			for _, ts := range s.Tensors {
				shapes[ts.Name] = ts.Shape
			}
			if len(shapes) != len(g.Tensors) {
				t.Errorf("%d tensors, llama.cpp %d", len(shapes), len(g.Tensors))
			}
			for n, dims := range g.Tensors {
				if !slices.Equal(shapes[n], dims) {
					t.Errorf("tensor %s shape %v, want llama.cpp's ggml ne order %v", n, shapes[n], dims)
				}
			}
			if s.ShapeOrder != ggufShapeOrder {
				t.Errorf("shape_order %q, want %q", s.ShapeOrder, ggufShapeOrder)
			}
			if len(g.Tensors) == 0 || len(g.Hparams) == 0 {
				t.Fatal("the golden file records no tensors or metadata")
			}
			text := mustRun(t, "", "inspect", path)
			for _, want := range []string{"format:", "general.architecture", "token_embd.weight", "arch:", "SHAPE (" + ggufShapeOrder + ")"} {
				if !strings.Contains(text, want) {
					t.Errorf("text output lacks %q:\n%s", want, text)
				}
			}
		})
	}
}

// TestInspectQuantizedGGUF: llama-quantize's Q4_0 tensors show as q4_0
// with their block size.
func TestInspectQuantizedGGUF(t *testing.T) {
	s := inspectJSON(t, testmodels.Path(t, "arch", "llama-q4_0.gguf"))
	n := 0
	for _, ts := range s.Tensors {
		if ts.DType == "q4_0" {
			n++
			if q := ts.Quantization; q == nil || !q.InBlock || q.Block != 32 {
				t.Errorf("%s: quantization %+v, want blocks of 32", ts.Name, q)
			}
		}
	}
	if n == 0 || s.Config == nil || s.BytesByDType["q4_0"] == 0 {
		t.Errorf("no q4_0 tensors, or no config: %+v", s.Summary)
	}
}

// TestInspectCheckpoints: inspect takes the other checkpoints run takes, a
// llama2.c .bin (its header as llama2.c wrote it; with --tokenizer its
// tokenizer) and a Hugging Face directory.
func TestInspectCheckpoints(t *testing.T) {
	dir := testmodels.Dir(t)
	h := testmodels.LoadStories(t).SourceModel.Header
	bin := filepath.Join(dir, "stories260K.bin")
	for _, tok := range []string{"", "tok512.model", "tok512.bin"} {
		args := []string{bin}
		if tok != "" {
			args = append(args, "--tokenizer", filepath.Join(dir, tok))
		}
		s := inspectJSON(t, args...)
		c := s.Config
		if s.Format != "llama2c" || c == nil || c.Dim != h.Dim || c.HiddenDim != h.HiddenDim || c.Layers != h.Layers || c.Heads != h.Heads ||
			c.KVHeads != h.KVHeads || c.VocabSize != h.VocabSize || c.MaxSeqLen != h.SeqLen || c.Tied != h.SharedClassifier {
			t.Errorf("%v: format %q config %+v, header %+v", args, s.Format, c, h)
		}
		if (s.TokenizerBytes > 0) != (tok != "") || len(s.Tensors) == 0 {
			t.Errorf("%v: tokenizer %d bytes, %d tensors", args, s.TokenizerBytes, len(s.Tensors))
		}
	}
	hf := llamaHF(t, "")
	s := inspectJSON(t, hf)
	if s.Format != "hf" || s.Config == nil || s.Config.Arch != "llama" || s.Config.Dim != 64 || s.TokenizerBytes == 0 || len(s.Tensors) == 0 {
		t.Errorf("HF directory: format %q config %+v tokenizer %d, %d tensors", s.Format, s.Config, s.TokenizerBytes, len(s.Tensors))
	}
	if text := mustRun(t, "", "inspect", hf); !strings.Contains(text, "format:  hf") && !strings.Contains(text, "hf") {
		t.Errorf("text:\n%s", text)
	}
}

// TestTokenizeCheckpoints: tokenize takes a GGUF file's vocabulary (tok512's
// pieces, as spm_encode tokenizes with the model built from them) and a
// Hugging Face directory's tokenizer; a llama2.c .bin, which carries none,
// is an error that says so.
func TestTokenizeCheckpoints(t *testing.T) {
	data := filepath.Join("..", "..", "testdata", "sentencepiece")
	for _, tc := range []struct{ path, golden string }{
		{testmodels.Path(t, "arch", "llama.gguf"), "tok512_fromvocab"},
		{llamaHF(t, ""), "tok512"},
	} {
		for _, input := range []string{"corpus", "edge", "random"} {
			in := readFile(t, filepath.Join(data, input+".txt"))
			want := readFile(t, filepath.Join(data, tc.golden+"."+input+".ids"))
			compareLines(t, tc.path+" encode "+input, mustRun(t, in, "tokenize", "-t", tc.path), want)
			decoded := readFile(t, filepath.Join(data, tc.golden+"."+input+".decoded"))
			compareLines(t, tc.path+" decode "+input, mustRun(t, want, "tokenize", "--decode", "-t", tc.path), decoded)
		}
	}
	args := []string{"tokenize", "-t", testmodels.Path(t, "stories260K.bin")}
	last := checkErrorLine(t, args, exe(t, "hi\n", args...))
	if !strings.Contains(last, "carries no tokenizer") {
		t.Errorf("llama2.c checkpoint: %q", last)
	}
}
