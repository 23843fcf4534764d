// Package checkpoint loads any supported checkpoint format (llama2.c, GGUF,
// Hugging Face safetensors) into a model.Checkpoint, detecting the format
// from the content, and attaches a tokenizer given separately.
package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gpurun/gpurun/internal/gguf"
	"github.com/gpurun/gpurun/internal/hf"
	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/tensors/model"
)

// Formats accepted by Options.Format.
const (
	FormatAuto    = ""
	FormatLlama2c = "llama2c"
	FormatGGUF    = "gguf"
	FormatHF      = "hf"
)

// ErrUnknownFormat reports a path whose format could not be recognized, or an
// Options.Format value this package does not know.
var ErrUnknownFormat = errors.New("checkpoint: unknown format")

// Options control Load.
type Options struct {
	// Format forces a format (FormatLlama2c, FormatGGUF, FormatHF); empty
	// detects it from the content.
	Format string
	// Tokenizer is an optional tokenizer file: a SentencePiece model proto
	// (stored as Checkpoint.Tokenizer) or a llama2.c tokenizer.bin (parsed
	// into Checkpoint.Vocab). The kind is detected from the content.
	Tokenizer string
}

// Load reads the checkpoint at path: a GGUF file, a Hugging Face directory
// (config.json and *.safetensors) or one of its .safetensors files, or a
// llama2.c .bin file.
func Load(path string, opts Options) (*model.Checkpoint, error) {
	format := opts.Format
	if format == FormatAuto {
		var err error
		if format, err = Detect(path); err != nil {
			return nil, err
		}
	}
	var ck *model.Checkpoint
	var err error
	switch format {
	case FormatGGUF:
		ck, err = gguf.Load(path)
	case FormatLlama2c:
		ck, err = llama2c.Load(path)
	case FormatHF:
		dir := path
		if fi, statErr := os.Stat(path); statErr == nil && !fi.IsDir() {
			dir = filepath.Dir(path)
		}
		ck, err = hf.Load(dir)
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnknownFormat, format)
	}
	if err != nil {
		return nil, err
	}
	if opts.Tokenizer != "" {
		if err := attachTokenizer(ck, opts.Tokenizer); err != nil {
			return nil, err
		}
	}
	return ck, nil
}

// Detect names the format of path from its content: a directory holding
// config.json is FormatHF, a file starting with the GGUF magic FormatGGUF, a
// safetensors file FormatHF, and a file whose first 28 bytes are a sane
// llama2.c header FormatLlama2c.
func Detect(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	if fi.IsDir() {
		if _, err := os.Stat(filepath.Join(path, "config.json")); err != nil {
			return "", fmt.Errorf("%w: directory %s has no config.json", ErrUnknownFormat, path)
		}
		return FormatHF, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	head := make([]byte, llama2c.HeaderSize)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", fmt.Errorf("%w: %s: %w", ErrUnknownFormat, path, err)
	}
	head = head[:n]
	switch {
	case len(head) >= 4 && string(head[:4]) == gguf.Magic:
		return FormatGGUF, nil
	case isSafetensorsHead(head, fi.Size()):
		return FormatHF, nil
	}
	if _, err := llama2c.ParseHeader(head); err == nil {
		return FormatLlama2c, nil
	}
	return "", fmt.Errorf("%w: %s is neither GGUF, safetensors nor a llama2.c checkpoint", ErrUnknownFormat, path)
}

// isSafetensorsHead checks for a safetensors file: an 8-byte little-endian
// header length that fits in the file, followed by a JSON object.
func isSafetensorsHead(head []byte, size int64) bool {
	if len(head) < 9 {
		return false
	}
	n := binary.LittleEndian.Uint64(head)
	return n >= 2 && n <= uint64(size-8) && head[8] == '{'
}
