package pipeline

import "fmt"

// loadTokenizer parses a serialized SentencePiece model.
//
// pipeline/tokenizer is not in the tree yet; until it is, models run on ids
// only and this reports why.
func loadTokenizer(proto []byte) (textCodec, error) {
	return nil, fmt.Errorf("%w: no SentencePiece implementation linked (%d-byte model ignored)", ErrNoTokenizer, len(proto))
}
