// Package modelfile reads and writes gpurun model files: a TFLite flatbuffer
// used as a weight container (tensors named as in tensors/model, quantized
// tensors with separate "<name>_quantized_scale" tensors, configuration and
// tokenizer in the metadata), and the .task zip bundle that wraps such a
// flatbuffer together with the tokenizer.
//
// Tensor bytes live after the flatbuffer, 64-byte aligned, referenced by
// Buffer.offset/size, so files can exceed 2 GiB and readers map them in place.
package modelfile

//go:generate flatc --go --go-namespace tflite -o internal internal/tflite/schema.fbs

import "errors"

// Sentinel errors; every error returned by this package wraps one of them or
// an I/O error.
var (
	// ErrFormat reports bytes that are not a well-formed model file.
	ErrFormat = errors.New("modelfile: malformed file")
	// ErrTruncated reports a reference past the end of the data.
	ErrTruncated = errors.New("modelfile: truncated file")
	// ErrUnsupported reports a well-formed file using a feature gpurun does
	// not handle (tensor type, compressed zip entry).
	ErrUnsupported = errors.New("modelfile: unsupported")
	// ErrInvalid reports arguments a writer cannot store.
	ErrInvalid = errors.New("modelfile: invalid input")
)

// Metadata keys written by Write.
const (
	MetaConfig    = "gpurun.config"   // model.Config as JSON
	MetaTokenizer = "spm_vocab_model" // serialized SentencePiece ModelProto
	MetaBackend   = "backend"         // "gpu"
)

// fileIdentifier marks a TFLite flatbuffer at bytes 4..8.
const fileIdentifier = "TFL3"

// dataAlign is the alignment of each tensor's bytes within the file.
const dataAlign = 64
