// Command tok512vocab converts llama2.c's tok512.bin into a ModelProto with
// tokenizer.FromVocab, typing the pieces as llama.cpp's llama2.c converter
// does. gen.sh feeds the result to spm_encode, so SentencePiece itself
// checks the protos FromVocab writes.
//
// Usage: go run ./testdata/tok512vocab tok512.bin out.model
package main

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/gpurun/gpurun/pipeline/tokenizer"
	"github.com/gpurun/gpurun/tensors/model"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: tok512vocab tok512.bin out.model")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	v := &model.Vocab{Model: "bpe", AddDummyPrefix: true, UNK: 0, BOS: 1, EOS: 2, PAD: -1}
	for off := 4; off < len(b); {
		if off+8 > len(b) {
			return fmt.Errorf("truncated token header at %d", off)
		}
		score := math.Float32frombits(binary.LittleEndian.Uint32(b[off:]))
		n := int(binary.LittleEndian.Uint32(b[off+4:]))
		off += 8
		if n < 0 || off+n > len(b) {
			return fmt.Errorf("token length %d at %d", n, off)
		}
		piece := string(b[off : off+n])
		off += n
		id := len(v.Pieces)
		typ := int32(model.PieceNormal)
		switch {
		case id == 0:
			typ = model.PieceUnknown
		case id == 1:
			typ, piece = model.PieceControl, "<s>"
		case id == 2:
			typ, piece = model.PieceControl, "</s>"
		case len(piece) == 6 && strings.HasPrefix(piece, "<0x"):
			typ = model.PieceByte
		default:
			piece = strings.ReplaceAll(piece, " ", "\u2581")
		}
		v.Pieces = append(v.Pieces, piece)
		v.Scores = append(v.Scores, score)
		v.Types = append(v.Types, typ)
	}
	proto, err := tokenizer.FromVocab(v)
	if err != nil {
		return err
	}
	return os.WriteFile(out, proto, 0o644)
}
