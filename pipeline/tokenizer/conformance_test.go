package tokenizer

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/testmodels"
)

// sharedModel returns the path of a file in ../shared/models; a missing file
// fails the test (CI has the shared data too).
func sharedModel(t testing.TB, name string) string {
	t.Helper()
	p := testmodels.Path(t, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("shared model data not available: %v", err)
	}
	return p
}

// spmData holds the SentencePiece conformance data (testdata/sentencepiece
// at the top of the repository, shared with cmd/gpurun's tests).
var spmData = filepath.Join("..", "..", "testdata", "sentencepiece")

// modelPath resolves a conformance model name to its file.
func modelPath(t testing.TB, name string) string {
	if name == "tok512" {
		return sharedModel(t, "tok512.model")
	}
	return filepath.Join(spmData, name+".model")
}

// readLines reads a file written line by line; the final newline ends the
// last line rather than starting an empty one.
func readLines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSuffix(string(b), "\n")
	return strings.Split(s, "\n")
}

func parseIDs(t testing.TB, line string) []int {
	t.Helper()
	var ids []int
	for _, f := range strings.Fields(line) {
		id, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("bad id %q in expectations", f)
		}
		ids = append(ids, id)
	}
	return ids
}

func formatIDs(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	return strings.Join(s, " ")
}

var conformanceModels = []string{"unigram", "bpe_nfkc", "bpe_raw", "unigram_bytes", "char_suffix", "tok512", "tok512_fromvocab"}

// TestConformance compares Encode and Decode line by line with the outputs
// of spm_encode --output_format=id and spm_decode --input_format=id that
// testdata/sentencepiece/gen.sh recorded.
func TestConformance(t *testing.T) {
	for _, model := range conformanceModels {
		for _, input := range []string{"corpus", "edge", "random"} {
			t.Run(model+"/"+input, func(t *testing.T) {
				checkConformance(t, modelPath(t, model), filepath.Join(spmData, input+".txt"),
					filepath.Join(spmData, model+"."+input))
			})
		}
	}
	// Hand-written models for cases spm_train does not produce.
	for _, model := range []string{"bpe_quirks", "unigram_quirks"} {
		t.Run(model, func(t *testing.T) {
			dir := filepath.Join(spmData, "crafted")
			checkConformance(t, filepath.Join(dir, model+".model"), filepath.Join(dir, "input.txt"), filepath.Join(dir, model))
		})
	}
}

// checkConformance encodes every line of input with the model and decodes
// the expected ids, comparing with expected+".ids" and expected+".decoded".
func checkConformance(t *testing.T, modelFile, input, expected string) {
	tok, err := LoadFile(modelFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, input)
	wantIDs := readLines(t, expected+".ids")
	wantText := readLines(t, expected+".decoded")
	if len(wantIDs) != len(lines) || len(wantText) != len(lines) {
		t.Fatalf("%d input lines, %d id lines, %d decoded lines", len(lines), len(wantIDs), len(wantText))
	}
	failures := 0
	for i, line := range lines {
		if got := formatIDs(tok.Encode(line)); got != wantIDs[i] {
			t.Errorf("line %d %q:\nencode got  %s\nspm_encode  %s", i+1, line, got, wantIDs[i])
			failures++
		}
		if got := tok.Decode(parseIDs(t, wantIDs[i])); got != wantText[i] {
			t.Errorf("line %d: decode got %q, spm_decode %q", i+1, got, wantText[i])
			failures++
		}
		if failures > 10 {
			t.Fatal("too many mismatches")
		}
	}
}

// TestControlPieceNotFromText covers the one case where spm_encode fails
// (a one-character control piece in a BPE model): the character encodes
// as unknown instead.
func TestControlPieceNotFromText(t *testing.T) {
	tok, err := LoadFile(filepath.Join(spmData, "crafted", "bpe_quirks.model"))
	if err != nil {
		t.Fatal(err)
	}
	bar, ok := tok.ID("|")
	if !ok || !tok.IsControl(bar) {
		t.Fatalf("crafted model lacks the control piece |")
	}
	spaceA, _ := tok.ID(spaceSymbol + "a")
	b, _ := tok.ID("b")
	want := formatIDs([]int{spaceA, tok.UNK(), b})
	if got := formatIDs(tok.Encode("a|b")); got != want {
		t.Fatalf("Encode(a|b) = %s, want %s", got, want)
	}
}
