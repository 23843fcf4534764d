package bpe

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/tokref"
	"github.com/gpurun/gpurun/tensors/model"
	"golang.org/x/text/unicode/norm"
)

// ggufVocab turns a reference tokenizer.json into the vocabulary a GGUF
// converter would write: tokens by id, merges as "a b", added special
// tokens as control tokens, other added tokens as user-defined.
func ggufVocab(t *testing.T, path, pre string) *model.Vocab {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f fileJSON
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, id := range f.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range f.AddedTokens {
		n = max(n, a.ID+1)
	}
	v := &model.Vocab{Model: "gpt2", Pieces: make([]string, n), Types: make([]int32, n), Pre: pre, BOS: -1, EOS: -1, UNK: -1, PAD: -1}
	for id := range v.Pieces {
		// Ids no token has (GPT-4o's file skips some) get placeholders, as
		// llama.cpp's converter writes them.
		v.Pieces[id], v.Types[id] = fmt.Sprintf("[PAD%d]", id), model.PieceUnused
	}
	for tok, id := range f.Model.Vocab {
		v.Pieces[id], v.Types[id] = tok, model.PieceNormal
	}
	for _, a := range f.AddedTokens {
		v.Pieces[a.ID], v.Types[a.ID] = a.Content, model.PieceUserDefined
		if a.Special {
			v.Types[a.ID] = model.PieceControl
		}
	}
	for _, raw := range f.Model.Merges {
		a, b, err := parseMerge(raw)
		if err != nil {
			t.Fatal(err)
		}
		v.Merges = append(v.Merges, a+" "+b)
	}
	return v
}

// TestGGUFParity: a GGUF gpt2 vocabulary, split with the regexes llama.cpp
// uses for its tokenizer.ggml.pre, tokenizes like the tokenizer.json it came
// from (as @lenml/tokenizers does).
func TestGGUFParity(t *testing.T) {
	for _, c := range []struct{ name, pre string }{{"llama3", "llama3"}, {"qwen3", "qwen2"}, {"gpt2", "gpt-2"}, {"phi2", "phi-2"},
		{"gpt4o", "gpt-4o"}, {"gptoss", "gpt-4o"}, {"qwen35-pre", "qwen35"}} {
		t.Run(c.name, func(t *testing.T) {
			js, err := FromVocab(ggufVocab(t, tokref.TokenizerJSON(t, c.name), c.pre), false)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := Load(js)
			if err != nil {
				t.Fatal(err)
			}
			for _, input := range tokref.Inputs {
				lines := readLines(t, tokref.Input(t, input))
				want := readLines(t, tokref.Expected(t, c.name+"."+input+".ids"))
				m := mismatches{t: t, what: input + " encode"}
				for i, line := range lines {
					if strings.HasPrefix(c.name, "qwen3") && norm.NFC.String(line) != line {
						continue // Qwen's tokenizer.json normalizes to NFC; llama.cpp does not
					}
					m.check(i, line, formatIDs(tok.Encode(line)), want[i])
				}
				m.done()
			}
		})
	}
}

func TestFromVocabErrors(t *testing.T) {
	v := &model.Vocab{Model: "gpt2", Pieces: []string{"a"}, Types: []int32{1}, Pre: "no-such-pre"}
	if _, err := FromVocab(v, false); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "no-such-pre") {
		t.Errorf("unknown pre: %v", err)
	}
	v = &model.Vocab{Model: "gpt2", Pieces: []string{"a"}, Types: []int32{1}, Merges: []string{"a a"}}
	if _, err := FromVocab(v, false); !errors.Is(err, ErrInvalid) {
		t.Errorf("merge to a missing token: %v", err)
	}
}
