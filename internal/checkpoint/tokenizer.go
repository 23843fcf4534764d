package checkpoint

import (
	"fmt"
	"os"

	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/internal/modelfile"
	"github.com/gpurun/gpurun/tensors/model"
	"google.golang.org/protobuf/encoding/protowire"
)

// attachTokenizer reads the tokenizer file at path into ck: a SentencePiece
// model proto or a Hugging Face tokenizer.json goes into ck.Tokenizer as is
// (checked when it is loaded), a llama2.c tokenizer.bin into ck.Vocab.
func attachTokenizer(ck *model.Checkpoint, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("checkpoint: tokenizer: %w", err)
	}
	if err := AttachTokenizer(ck, data); err != nil {
		return fmt.Errorf("checkpoint: tokenizer %s: %w", path, err)
	}
	return nil
}

// AttachTokenizer is attachTokenizer on the file's content (data), for
// callers without a file system such as the browser build.
func AttachTokenizer(ck *model.Checkpoint, data []byte) error {
	if isSentencePieceProto(data) || modelfile.IsTokenizerJSON(data) {
		ck.Tokenizer = data
		return nil
	}
	v, err := llama2c.ParseTokenizer(data, ck.Config.VocabSize)
	if err != nil {
		return fmt.Errorf("neither a SentencePiece model, a tokenizer.json nor a llama2.c tokenizer.bin for %d tokens: %w", ck.Config.VocabSize, err)
	}
	ck.Vocab = v
	return nil
}

// isSentencePieceProto reports whether data is a well-formed protobuf message
// whose first field is ModelProto.pieces (field 1, length-delimited), as
// SentencePiece writes it. A llama2.c tokenizer.bin starts with a small
// little-endian int32 and fails the wire-format walk.
func isSentencePieceProto(data []byte) bool {
	num, typ, n := protowire.ConsumeTag(data)
	if n < 0 || num != 1 || typ != protowire.BytesType {
		return false
	}
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return false
		}
		data = data[n:]
		m := protowire.ConsumeFieldValue(num, typ, data)
		if m < 0 {
			return false
		}
		data = data[m:]
	}
	return true
}
