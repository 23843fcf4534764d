package bpe

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrInvalid reports a tokenizer.json (or GGUF vocabulary) that is not
	// well formed: bad JSON, a merge or token missing from the vocabulary,
	// duplicate ids, a regex that does not compile.
	ErrInvalid = errors.New("bpe: invalid tokenizer")
	// ErrUnsupported reports a component this package does not implement
	// (a WordPiece or Unigram model, an unknown normalizer, pre-tokenizer,
	// decoder or post-processor type, an unknown GGUF pre-tokenizer name).
	ErrUnsupported = errors.New("bpe: unsupported tokenizer")
)

// wholeNewlineRunsKey names modelJSON.WholeNewlineRuns in tokenizer.json.
const wholeNewlineRunsKey = "gpurun_whole_newline_runs"

// fileJSON is the part of tokenizer.json this package reads.
type fileJSON struct {
	AddedTokens   []addedJSON     `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	Model         modelJSON       `json:"model"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
}

type addedJSON struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    string            `json:"type"`
	Vocab                   map[string]int    `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
	UnkToken                *string           `json:"unk_token"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	FuseUnk                 bool              `json:"fuse_unk"`
	ByteFallback            bool              `json:"byte_fallback"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	// WholeNewlineRuns is gpurun's own key (wholeNewlineRunsKey), not
	// the tokenizers library's: a piece made only of newlines that is
	// itself a token is kept whole, as llama.cpp tokenizes a Gemma 4
	// ("gemma4") GGUF vocabulary.
	WholeNewlineRuns bool     `json:"gpurun_whole_newline_runs"`
	Dropout          *float64 `json:"dropout"`
}

// component is any normalizer / pre-tokenizer / decoder / post-processor
// object: its type plus every field any of them uses.
type component struct {
	Type string `json:"type"`
	// Sequences.
	Normalizers   []json.RawMessage `json:"normalizers"`
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
	Decoders      []json.RawMessage `json:"decoders"`
	Processors    []json.RawMessage `json:"processors"`
	// Replace, Split.
	Pattern  *patternJSON `json:"pattern"`
	Content  *string      `json:"content"`
	Behavior string       `json:"behavior"`
	Invert   bool         `json:"invert"`
	// Prepend.
	Prepend string `json:"prepend"`
	// Strip normalizer.
	StripLeft  *bool `json:"strip_left"`
	StripRight *bool `json:"strip_right"`
	// Strip decoder.
	Start int `json:"start"`
	Stop  int `json:"stop"`
	// ByteLevel.
	AddPrefixSpace *bool `json:"add_prefix_space"`
	UseRegex       *bool `json:"use_regex"`
	// Metaspace.
	Replacement   string `json:"replacement"`
	PrependScheme string `json:"prepend_scheme"`
	Split         *bool  `json:"split"`
	// Digits.
	IndividualDigits bool `json:"individual_digits"`
	// TemplateProcessing.
	Single []templateItem `json:"single"`
	// TemplateProcessing special tokens: name -> ids.
	SpecialTokens map[string]struct {
		IDs []int `json:"ids"`
	} `json:"special_tokens"`
	// Bert / Roberta processing: [token, id].
	Cls []json.RawMessage `json:"cls"`
	Sep []json.RawMessage `json:"sep"`
}

type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

type templateItem struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

// parseComponent decodes raw; ok is false for JSON null or absence.
func parseComponent(raw json.RawMessage, what string) (c component, ok bool, err error) {
	if len(raw) == 0 || string(raw) == "null" {
		return c, false, nil
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, false, fmt.Errorf("%w: %s: %w", ErrInvalid, what, err)
	}
	if c.Type == "" {
		return c, false, fmt.Errorf("%w: %s without a type", ErrInvalid, what)
	}
	return c, true, nil
}

// parseMerge reads one merge in either form: "a b" or ["a", "b"].
func parseMerge(raw json.RawMessage) (string, string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		a, b, ok := strings.Cut(s, " ")
		if !ok || a == "" || b == "" || strings.Contains(b, " ") {
			return "", "", fmt.Errorf("merge %q is not two space-separated tokens", s)
		}
		return a, b, nil
	}
	var pair []string
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return "", "", fmt.Errorf("merge %s is neither \"a b\" nor [\"a\", \"b\"]", truncate(string(raw)))
	}
	return pair[0], pair[1], nil
}

func truncate(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}
