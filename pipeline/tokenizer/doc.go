// Package tokenizer is a SentencePiece tokenizer written against the
// behavior of the reference tools (spm_encode / spm_decode /
// spm_normalize 0.1.97): for the models under testdata and tok512.model it
// produces the same ids and the same text, line for line.
//
// Load parses a serialized ModelProto (only the fields that matter for
// encoding are interpreted; every other field is preserved, and Marshal
// writes a model SentencePiece wrote back byte for byte). FromVocab builds
// a ModelProto from a plain vocabulary as GGUF and llama2.c carry it; Gemma
// 3's vocabulary in that form encodes and decodes the test corpora as its
// tokenizer.json does under the tokenizers library (control tokens cut out
// of the text as package chat does), except where text holds U+2581 next
// to a space or the unknown piece's name.
//
// Encoding follows SentencePieceProcessor::Encode:
//   - normalization: the precompiled charsmap (longest match in its
//     double-array trie), user-defined symbols passed through unchanged,
//     the dummy prefix, removal of extra whitespace, ' ' to U+2581, and each
//     invalid UTF-8 byte as U+FFFD;
//   - the model: BPE (highest-score merge first, leftmost on ties, UNUSED
//     pieces split back), unigram (Viterbi, with the reference's mixed
//     float/double scoring so ties break the same way) or char;
//   - unknown pieces: with byte_fallback each byte becomes its <0xNN>
//     piece, otherwise a run of unknown pieces yields one unknown id.
//
// Differences from the reference:
//   - WORD models are rejected (ErrUnsupportedModel).
//   - Decode ignores ids outside the vocabulary; spm_decode fails on them.
//   - A denormalizer_spec (a rule applied to decoded text by spm_decode,
//     absent from ordinary models) is preserved but not applied.
//   - A one-character CONTROL piece is never produced from text (the
//     character becomes unknown); spm_encode fails on such input.
//
// Import it to tokenize text as a model's tokenizer does, without loading
// the model.
package tokenizer
