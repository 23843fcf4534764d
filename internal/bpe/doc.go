// Package bpe is a Hugging Face style BPE tokenizer: it loads a
// tokenizer.json (a "BPE" model with merges) and builds the same kind of
// tokenizer from a GGUF vocabulary with tokenizer.ggml.model = "gpt2" or
// "gemma4" (see FromVocab).
//
// Encoding follows the tokenizers library (and transformers.js, which the
// tests compare against, line for line, for Llama 3, Qwen3, GPT-4o,
// gpt-oss and Gemma 3 as published and GPT-2-based configurations; GPT-2,
// GPT-4o and gpt-oss also against tiktoken):
//   - added tokens (special or not) are split out of the raw text first,
//     longest match at each position, honouring lstrip/rstrip;
//   - each remaining section is normalized (NFC, NFD, NFKC, NFKD,
//     Lowercase, Replace, Prepend, Strip, Sequence);
//   - then pre-tokenized (ByteLevel with or without the GPT-2 regex,
//     Split with a string or regex pattern and any split behaviour,
//     Digits, Punctuation, Metaspace, Whitespace, WhitespaceSplit,
//     Sequence). Regexes run on github.com/dlclark/regexp2 (look-around,
//     leftmost-first backtracking) after a rewrite that gives them the
//     meaning of the Rust engines the tokenizers library and tiktoken use:
//     (?i) by Unicode simple case folding, Unicode \w and \b, $ as the end
//     of the text, Rust's \p{} names and \x{} escapes; syntax whose
//     meaning would differ is refused (ErrUnsupported). Split with invert
//     keeps adjacent matches apart (o200k's \p{N}{1,3} on 1234 gives 123
//     and 4);
//   - each piece goes through the BPE model: lowest merge rank first,
//     leftmost on ties; with ignore_merges a piece that is itself in the
//     vocabulary is kept whole; a symbol missing from the vocabulary
//     becomes its <0xNN> byte tokens with byte_fallback, else the unknown
//     token (consecutive ones fused with fuse_unk).
//
// Encode adds no special tokens; EncodeSpecial adds what the
// post-processor declares (TemplateProcessing, Roberta, Bert), and BOS
// reports the beginning-of-sequence token a TemplateProcessing adds.
//
// Decoding runs the decoder chain (ByteLevel, Metaspace, Replace,
// ByteFallback, Fuse, Strip, Sequence); added tokens are written as their
// content. Invalid UTF-8 becomes U+FFFD per maximal subpart, as the
// WHATWG and Rust decoders do. The Python-side clean_up_tokenization_spaces
// step is not applied: Decode(Encode(s)) == s.
//
// Differences from the reference:
//   - invalid UTF-8 in the input is replaced by U+FFFD before encoding
//     (the references only ever see valid strings);
//   - regexes follow the Rust engines where JavaScript's differ: \s
//     matches U+0085 and not U+FEFF, (?i:'s) matches 's with U+017F (the
//     tests check these lines against tiktoken);
//   - Digits splits on every Unicode number (Rust's char::is_numeric),
//     transformers.js on ASCII digits only; Metaspace splits on the
//     replacement character (the Rust default), transformers.js does not;
//   - added tokens marked normalized are matched in the raw text, as
//     transformers.js does; the Rust library matches them after
//     normalization;
//   - ByteFallback decodes a run of byte tokens that is not valid UTF-8
//     with U+FFFD per maximal invalid subpart, as transformers.js does; the
//     Rust library replaces every byte of such a run.
package bpe
