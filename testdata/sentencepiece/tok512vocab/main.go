// Command tok512vocab converts llama2.c's tok512.bin into a ModelProto with
// tokenizer.FromVocab, typing the pieces as llama.cpp's llama2.c converter
// does (llama2c.LoadTokenizer). gen.sh feeds the result to spm_encode, so
// SentencePiece itself checks the protos FromVocab writes.
//
// Usage: go run ./tok512vocab tok512.bin out.model
package main

import (
	"fmt"
	"os"

	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/pipeline/tokenizer"
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
	// A vocab size of 0 takes every piece in the file.
	v, err := llama2c.LoadTokenizer(in, 0)
	if err != nil {
		return err
	}
	proto, err := tokenizer.FromVocab(v)
	if err != nil {
		return err
	}
	return os.WriteFile(out, proto, 0o644)
}
