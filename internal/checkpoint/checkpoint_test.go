package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

func TestDetect(t *testing.T) {
	models := testmodels.Dir(t)
	tmp := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hfDir := filepath.Join(tmp, "hf")
	os.Mkdir(hfDir, 0o755)
	os.WriteFile(filepath.Join(hfDir, "config.json"), []byte(`{}`), 0o644)
	emptyDir := filepath.Join(tmp, "empty")
	os.Mkdir(emptyDir, 0o755)
	st := binary.LittleEndian.AppendUint64(nil, 2)
	st = append(st, "{}"...)
	for _, tc := range []struct {
		name, path, want string
	}{
		{"gguf", filepath.Join(models, "arch", "falcon.gguf"), FormatGGUF},
		{"llama2c", filepath.Join(models, "stories260K.bin"), FormatLlama2c},
		{"hf dir", hfDir, FormatHF},
		{"safetensors file", write("m.safetensors", st), FormatHF},
		{"sentencepiece model", filepath.Join(models, "tok512.model"), ""},
		{"llama2c tokenizer", filepath.Join(models, "tok512.bin"), ""},
		{"tiny file", write("tiny", []byte("GG")), ""},
		{"zero header", write("zeros", make([]byte, 64)), ""},
		{"dir without config", emptyDir, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Detect(tc.path)
			if tc.want == "" {
				if !errors.Is(err, ErrUnknownFormat) {
					t.Fatalf("Detect = %q, %v; want ErrUnknownFormat", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Detect = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := Detect(filepath.Join(tmp, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}
}

func TestLoadWithTokenizer(t *testing.T) {
	models := testmodels.Dir(t)
	proto, err := os.ReadFile(filepath.Join(models, "tok512.model"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, model, tokenizer string
		wantVocab, wantProto   bool
	}{
		{"llama2c + tokenizer.bin", "stories260K.bin", "tok512.bin", true, false},
		{"llama2c + sentencepiece", "stories260K.bin", "tok512.model", false, true},
		{"gguf + sentencepiece", "arch/llama.gguf", "tok512.model", true, true}, // GGUF brings its own vocab
		{"llama2c alone", "stories260K.bin", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := Options{}
			if tc.tokenizer != "" {
				opts.Tokenizer = filepath.Join(models, tc.tokenizer)
			}
			ck, err := Load(filepath.Join(models, tc.model), opts)
			if err != nil {
				t.Fatal(err)
			}
			if (ck.Vocab != nil) != tc.wantVocab {
				t.Errorf("vocab present = %v, want %v", ck.Vocab != nil, tc.wantVocab)
			}
			if ck.Vocab != nil && len(ck.Vocab.Pieces) != ck.Config.VocabSize {
				t.Errorf("%d pieces for vocab size %d", len(ck.Vocab.Pieces), ck.Config.VocabSize)
			}
			if tc.wantProto != bytes.Equal(ck.Tokenizer, proto) {
				t.Errorf("tokenizer proto attached = %v, want %v", ck.Tokenizer != nil, tc.wantProto)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	models := testmodels.Dir(t)
	for _, tc := range []struct {
		name, path string
		opts       Options
		want       error
	}{
		{"unknown format name", filepath.Join(models, "stories260K.bin"), Options{Format: "onnx"}, ErrUnknownFormat},
		{"undetectable", filepath.Join(models, "tok512.model"), Options{}, ErrUnknownFormat},
		{"missing", filepath.Join(models, "nope.gguf"), Options{}, os.ErrNotExist},
		{"tokenizer of the wrong size", filepath.Join(models, "arch", "gemma2.gguf"), Options{Tokenizer: filepath.Join(models, "stories260K.bin")}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.path, tc.opts)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	// Forcing the wrong format fails in that format's parser.
	if _, err := Load(filepath.Join(models, "stories260K.bin"), Options{Format: FormatGGUF}); err == nil {
		t.Error("llama2.c file loaded as GGUF")
	}
}
