package bpe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/gpurun/gpurun/internal/tokref"
)

// readLines reads a file written line by line.
func readLines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSuffix(string(b), "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func parseIDLine(t testing.TB, s string) []int {
	t.Helper()
	var ids []int
	for _, f := range strings.Fields(s) {
		id, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("bad id %q", f)
		}
		ids = append(ids, id)
	}
	return ids
}

func formatIDs(ids []int) string {
	var b strings.Builder
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(id))
	}
	return b.String()
}

func unquote(t testing.TB, s string) string {
	t.Helper()
	var out string
	if err := json.Unmarshal([]byte(s), &out); err != nil {
		t.Fatalf("decoded line %q: %v", s, err)
	}
	return out
}

// mismatches collects differing lines and reports the first few.
type mismatches struct {
	t     testing.TB
	what  string
	n     int
	total int
}

func (m *mismatches) check(line int, input, got, want string) {
	m.total++
	if got == want {
		return
	}
	m.n++
	if m.n <= 5 {
		m.t.Errorf("%s line %d %q:\n got %s\nwant %s", m.what, line+1, input, got, want)
	}
}

func (m *mismatches) done() {
	if m.n > 0 {
		m.t.Errorf("%s: %d of %d lines differ", m.what, m.n, m.total)
	}
}

// TestParity: every line's ids and decode equal @lenml/tokenizers' (and,
// for GPT-2, GPT-4o and gpt-oss, tiktoken's, which gen.mjs checks), for
// the Llama 3, Qwen3, GPT-4o, gpt-oss and Gemma 3 tokenizer.json files as
// published and for GPT-2, Phi-2, Falcon and StableLM configurations
// assembled over GPT-2's vocabulary.
func TestParity(t *testing.T) {
	for _, name := range tokref.Names {
		t.Run(name, func(t *testing.T) {
			tok := loadParity(t, name)
			for _, input := range tokref.Inputs {
				checkLines(t, tok, name, input)
			}
			ids := readLines(t, tokref.Expected(t, name+".randids"))
			want := readLines(t, tokref.Expected(t, name+".randids.decoded"))
			rd := mismatches{t: t, what: "random ids decode"}
			for i := range ids {
				rd.check(i, ids[i], strconv.Quote(tok.Decode(parseIDLine(t, ids[i]))), strconv.Quote(unquote(t, want[i])))
			}
			rd.done()
		})
	}
}

// TestParityTiktoken: unicode.txt, whose lines the Rust regex engines split
// differently from JavaScript's (U+0085 and U+FEFF against \s, U+017F
// against (?i)s), encodes and decodes as tiktoken does (gpt2 and
// o200k_base).
func TestParityTiktoken(t *testing.T) {
	for _, name := range tokref.TiktokenNames {
		t.Run(name, func(t *testing.T) {
			checkLines(t, loadParity(t, name), name, "unicode")
		})
	}
}

// checkLines compares the encode, decode and streamed decode of every line
// of an input with the expectations gen.mjs wrote.
func checkLines(t *testing.T, tok *Tokenizer, name, input string) {
	t.Helper()
	lines := readLines(t, tokref.Input(t, input))
	wantIDs := readLines(t, tokref.Expected(t, name+"."+input+".ids"))
	wantText := readLines(t, tokref.Expected(t, name+"."+input+".decoded"))
	if len(wantIDs) != len(lines) || len(wantText) != len(lines) {
		t.Fatalf("%s: %d lines, %d id lines, %d decoded lines", input, len(lines), len(wantIDs), len(wantText))
	}
	enc := mismatches{t: t, what: input + " encode"}
	dec := mismatches{t: t, what: input + " decode"}
	stream := mismatches{t: t, what: input + " streamed decode"}
	for i, line := range lines {
		enc.check(i, line, formatIDs(tok.Encode(line)), wantIDs[i])
		ids := parseIDLine(t, wantIDs[i])
		want := unquote(t, wantText[i])
		dec.check(i, line, strconv.Quote(tok.Decode(ids)), strconv.Quote(want))
		stream.check(i, line, strconv.Quote(streamDecode(tok, ids)), strconv.Quote(want))
	}
	enc.done()
	dec.done()
	stream.done()
}

// loadParity loads a reference tokenizer.json. For Falcon, whose Digits
// pre-tokenizer follows the byte-level one, the Digits step is swapped for
// the ASCII-digit split transformers.js implements (its \d), so that every
// other step is compared exactly: the tokenizers library (and this package)
// split on every Unicode number, which after the byte-level step includes
// the characters standing for bytes 0xB2, 0xB3, 0xB9 and 0xBC-0xBE (see
// TestDigitsUnicode).
func loadParity(t *testing.T, name string) *Tokenizer {
	t.Helper()
	b, err := os.ReadFile(tokref.TokenizerJSON(t, name))
	if err != nil {
		t.Fatal(err)
	}
	if name == "falcon" {
		const digits = `{"type":"Digits","individual_digits":false}`
		if !bytes.Contains(b, []byte(digits)) {
			t.Fatal("falcon.tokenizer.json has no Digits pre-tokenizer")
		}
		b = bytes.Replace(b, []byte(digits), []byte(`{"type":"Split","pattern":{"Regex":"[0-9]+"},"behavior":"Isolated","invert":false}`), 1)
	}
	tok, err := Load(b)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// streamDecode decodes one id at a time through a Decoder.
func streamDecode(tok *Tokenizer, ids []int) string {
	d := tok.NewDecoder()
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(d.Add(id))
	}
	b.WriteString(d.Flush())
	return b.String()
}

// TestParitySpecial: the post-processor's special tokens, as
// @lenml/tokenizers adds them with add_special_tokens (Llama 3 with Meta's
// TemplateProcessing puts <|begin_of_text|> first; the others add nothing).
func TestParitySpecial(t *testing.T) {
	for _, name := range append([]string{"llama3-bos"}, tokref.Names...) {
		t.Run(name, func(t *testing.T) {
			tok := loadParity(t, name)
			lines := readLines(t, tokref.Input(t, "bpe"))
			want := readLines(t, tokref.Expected(t, name+".special.ids"))
			m := mismatches{t: t, what: "encode with special tokens"}
			for i, line := range lines {
				m.check(i, line, formatIDs(tok.EncodeSpecial(line, true)), want[i])
			}
			m.done()
			bos, ok := tok.BOS()
			wantBOS := map[string]int{"llama3-bos": 128000, "spm-legacy": 1, "spm-metaspace": 1, "gemma3": 2}
			if want, has := wantBOS[name]; ok != has || ok && bos != want {
				t.Errorf("BOS() = %d, %v", bos, ok)
			}
		})
	}
}

func ExampleTokenizer_Encode() {
	tok, err := Load([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4},
		"merges": ["a b", ["Ġ", "ab"]]}, "pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"}}`))
	if err != nil {
		panic(err)
	}
	ids := tok.Encode("ab ab")
	fmt.Println(ids, tok.Decode(ids))
	// Output: [2 4] ab ab
}
