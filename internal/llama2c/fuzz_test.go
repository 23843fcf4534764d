package llama2c

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestTruncationsAndFlips: every truncation of a small checkpoint fails with
// ErrFormat, and flipping any header bit never panics.
func TestTruncationsAndFlips(t *testing.T) {
	good := tinyCheckpoint(8, 12, 2, 2, 1, -10, 4)
	for n := range len(good) {
		if _, err := Parse(good[:n]); !errors.Is(err, ErrFormat) {
			t.Fatalf("truncated to %d bytes: err = %v", n, err)
		}
	}
	for i := range HeaderSize {
		for bit := range 8 {
			b := append([]byte(nil), good...)
			b[i] ^= 1 << bit
			if _, err := Parse(b); err != nil && !errors.Is(err, ErrFormat) {
				t.Fatalf("flip %d.%d: unwrapped error %v", i, bit, err)
			}
		}
	}
	tok := tokenizerBin([]string{"<unk>", "\n<s>\n", "\n</s>\n", " a"})
	for n := range len(tok) {
		if _, err := ParseTokenizer(tok[:n], 4); !errors.Is(err, ErrFormat) {
			t.Fatalf("tokenizer truncated to %d bytes: err = %v", n, err)
		}
	}
}

func FuzzLlama2c(f *testing.F) {
	good := tinyCheckpoint(8, 12, 2, 2, 1, -10, 4)
	f.Add(good, 4)
	f.Add(good[:HeaderSize], 4)
	f.Add(tokenizerBin([]string{"<unk>", "\n<s>\n", "\n</s>\n", " a"}), 4)
	f.Fuzz(func(t *testing.T, data []byte, vocab int) {
		if ck, err := Parse(data); err == nil {
			for _, tt := range ck.Tensors {
				if err := tt.Check(); err != nil {
					t.Fatalf("parsed tensor does not check: %v", err)
				}
			}
		} else if !errors.Is(err, ErrFormat) {
			t.Fatalf("unwrapped error %v", err)
		}
		if _, err := ParseTokenizer(data, vocab); err != nil && !errors.Is(err, ErrFormat) {
			t.Fatalf("tokenizer: unwrapped error %v", err)
		}
	})
}

// TestWriteSeedCorpus regenerates testdata/fuzz/FuzzLlama2c when
// GPURUN_WRITE_CORPUS=1; the committed files are its output.
func TestWriteSeedCorpus(t *testing.T) {
	if os.Getenv("GPURUN_WRITE_CORPUS") != "1" {
		t.Skip("set GPURUN_WRITE_CORPUS=1 to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzLlama2c")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	good := tinyCheckpoint(8, 12, 2, 2, 1, -10, 4)
	for name, b := range map[string][]byte{
		"tiny_unshared":  good,
		"tiny_truncated": good[:len(good)/2],
		"tokenizer":      tokenizerBin([]string{"<unk>", "\n<s>\n", "\n</s>\n", " a"}),
	} {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nint(4)\n", b)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
