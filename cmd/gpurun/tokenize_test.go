package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// TestTokenizeMatchesSentencePiece runs `gpurun tokenize` over the
// tokenizer conformance inputs and compares every line with what
// spm_encode --output_format=id and spm_decode --input_format=id printed
// (recorded by testdata/sentencepiece/gen.sh).
func TestTokenizeMatchesSentencePiece(t *testing.T) {
	data := filepath.Join("..", "..", "testdata", "sentencepiece")
	models, err := filepath.Glob(filepath.Join(data, "*.model"))
	if err != nil || len(models) < 3 {
		t.Fatalf("conformance models: %v %v", models, err)
	}
	models = append(models, filepath.Join(testmodels.Dir(t), "tok512.model"))
	for _, m := range models {
		name := strings.TrimSuffix(filepath.Base(m), ".model")
		t.Run(name, func(t *testing.T) {
			for _, input := range []string{"corpus", "edge", "random"} {
				in := readFile(t, filepath.Join(data, input+".txt"))
				want := readFile(t, filepath.Join(data, name+"."+input+".ids"))
				compareLines(t, name+" encode "+input, mustRun(t, in, "tokenize", "-t", m), want)
				decoded := readFile(t, filepath.Join(data, name+"."+input+".decoded"))
				compareLines(t, name+" decode "+input, mustRun(t, want, "tokenize", "--decode", "-t", m), decoded)
			}
		})
	}
}

// TestTokenizeFromModelFiles: a .task bundle and llama2.c's tokenizer.bin
// tokenize like tok512.model (on text without whitespace runs, where the
// tokenizer.bin vocabulary's whitespace handling agrees).
func TestTokenizeFromModelFiles(t *testing.T) {
	dir := testmodels.Dir(t)
	text := "Once upon a time, there was a little girl.\nShe loved 3 red balls!\n\nÜber naïve café\n"
	want := mustRun(t, text, "tokenize", "-t", filepath.Join(dir, "tok512.model"))
	if strings.Count(want, "\n") != 4 {
		t.Fatalf("want 4 output lines, got %q", want)
	}
	task := convertStories(t, "int8")
	for _, tok := range []string{task, filepath.Join(dir, "tok512.bin")} {
		if got := mustRun(t, text, "tokenize", "-t", tok); got != want {
			t.Errorf("%s:\n%s\nwant\n%s", tok, got, want)
		}
	}
}

func TestTokenizeBadInput(t *testing.T) {
	dir := testmodels.Dir(t)
	for _, tc := range []struct{ tok, stdin string }{
		{filepath.Join(dir, "stories260K.bin"), "hi\n"},
		{filepath.Join(dir, "tok512.model"), "1 2 x\n"},
		{filepath.Join(dir, "tok512.model"), "1 99999\n"},
	} {
		if _, _, err := runCLI(t, tc.stdin, "tokenize", "--decode", "-t", tc.tok); err == nil {
			t.Errorf("tokenize -t %s with %q: want an error", tc.tok, tc.stdin)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func compareLines(t *testing.T, what, got, want string) {
	t.Helper()
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	if len(g) != len(w) {
		t.Errorf("%s: %d lines, want %d", what, len(g), len(w))
	}
	bad := 0
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			if bad < 3 {
				t.Errorf("%s line %d:\n got %q\nwant %q", what, i+1, g[i], w[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d lines differ", what, bad, len(w))
	}
}
