package llama2c

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/gpurun/gpurun/tensors/model"
)

// Special ids every llama2.c vocabulary uses (SentencePiece's defaults as
// trained by llama2.c's tinystories.py).
const (
	unkID = 0
	bosID = 1
	eosID = 2
)

// LoadTokenizer reads a llama2.c tokenizer.bin holding vocabSize pieces.
func LoadTokenizer(path string, vocabSize int) (*model.Vocab, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("llama2c: %w", err)
	}
	v, err := ParseTokenizer(data, vocabSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// ParseTokenizer decodes a llama2.c tokenizer.bin: int32 max_token_length,
// then per piece an f32 score, an int32 byte length and the bytes.
//
// llama2.c's exporter rewrote each SentencePiece piece for its C decoder:
// U+2581 became ' ', and BOS/EOS became "\n<s>\n" and "\n</s>\n". ParseTokenizer
// undoes both so the pieces equal the original SentencePiece model's.
//
// A vocabSize of 0 takes every piece in the file: tokenizer.bin does not
// record its size, which llama2.c takes from the model's header.
func ParseTokenizer(data []byte, vocabSize int) (*model.Vocab, error) {
	if vocabSize == 0 {
		n, err := countPieces(data)
		if err != nil {
			return nil, err
		}
		vocabSize = n
	}
	if vocabSize <= 0 {
		return nil, fmt.Errorf("%w: tokenizer vocab size %d", ErrFormat, vocabSize)
	}
	// Each piece takes at least 8 bytes, which bounds the slices below.
	if int64(vocabSize) > int64(len(data)/8) {
		return nil, fmt.Errorf("%w: %w: %d bytes cannot hold %d pieces", ErrFormat, io.ErrUnexpectedEOF, len(data), vocabSize)
	}
	if len(data) < 4 {
		return nil, fmt.Errorf("%w: %w: tokenizer header", ErrFormat, io.ErrUnexpectedEOF)
	}
	maxLen := int(int32(binary.LittleEndian.Uint32(data)))
	if maxLen <= 0 {
		return nil, fmt.Errorf("%w: max_token_length %d", ErrFormat, maxLen)
	}
	v := &model.Vocab{
		Model:          "bpe",
		Pieces:         make([]string, vocabSize),
		Scores:         make([]float32, vocabSize),
		Types:          make([]int32, vocabSize),
		AddDummyPrefix: true,
		BOS:            bosID,
		EOS:            eosID,
		UNK:            unkID,
		PAD:            -1,
	}
	off := 4
	for i := range vocabSize {
		if len(data)-off < 8 {
			return nil, fmt.Errorf("%w: %w: piece %d header at byte %d", ErrFormat, io.ErrUnexpectedEOF, i, off)
		}
		score := math.Float32frombits(binary.LittleEndian.Uint32(data[off:]))
		n := int(int32(binary.LittleEndian.Uint32(data[off+4:])))
		off += 8
		if n < 0 || n > maxLen || n > len(data)-off {
			return nil, fmt.Errorf("%w: piece %d length %d (max %d, %d bytes left)", ErrFormat, i, n, maxLen, len(data)-off)
		}
		v.Pieces[i] = restorePiece(i, string(data[off:off+n]))
		v.Scores[i] = score
		v.Types[i] = pieceType(i, v.Pieces[i])
		off += n
	}
	if off != len(data) {
		return nil, fmt.Errorf("%w: %w: %d bytes after piece %d", ErrFormat, ErrTrailingData, len(data)-off, vocabSize-1)
	}
	return v, nil
}

// countPieces walks the piece records of a tokenizer.bin to its end.
func countPieces(data []byte) (int, error) {
	if len(data) < 4 {
		return 0, fmt.Errorf("%w: %w: tokenizer header", ErrFormat, io.ErrUnexpectedEOF)
	}
	n := 0
	for off := 4; off < len(data); n++ {
		if len(data)-off < 8 {
			return 0, fmt.Errorf("%w: %w: piece %d header at byte %d", ErrFormat, io.ErrUnexpectedEOF, n, off)
		}
		size := int64(int32(binary.LittleEndian.Uint32(data[off+4:])))
		if size < 0 || size > int64(len(data)-off-8) {
			return 0, fmt.Errorf("%w: piece %d length %d past the end", ErrFormat, n, size)
		}
		off += 8 + int(size)
	}
	return n, nil
}

// restorePiece undoes llama2.c's export rewriting of piece id.
func restorePiece(id int, p string) string {
	switch id {
	case bosID:
		if p == "\n<s>\n" {
			return "<s>"
		}
	case eosID:
		if p == "\n</s>\n" {
			return "</s>"
		}
	}
	// SentencePiece pieces never hold a plain space: its normalizer turns
	// spaces into U+2581, which the exporter turned back into ' '.
	return strings.ReplaceAll(p, " ", "\u2581")
}

// pieceType recovers the SentencePiece piece type, which tokenizer.bin drops.
func pieceType(id int, p string) int32 {
	switch {
	case id == unkID:
		return model.PieceUnknown
	case id == bosID || id == eosID:
		return model.PieceControl
	case isBytePiece(p):
		return model.PieceByte
	}
	return model.PieceNormal
}

// isBytePiece matches SentencePiece's byte-fallback pieces "<0xNN>" (upper-case hex).
func isBytePiece(p string) bool {
	if len(p) != 6 || p[:3] != "<0x" || p[5] != '>' {
		return false
	}
	for _, c := range p[3:5] {
		if !('0' <= c && c <= '9' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
