package model

import "github.com/gpurun/gpurun/tensors"

// Checkpoint is what an importer produces and the converter writes: the
// configuration, the weights under the names of names.go (quantized tensors
// carry their Scales), and the tokenizer.
type Checkpoint struct {
	Config  Config
	Tensors []*tensors.Tensor
	// Tokenizer is a serialized SentencePiece ModelProto, or nil when the
	// checkpoint brought none (then Vocab may describe it).
	Tokenizer []byte
	// Vocab is the tokenizer as a plain vocabulary (GGUF and llama2.c carry
	// this form); the converter turns it into a ModelProto.
	Vocab *Vocab
}

// Tensor returns the tensor with the given name, or nil.
func (c *Checkpoint) Tensor(name string) *tensors.Tensor {
	for _, t := range c.Tensors {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Piece types, numbered as SentencePiece's ModelProto.SentencePiece.Type
// (GGUF's tokenizer.ggml.token_type uses the same numbers).
const (
	PieceNormal      = 1
	PieceUnknown     = 2
	PieceControl     = 3
	PieceUserDefined = 4
	PieceUnused      = 5
	PieceByte        = 6
)

// Vocab is a SentencePiece-style vocabulary without the normalizer proto.
type Vocab struct {
	Model  string // "bpe" or "unigram"
	Pieces []string
	Scores []float32
	Types  []int32
	// AddDummyPrefix, as SentencePiece's normalizer_spec; Llama-family
	// vocabularies use true.
	AddDummyPrefix     bool
	BOS, EOS, UNK, PAD int // -1 when absent
}
