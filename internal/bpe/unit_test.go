package bpe

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// load builds a tokenizer from a small tokenizer.json whose vocabulary is
// every character of alphabet plus the given tokens, with the merges given.
func load(t *testing.T, vocab []string, merges []string, rest string) *Tokenizer {
	t.Helper()
	var v, m []string
	for i, tok := range vocab {
		v = append(v, fmt.Sprintf("%q: %d", tok, i))
	}
	for _, mg := range merges {
		m = append(m, fmt.Sprintf("%q", mg))
	}
	js := fmt.Sprintf(`{"model": {"type": "BPE", "vocab": {%s}, "merges": [%s]}%s}`, strings.Join(v, ", "), strings.Join(m, ", "), rest)
	tok, err := Load([]byte(js))
	if err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	return tok
}

func TestPreTokenizers(t *testing.T) {
	for _, c := range []struct {
		name, config, in string
		want             []string
	}{
		// Rust's Digits splits on char::is_numeric: every Unicode number.
		{"digits", `{"type": "Digits", "individual_digits": false}`, "ab12½٣x", []string{"ab", "12½٣", "x"}},
		{"digits individual", `{"type": "Digits", "individual_digits": true}`, "a12", []string{"a", "1", "2"}},
		{"punctuation", `{"type": "Punctuation"}`, "a,,b$", []string{"a", ",", ",", "b", "$"}},
		{"punctuation contiguous", `{"type": "Punctuation", "behavior": "Contiguous"}`, "a,,b", []string{"a", ",,", "b"}},
		{"split removed", `{"type": "Split", "pattern": {"String": " "}, "behavior": "Removed"}`, "a b  c", []string{"a", "b", "c"}},
		{"split merged previous", `{"type": "Split", "pattern": {"String": "-"}, "behavior": "MergedWithPrevious"}`, "a-b-", []string{"a-", "b-"}},
		{"split merged next", `{"type": "Split", "pattern": {"String": "-"}, "behavior": "MergedWithNext"}`, "a-b-", []string{"a", "-b", "-"}},
		{"split contiguous", `{"type": "Split", "pattern": {"String": "-"}, "behavior": "Contiguous"}`, "a--b", []string{"a", "--", "b"}},
		{"split invert", `{"type": "Split", "pattern": {"Regex": "\\d+"}, "behavior": "Removed", "invert": true}`, "a12b3", []string{"12", "3"}},
		// Adjacent matches stay separate pieces when inverted (o200k's
		// \p{N}{1,3} on 1234 gives 123 and 4, as tiktoken splits it).
		{"split invert adjacent", `{"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Removed", "invert": true}`, "x1234", []string{"123", "4"}},
		{"split invert contiguous", `{"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Contiguous", "invert": true}`, "x1234y5", []string{"x", "1234", "y", "5"}},
		{"split merged previous adjacent", `{"type": "Split", "pattern": {"String": "-"}, "behavior": "MergedWithPrevious"}`, "a--b", []string{"a-", "-", "b"}},
		{"split merged next adjacent", `{"type": "Split", "pattern": {"String": "-"}, "behavior": "MergedWithNext"}`, "a--b", []string{"a", "-", "-b"}},
		{"lookahead", `{"type": "Split", "pattern": {"Regex": "\\s+(?!\\S)|\\s+"}, "behavior": "Isolated"}`, "a   b", []string{"a", "  ", " ", "b"}},
		{"case-insensitive group", `{"type": "Split", "pattern": {"Regex": "(?i:'s)"}, "behavior": "Isolated"}`, "it'S", []string{"it", "'S"}},
		{"metaspace", `{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}`, "hi  there", []string{"▁hi", "▁", "▁there"}},
		{"metaspace no split", `{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}`, "hi there", []string{"▁hi▁there"}},
		{"whitespace split", `{"type": "WhitespaceSplit"}`, " a\tb ", []string{"a", "b"}},
		{"byte level prefix", `{"type": "ByteLevel", "add_prefix_space": true, "use_regex": false}`, "a b", []string{"ĠaĠb"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := buildPreTokenizer([]byte(c.config))
			if err != nil {
				t.Fatal(err)
			}
			got := p([]string{c.in}, true)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", c.want) {
				t.Errorf("%q -> %q, want %q", c.in, got, c.want)
			}
		})
	}
}

func TestNormalizers(t *testing.T) {
	for _, c := range []struct{ config, in, want string }{
		{`{"type": "NFC"}`, "e\u0301", "é"},
		{`{"type": "NFKC"}`, "ﬁ①", "fi1"},
		{`{"type": "NFD"}`, "é", "e\u0301"},
		{`{"type": "Lowercase"}`, "ABC Ä", "abc ä"},
		{`{"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}`, "a b", "▁a▁b"},
		{`{"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}`, "a   b  c", "a b c"},
		{`{"type": "Strip", "strip_left": true, "strip_right": false}`, "  a  ", "a  "},
	} {
		n, err := buildNormalizer([]byte(c.config))
		if err != nil {
			t.Fatal(err)
		}
		if got := n(c.in); got != c.want {
			t.Errorf("%s: %q -> %q, want %q", c.config, c.in, got, c.want)
		}
	}
}

// TestSentencePieceStyle: a tokenizer.json converted from a SentencePiece
// BPE model (Metaspace, byte fallback, the Replace/ByteFallback/Fuse/Strip
// decoder chain, a TemplateProcessing BOS).
func TestSentencePieceStyle(t *testing.T) {
	vocab := []string{"<unk>", "<s>", "</s>", "▁", "h", "i", "▁h", "▁hi", "t", "▁t"}
	for b := 0; b < 256; b++ {
		vocab = append(vocab, bytePiece(byte(b)))
	}
	tok := load(t, vocab, []string{"▁ h", "▁h i", "▁ t"}, `,
		"added_tokens": [{"id": 1, "content": "<s>", "special": true}, {"id": 2, "content": "</s>", "special": true}],
		"normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
		"post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
			"special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
		"decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
			{"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}`)
	// Rebuild with byte_fallback on.
	js := strings.Replace(string(tok.Marshal()), `"type": "BPE",`, `"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",`, 1)
	tok, err := Load([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode("hi té")
	byteE := 10 + 0xC3
	want := []int{7, 9, byteE, 10 + 0xA9}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Errorf("Encode = %v, want %v", ids, want)
	}
	if got := tok.Decode(ids); got != "hi té" {
		t.Errorf("Decode = %q", got)
	}
	if got := tok.Decode([]int{byteE, 7}); got != "\uFFFD hi" {
		t.Errorf("Decode of a lone byte = %q", got)
	}
	if got := tok.EncodeSpecial("hi", true); fmt.Sprint(got) != "[1 7]" {
		t.Errorf("EncodeSpecial = %v", got)
	}
	if bos, ok := tok.BOS(); !ok || bos != 1 {
		t.Errorf("BOS = %d %v", bos, ok)
	}
	if got := tok.Encode("<s>hi"); fmt.Sprint(got) != "[1 7]" {
		t.Errorf("special token in text: %v", got)
	}
}

func TestLoadErrors(t *testing.T) {
	for _, c := range []struct {
		json string
		want error
		says string
	}{
		{`{"model": {"type": "WordPiece", "vocab": {}}}`, ErrUnsupported, `"WordPiece"`},
		{`{"model": {"type": "Unigram", "vocab": []}}`, ErrUnsupported, `"Unigram"`},
		{`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}}`, ErrInvalid, "missing from the vocabulary"},
		{`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 0}, "merges": []}}`, ErrInvalid, "id 0"},
		{`{"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}}`, ErrInvalid, "id -1"},
		{`{"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "BertPreTokenizer"}}`, ErrUnsupported, "BertPreTokenizer"},
		{`{"model": {"type": "BPE", "vocab": {}, "merges": []}, "normalizer": {"type": "Precompiled"}}`, ErrUnsupported, "Precompiled"},
		{`{"model": {"type": "BPE", "vocab": {}, "merges": []}, "decoder": {"type": "WordPiece"}}`, ErrUnsupported, "WordPiece"},
		{`{"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "("}}}`, ErrInvalid, "regex"},
		{`{"model": {"type": "BPE", "vocab": {}, "merges": [7]}}`, ErrInvalid, "merge 0"},
		{`not json`, ErrInvalid, ""},
	} {
		_, err := Load([]byte(c.json))
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %v mentioning %q", c.json, err, c.want, c.says)
		}
	}
}

func TestLossyUTF8(t *testing.T) {
	for in, want := range map[string]string{
		"a\xffb":            "a\uFFFDb",
		"\xe2\x82":          "\uFFFD",
		"\xe2\x82\xac":      "€",
		"\xc0\xaf":          "\uFFFD\uFFFD",
		"\xed\xa0\x80":      "\uFFFD\uFFFD\uFFFD",
		"\xf4\x90\x80\x80":  "\uFFFD\uFFFD\uFFFD\uFFFD",
		"\xf0\x9f\x98":      "\uFFFD",
		"\xf0\x9f\x98\x80x": "😀x",
	} {
		if got := lossyUTF8([]byte(in)); got != want {
			t.Errorf("%q -> %q, want %q", in, got, want)
		}
	}
}
