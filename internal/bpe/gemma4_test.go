package bpe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/testmodels"
	"github.com/gpurun/gpurun/internal/tokref"
	"github.com/gpurun/gpurun/tensors/model"
)

// gemma4Golden is one line of testdata/tokenizers/gemma4-llamacpp: a text,
// llama.cpp's ids for it (BOS added, special tokens parsed) and its
// token_to_piece strings joined.
type gemma4Golden struct {
	Text   string `json:"text"`
	IDs    []int  `json:"ids"`
	Pieces string `json:"pieces"`
}

// gemma4Dir is testdata/tokenizers/gemma4-llamacpp.
func gemma4Dir(t *testing.T) string {
	return filepath.Join(testmodels.Root(t), "testdata", "tokenizers", "gemma4-llamacpp")
}

func readGemma4Golden(t *testing.T, name string, atLeast int) []gemma4Golden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(gemma4Dir(t), name+".golden.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []gemma4Golden
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var g gemma4Golden
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	if len(out) < atLeast {
		t.Fatalf("%s: %d golden lines", name, len(out))
	}
	return out
}

// smallGemma4 is the hand-made gemma4 vocabulary small.gguf, read as
// gpurun reads a GGUF vocabulary.
func smallGemma4(t *testing.T) *model.Vocab {
	t.Helper()
	f, err := gguf.Open(filepath.Join(gemma4Dir(t), "small.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := f.Vocab()
	if err != nil {
		t.Fatal(err)
	}
	if v.Model != "gemma4" || v.Pre != "gemma4" || v.BOS != 2 {
		t.Fatalf("small.gguf: model %q, pre %q, BOS %d", v.Model, v.Pre, v.BOS)
	}
	return v
}

// gemma4Vocab is the vocabulary the golden's GGUF carries (see the README
// there): Gemma 3's published tokenizer.json written as llama.cpp's
// Gemma4Model.set_vocab writes a vocabulary, with tokenizer.ggml.model =
// "gemma4" and Gemma 4's named tokens put in unused slots.
func gemma4Vocab(t *testing.T) *model.Vocab {
	t.Helper()
	path := tokref.Vendor(t, "gemma3")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f fileJSON
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	cb, err := os.ReadFile(filepath.Join(filepath.Dir(path), "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		BOS string `json:"bos_token"`
		EOS string `json:"eos_token"`
		UNK string `json:"unk_token"`
		PAD string `json:"pad_token"`
	}
	if err := json.Unmarshal(cb, &cfg); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, id := range f.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range f.AddedTokens {
		n = max(n, a.ID+1)
	}
	v := &model.Vocab{Model: "gemma4", Pre: "gemma4", Pieces: make([]string, n), Types: make([]int32, n), Scores: make([]float32, n)}
	special := map[int]bool{}
	for tok, id := range f.Model.Vocab {
		v.Pieces[id] = tok
	}
	for _, a := range f.AddedTokens {
		special[a.ID] = a.Special
		if a.ID >= len(f.Model.Vocab) {
			v.Pieces[a.ID] = a.Content
		}
	}
	renamed := map[string]string{"<unused0>": "<|turn>", "<unused1>": "<turn|>", "<unused2>": "<|think|>", "<unused3>": "<|channel>",
		"<unused4>": "<channel|>", "<unused5>": "<|tool_call>", "<unused6>": "<tool_call|>",
		"<unused7>": "<|tool_response>", "<unused8>": "<tool_response|>", "<unused9>": `<|"|>`}
	control := map[string]bool{"<|turn>": true, "<turn|>": true, "<|think|>": true}
	byteTok := regexp.MustCompile(`^<0x[0-9A-Fa-f]{2}>$`)
	for id, p := range v.Pieces {
		if r, ok := renamed[p]; ok {
			p, v.Pieces[id] = r, r
		}
		switch {
		case control[p] || special[id] && renamed[p] == "" && !isVisible(p):
			v.Types[id] = model.PieceControl
		case isVisible(p) || id >= len(f.Model.Vocab):
			v.Types[id] = model.PieceUserDefined
		case byteTok.MatchString(p):
			v.Types[id] = model.PieceByte
		default:
			v.Types[id] = model.PieceNormal
		}
	}
	for _, raw := range f.Model.Merges {
		a, b, err := parseMerge(raw)
		if err != nil {
			t.Fatal(err)
		}
		v.Merges = append(v.Merges, a+" "+b)
	}
	v.BOS, v.EOS, v.UNK, v.PAD = f.Model.Vocab[cfg.BOS], f.Model.Vocab[cfg.EOS], f.Model.Vocab[cfg.UNK], f.Model.Vocab[cfg.PAD]
	return v
}

// isVisible: the tokens llama.cpp's Gemma 4 converter marks user-defined
// so that they are always rendered.
func isVisible(p string) bool {
	switch p {
	case "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|tool_response>", "<tool_response|>", `<|"|>`:
		return true
	}
	return false
}

// gemma4Tokenizer builds the tokenizer FromVocab makes for v, with BOS.
func gemma4Tokenizer(t *testing.T, v *model.Vocab) *Tokenizer {
	t.Helper()
	js, err := FromVocab(v, true)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Load(js)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// checkGemma4 compares encode, decode and streamed decode with llama.cpp's.
func checkGemma4(t *testing.T, tok *Tokenizer, name string, golden []gemma4Golden) {
	t.Helper()
	enc := mismatches{t: t, what: name + " encode"}
	dec := mismatches{t: t, what: name + " decode"}
	stream := mismatches{t: t, what: name + " streamed decode"}
	for i, g := range golden {
		enc.check(i, g.Text, formatIDs(tok.EncodeSpecial(g.Text, true)), formatIDs(g.IDs))
		dec.check(i, g.Text, strconv.Quote(tok.Decode(g.IDs)), strconv.Quote(g.Pieces))
		stream.check(i, g.Text, strconv.Quote(streamDecode(tok, g.IDs)), strconv.Quote(g.Pieces))
	}
	enc.done()
	dec.done()
	stream.done()
}

// TestGemma4LlamaCpp: a tokenizer.ggml.model = "gemma4" vocabulary
// tokenizes every golden text to llama.cpp 81ff7abe5's ids (BOS first,
// control and user-defined tokens split out, spaces as U+2581, newline runs
// apart and whole when they are a token, <0xNN> byte fallback), and the ids
// decode to llama.cpp's pieces, one at a time too: the 262K Gemma
// vocabulary over a varied text set, and the hand-made small.gguf whose
// merges make each convention visible.
func TestGemma4LlamaCpp(t *testing.T) {
	t.Run("small", func(t *testing.T) {
		checkGemma4(t, gemma4Tokenizer(t, smallGemma4(t)), "small", readGemma4Golden(t, "small", 20))
	})
	t.Run("gemma", func(t *testing.T) {
		checkGemma4(t, gemma4Tokenizer(t, gemma4Vocab(t)), "gemma", readGemma4Golden(t, "gemma4", 300))
	})
}

// TestGemma4Conventions: getting any one of the conventions
// TestGemma4LlamaCpp holds the tokenizer to wrong changes llama.cpp's ids
// on some lines of small.gguf's golden, so that test would fail.
func TestGemma4Conventions(t *testing.T) {
	golden := readGemma4Golden(t, "small", 20)
	base := gemma4Tokenizer(t, smallGemma4(t))
	for _, c := range []struct {
		name string
		edit func(*Tokenizer)
	}{
		{"newline runs merged like other text", func(t *Tokenizer) { t.wholeNewlineRuns = false }},
		{"no split at newlines", func(t *Tokenizer) { t.pre = nil }},
		{"spaces kept as spaces", func(t *Tokenizer) { t.normalize = nil }},
		{"no byte fallback", func(t *Tokenizer) { t.byteFallback = false }},
		{"whole words kept (ignore_merges)", func(t *Tokenizer) { t.ignoreMerges = true }},
		{"no BOS", func(t *Tokenizer) { t.prefix = nil }},
		{"special tokens not split out", func(t *Tokenizer) { t.addedTrie = nil }},
		{"spaces decoded as U+2581", func(t *Tokenizer) { t.decode = nil }},
	} {
		tok := *base
		c.edit(&tok)
		differ := 0
		for _, g := range golden {
			if formatIDs(tok.EncodeSpecial(g.Text, true)) != formatIDs(g.IDs) || tok.Decode(g.IDs) != g.Pieces {
				differ++
			}
		}
		if differ == 0 {
			t.Errorf("%s: every line still gives llama.cpp's ids and pieces", c.name)
		}
	}
}
