package model

import "github.com/gpurun/gpurun/tensors"

// Checkpoint is what an importer produces and the converter writes: the
// configuration, the weights under the names of names.go (quantized tensors
// carry their Scales), and the tokenizer.
type Checkpoint struct {
	Config  Config
	Tensors []*tensors.Tensor
	// Tokenizer is a serialized SentencePiece ModelProto or a Hugging Face
	// tokenizer.json (which starts with '{'), or nil when the checkpoint
	// brought none (then Vocab may describe it).
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

// Vocab is a plain vocabulary: SentencePiece-style (Model "bpe" or
// "unigram", without the normalizer proto) or byte-level BPE (Model "gpt2",
// GGUF's tokenizer.ggml.model = "gpt2": Pieces in GPT-2's byte alphabet,
// Merges, and Pre naming the pre-tokenizer).
type Vocab struct {
	Model  string // "bpe", "unigram", "gpt2" or "gemma4" (Gemma 4's SentencePiece-style BPE, with Merges)
	Pieces []string
	Scores []float32
	Types  []int32
	// AddDummyPrefix, as SentencePiece's normalizer_spec; Llama-family
	// vocabularies use true.
	AddDummyPrefix     bool
	BOS, EOS, UNK, PAD int // -1 when absent
	// Merges ("left right", in rank order) and Pre (tokenizer.ggml.pre,
	// such as "llama3", "qwen2", "gpt-2"; "" for llama.cpp's default) of a
	// "gpt2" vocabulary.
	Merges []string
	Pre    string
}
