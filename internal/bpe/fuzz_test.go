package bpe

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the committed fuzz seed corpora under testdata/fuzz")

// fuzzConfigs are small tokenizer.json files covering every component.
var fuzzConfigs = []string{
	`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4}, "merges": ["a b", ["Ġ", "ab"]]},
	  "pre_tokenizer": {"type": "ByteLevel"}, "decoder": {"type": "ByteLevel"}}`,
	`{"added_tokens": [{"id": 5, "content": "<s>", "special": true, "lstrip": true, "rstrip": true}],
	  "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}]},
	  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Split", "pattern": {"Regex": "(?i:'s|'t)|\\p{L}+|\\p{N}{1,3}|\\s+(?!\\S)|\\s+"}, "behavior": "Isolated"},
	    {"type": "Digits", "individual_digits": true}, {"type": "Punctuation", "behavior": "Contiguous"}, {"type": "ByteLevel", "use_regex": false}]},
	  "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}], "special_tokens": {"<s>": {"ids": [5]}}},
	  "decoder": {"type": "ByteLevel"},
	  "model": {"type": "BPE", "ignore_merges": true, "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4}, "merges": [["a", "b"], ["Ġ", "ab"]]}}`,
	`{"normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
	  "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true},
	  "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
	  "model": {"type": "BPE", "byte_fallback": true, "fuse_unk": true, "unk_token": "<unk>", "vocab": {"<unk>": 0, "▁": 1, "a": 2, "▁a": 3, "<0x41>": 4, "<0xC3>": 5}, "merges": ["▁ a"]}}`,
	`{"model": {"type": "WordPiece", "vocab": {}}}`,
	`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}`,
	`{"model": {"type": "BPE", "vocab": {"a": 99999999}, "merges": []}}`,
	`{"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a+)+$"}, "behavior": "Removed", "invert": true}}`,
	`{"model": {"type": "BPE"`,
	`[]`,
}

// FuzzLoad: any bytes load or fail with an error; a tokenizer that loads
// encodes and decodes anything without panicking.
func FuzzLoad(f *testing.F) {
	for _, c := range fuzzConfigs {
		f.Add([]byte(c), "ab a<s>b 123 it'S")
	}
	f.Fuzz(func(t *testing.T, data []byte, text string) {
		tok, err := Load(data)
		if err != nil {
			if tok != nil {
				t.Fatal("a tokenizer and an error")
			}
			return
		}
		if len(text) > 256 {
			text = text[:256]
		}
		ids := tok.EncodeSpecial(text, true)
		_ = tok.Decode(ids)
		_ = tok.Decode([]int{-1, 0, 1, tok.VocabSize(), 1 << 40})
	})
}

// regexSeeds are patterns covering translateRegex's syntax.
var regexSeeds = []string{
	gpt2Pattern,
	`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	`\w+|[^\w\s]+`, `(?i)[a-zσ]+\b`, `(?m)^a$|\Bb`, `\pL\PN\p{sc=Greek}\p{^Lu}[\p{Alphabetic}]`, `\x{41}\u{1F600}\U0001F600\x7F`,
	`(?P<n>a)\1(?#c)(?<=a)(?<!b)(?>c)`, `[\W]`, `[^\S\r\n]`, `(?i-m:a)(?s).`, `[`, `(?x)`, `\p{`, `a{2,3}?`,
}

// FuzzTranslateRegex: any pattern translates or fails with an error; a
// translation compiles with regexp2 (or fails with an error) and matches
// anything without panicking.
func FuzzTranslateRegex(f *testing.F) {
	for _, s := range regexSeeds {
		f.Add(s, "it'ſ 1234  word Ⅻ")
	}
	f.Fuzz(func(t *testing.T, expr, text string) {
		if len(expr) > 512 || len(text) > 256 {
			return
		}
		re, err := compileRegex(expr)
		if err != nil {
			if re != nil {
				t.Fatal("a regex and an error")
			}
			return
		}
		runes := []rune(text)
		for _, m := range re.matches(runes) {
			if m[0] < 0 || m[1] > len(runes) || m[0] >= m[1] {
				t.Fatalf("match %v outside %d runes", m, len(runes))
			}
		}
	})
}

// FuzzEncode: with a byte-level tokenizer, Decode(Encode(s)) gives s back
// (invalid UTF-8 as U+FFFD), and the streaming decoder agrees with Decode.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"", " ", "ab ab", "  two  spaces ", "\t\ttabs", "日本語", "👩\u200d💻", "e\u0301", "\xff\xe3\x81", "a\x00b", "<s>"} {
		f.Add(s)
	}
	tok := fullByteLevel(f)
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		want := lossyUTF8([]byte(s))
		if got := tok.Decode(ids); got != want {
			t.Fatalf("Decode(Encode(%q)) = %q", s, got)
		}
		if got := streamDecode(tok, ids); got != want {
			t.Fatalf("streamed decode of %q = %q", s, got)
		}
		if !utf8.ValidString(tok.Decode(ids)) {
			t.Fatal("invalid UTF-8 out of Decode")
		}
	})
}

// fullByteLevel is a GPT-2-style tokenizer with every byte, a few merges,
// the GPT-2 regex and one special token.
func fullByteLevel(t testing.TB) *Tokenizer {
	t.Helper()
	var vocab []string
	for b := 0; b < 256; b++ {
		vocab = append(vocab, fmt.Sprintf("%q: %d", string(byteToRune[b]), b))
	}
	merges := `["Ġ t", "h e", "Ġt he", "Ġ Ġ", "ĠĠ ĠĠ", "æ Ĺ"]`
	for i, m := range []string{"Ġt", "he", "Ġthe", "ĠĠ", "ĠĠĠĠ", "æĹ"} {
		vocab = append(vocab, fmt.Sprintf("%q: %d", m, 256+i))
	}
	js := `{"added_tokens": [{"id": 262, "content": "<s>", "special": true}], "pre_tokenizer": {"type": "ByteLevel"},
		"decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {` + strings.Join(vocab, ", ") + `}, "merges": ` + merges + `}}`
	tok, err := Load([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestWriteSeedCorpus regenerates testdata/fuzz/* with -update-seeds and
// otherwise checks the committed seeds are current.
func TestWriteSeedCorpus(t *testing.T) {
	write := func(target string, seeds [][]string) {
		dir := filepath.Join("testdata", "fuzz", target)
		for i, args := range seeds {
			var b strings.Builder
			b.WriteString("go test fuzz v1\n")
			for _, a := range args {
				b.WriteString(a + "\n")
			}
			p := filepath.Join(dir, fmt.Sprintf("seed%02d", i))
			if *updateSeeds {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			got, err := os.ReadFile(p)
			if err != nil || string(got) != b.String() {
				t.Errorf("%s is missing or stale: go test ./internal/bpe -run TestWriteSeedCorpus -args -update-seeds", p)
			}
		}
	}
	var load [][]string
	for _, c := range fuzzConfigs {
		load = append(load, []string{fmt.Sprintf("[]byte(%q)", c), fmt.Sprintf("string(%q)", "ab a<s>b 123 it'S")})
	}
	write("FuzzLoad", load)
	var rx [][]string
	for _, s := range regexSeeds {
		rx = append(rx, []string{fmt.Sprintf("string(%q)", s), fmt.Sprintf("string(%q)", "it'ſ 1234  word Ⅻ")})
	}
	write("FuzzTranslateRegex", rx)
	write("FuzzEncode", [][]string{{`string("ab ab")`}, {`string("\xff\xe3\x81 e\u0301 👩\u200d💻")`}})
}
