package bpe

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gpurun/gpurun/tensors/model"
)

// GGUF pre-tokenizer regexes: what llama.cpp splits a byte-level BPE prompt
// with for each tokenizer.ggml.pre value. Each regex splits every piece
// the previous one left, keeping matches and the text between them.
const (
	reGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`
	// Llama 3's regex with its case-insensitive contractions spelled out.
	reLlama3 = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// GPT-4o's o200k (gpt-oss, Phi-4-mini), as its tokenizer.json and
	// tiktoken have it; llama.cpp's "gpt-4o" regex approximates the case
	// classes with ASCII ranges, which splits mixed-case non-ASCII words
	// differently from the tokenizer the model was trained with.
	reO200k = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// Qwen2's: Llama 3's with single digits.
	reQwen2 = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// Qwen3.5's: Qwen2's with combining marks (\p{M}) kept in words and
	// out of punctuation runs (llama.cpp's "qwen35", from its
	// tokenizer.json).
	reQwen35 = `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// ggufPre maps tokenizer.ggml.pre names to their regex sequences.
var ggufPre = map[string][]string{
	"":        {`[\p{P}\$\+<=>\^~\|]+`, reGPT2, `\p{N}+`},
	"default": {`[\p{P}\$\+<=>\^~\|]+`, reGPT2, `\p{N}+`},

	"llama3": {reLlama3}, "llama-v3": {reLlama3}, "llama-bpe": {reLlama3}, "falcon3": {reLlama3},
	"dbrx": {reLlama3}, "smaug-bpe": {reLlama3}, "chatglm-bpe": {reLlama3},
	// LFM2 / LFM2.5 (llama.cpp puts "lfm2" in Llama 3's group).
	"lfm2": {reLlama3},

	"gpt-4o": {reO200k},

	"qwen2": {reQwen2}, "deepseek-r1-qwen": {reQwen2}, "megrez": {reQwen2}, "stablelm2": {reQwen2},
	"qwen35": {reQwen35},

	"gpt-2": {reGPT2}, "phi-2": {reGPT2}, "roberta-bpe": {reGPT2}, "mpt": {reGPT2}, "olmo": {reGPT2},
	"jais": {reGPT2}, "gigachat": {reGPT2}, "jina-es": {reGPT2}, "jina-de": {reGPT2},
	"jina-v1-en": {reGPT2}, "jina-v2-es": {reGPT2}, "jina-v2-de": {reGPT2}, "jina-v2-code": {reGPT2},

	"falcon": {`[\p{P}\$\+<=>\^~\|` + "`" + `]+`, reGPT2, `[0-9][0-9][0-9]`},

	"starcoder": {`\p{N}`, reGPT2}, "refact": {`\p{N}`, reGPT2}, "command-r": {`\p{N}`, reGPT2},
	"smollm": {`\p{N}`, reGPT2}, "codeshell": {`\p{N}`, reGPT2}, "exaone": {`\p{N}`, reGPT2},
	"minerva-7b": {`\p{N}`, reGPT2},
}

// ggufIgnoreMerges: pre-tokenizers whose words found whole in the
// vocabulary are not merged (llama.cpp's ignore_merges).
var ggufIgnoreMerges = map[string]bool{"llama3": true, "llama-v3": true, "llama-bpe": true, "falcon3": true, "lfm2": true}

// FromVocab builds a tokenizer.json from a GGUF byte-level BPE vocabulary
// (model.Vocab with Model "gpt2"): the tokens as the BPE vocabulary, the
// merges, control and user-defined tokens as added tokens (control ones
// special), the pre-tokenizer regexes llama.cpp uses for v.Pre followed by
// the byte-level mapping, the ByteLevel decoder, and a BOS post-processor
// when addBOS is set and the vocabulary has a BOS token.
//
// A "gemma4" vocabulary (Gemma 4's SentencePiece-style BPE) becomes what
// llama.cpp runs for it: spaces replaced by U+2581 (a Replace normalizer),
// the text split into runs of newlines and runs of anything else, no
// byte-level mapping, merges over UTF-8 characters with <0xNN> byte
// fallback for what no token covers, a run of newlines that is a token
// kept whole (gpurun_whole_newline_runs), and the Replace, ByteFallback,
// Fuse decoder.
func FromVocab(v *model.Vocab, addBOS bool) ([]byte, error) {
	if v == nil || v.Model != "gpt2" && v.Model != "gemma4" {
		return nil, fmt.Errorf("%w: not a gpt2 or gemma4 vocabulary", ErrInvalid)
	}
	gemma4 := v.Model == "gemma4"
	regexes, ok := ggufPre[v.Pre]
	if gemma4 {
		regexes, ok = []string{`\n+`}, true
	}
	if !ok {
		return nil, fmt.Errorf("%w: GGUF pre-tokenizer %q", ErrUnsupported, v.Pre)
	}
	if len(v.Types) != len(v.Pieces) {
		return nil, fmt.Errorf("%w: %d tokens but %d token types", ErrInvalid, len(v.Pieces), len(v.Types))
	}
	vocab := make(map[string]int, len(v.Pieces))
	var added []addedJSON
	for id, p := range v.Pieces {
		if _, dup := vocab[p]; dup {
			return nil, fmt.Errorf("%w: token %q appears twice", ErrInvalid, truncate(p))
		}
		vocab[p] = id
		switch v.Types[id] {
		case model.PieceControl, model.PieceUserDefined:
			if p == "" {
				return nil, fmt.Errorf("%w: token %d is empty", ErrInvalid, id)
			}
			added = append(added, addedJSON{ID: id, Content: p, Special: v.Types[id] == model.PieceControl})
		}
	}
	merges := make([][2]string, len(v.Merges))
	for i, m := range v.Merges {
		a, b, ok := strings.Cut(m, " ")
		if !ok {
			return nil, fmt.Errorf("%w: merge %d %q has no space", ErrInvalid, i, truncate(m))
		}
		merges[i] = [2]string{a, b}
	}
	type obj = map[string]any
	var pre []obj
	for _, re := range regexes {
		pre = append(pre, obj{"type": "Split", "pattern": obj{"Regex": re}, "behavior": "Isolated", "invert": false})
	}
	byteLevel := obj{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	var normalizer, decoder obj
	if gemma4 {
		normalizer = obj{"type": "Replace", "pattern": obj{"String": " "}, "content": "\u2581"}
		decoder = obj{"type": "Sequence", "decoders": []obj{
			{"type": "Replace", "pattern": obj{"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}}}
	} else {
		pre = append(pre, byteLevel)
		decoder = byteLevel
	}
	var post obj
	if addBOS && v.BOS >= 0 && v.BOS < len(v.Pieces) {
		bos := v.Pieces[v.BOS]
		post = obj{"type": "TemplateProcessing",
			"single":         []obj{{"SpecialToken": obj{"id": bos, "type_id": 0}}, {"Sequence": obj{"id": "A", "type_id": 0}}},
			"special_tokens": obj{bos: obj{"id": bos, "ids": []int{v.BOS}, "tokens": []string{bos}}}}
	}
	f := obj{
		"version":        "1.0",
		"added_tokens":   added,
		"normalizer":     normalizer,
		"pre_tokenizer":  obj{"type": "Sequence", "pretokenizers": pre},
		"post_processor": post,
		"decoder":        decoder,
		"model": obj{"type": "BPE", "vocab": vocab, "merges": merges, "ignore_merges": ggufIgnoreMerges[v.Pre],
			"byte_fallback": gemma4, "fuse_unk": false, wholeNewlineRunsKey: gemma4},
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if _, err := Load(b); err != nil {
		return nil, err
	}
	return b, nil
}
