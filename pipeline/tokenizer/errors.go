package tokenizer

import "errors"

var (
	// ErrInvalidProto reports a ModelProto that is not well-formed protobuf
	// or that violates a SentencePiece invariant (duplicate or empty piece,
	// missing unknown piece, malformed byte piece).
	ErrInvalidProto = errors.New("tokenizer: invalid SentencePiece model")
	// ErrInvalidCharsmap reports a broken precompiled_charsmap blob.
	ErrInvalidCharsmap = errors.New("tokenizer: invalid precompiled charsmap")
	// ErrUnsupportedModel reports a model_type this package does not encode.
	ErrUnsupportedModel = errors.New("tokenizer: unsupported model type")
	// ErrInvalidVocab reports a plain vocabulary FromVocab cannot convert.
	ErrInvalidVocab = errors.New("tokenizer: invalid vocabulary")
)
