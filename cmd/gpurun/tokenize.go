package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpurun/gpurun/internal/bpe"
	"github.com/gpurun/gpurun/internal/checkpoint"
	"github.com/gpurun/gpurun/internal/llama2c"
	"github.com/gpurun/gpurun/internal/modelfile"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/pipeline/tokenizer"
	"github.com/gpurun/gpurun/tensors/model"
)

func newTokenize() *cobra.Command {
	var (
		tokPath string
		decode  bool
	)
	cmd := &cobra.Command{
		Use:   "tokenize -t TOKENIZER [--decode]",
		Short: "Encode stdin to ids (or decode ids to text), line by line, like spm_encode / spm_decode",
		Long: `Tokenize reads standard input line by line and writes one line per input line:
the token ids separated by spaces (as spm_encode --output_format=id), or with
--decode the text of space-separated ids (as spm_decode --input_format=id).
No BOS or EOS is added. TOKENIZER is a SentencePiece .model, a Hugging Face
tokenizer.json (byte-level BPE), a llama2.c tokenizer.bin, a .task bundle,
a model file that embeds a tokenizer, or a checkpoint that carries one (a
GGUF file's vocabulary, a Hugging Face directory's tokenizer).`,
		Args: nArgs(0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if tokPath == "" {
				return errors.New("tokenize: -t TOKENIZER is required")
			}
			tok, err := openTokenizer(tokPath)
			if err != nil {
				return err
			}
			return tokenizeLines(cmd.InOrStdin(), cmd.OutOrStdout(), tok, decode)
		},
	}
	cmd.Flags().StringVarP(&tokPath, "tokenizer", "t", "", "tokenizer file (.model, tokenizer.json, tokenizer.bin, .task, model file, GGUF file or Hugging Face directory)")
	cmd.Flags().BoolVar(&decode, "decode", false, "decode ids to text instead of encoding")
	return cmd
}

// tokenizeLines streams lines from r to w. Each line's newline ("\n") is
// removed before encoding, as spm_encode does.
func tokenizeLines(r io.Reader, w io.Writer, tok textTokenizer, decode bool) error {
	br := bufio.NewReaderSize(r, 1<<16)
	bw := bufio.NewWriterSize(w, 1<<16)
	for n := 1; ; n++ {
		line, err := br.ReadString('\n')
		if line == "" && err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return fmt.Errorf("tokenize: %w", err)
		}
		line = strings.TrimSuffix(line, "\n")
		if decode {
			ids, perr := parseIDs(line, tok.VocabSize())
			if perr != nil {
				return fmt.Errorf("tokenize: line %d: %w", n, perr)
			}
			bw.WriteString(tok.Decode(ids))
		} else {
			for i, id := range tok.Encode(line) {
				if i > 0 {
					bw.WriteByte(' ')
				}
				bw.WriteString(strconv.Itoa(id))
			}
		}
		bw.WriteByte('\n')
		if err != nil {
			break
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("tokenize: %w", err)
	}
	return nil
}

func parseIDs(s string, vocab int) ([]int, error) {
	fields := strings.Fields(s)
	ids := make([]int, 0, len(fields))
	for _, f := range fields {
		id, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("bad id %q", f)
		}
		if id < 0 || id >= vocab {
			return nil, fmt.Errorf("id %d outside the vocabulary of %d", id, vocab)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// textTokenizer is what tokenize and bundle need from either tokenizer
// kind (pipeline/tokenizer's SentencePiece, internal/bpe's
// tokenizer.json).
type textTokenizer interface {
	Encode(text string) []int
	Decode(ids []int) string
	VocabSize() int
	Marshal() []byte
}

// openTokenizer loads a tokenizer from any file that holds one, telling the
// kinds apart by content: a model file or .task bundle, a GGUF file or
// Hugging Face directory (the tokenizer run would use), a tokenizer.json,
// a SentencePiece ModelProto, or a llama2.c tokenizer.bin.
func openTokenizer(path string) (textTokenizer, error) {
	isModel, err := modelFileKind(path)
	if err != nil {
		return nil, err
	}
	if isModel {
		f, err := modelfile.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		b := f.Tokenizer()
		if b == nil {
			return nil, fmt.Errorf("%s: the model file has no tokenizer", path)
		}
		return loadTokenizerBytes(path, append([]byte(nil), b...))
	}
	// Tokenizer files come before llama2.c checkpoints: a tokenizer.bin
	// can pass for a checkpoint's header.
	format, _ := checkpoint.Detect(path)
	if format == checkpoint.FormatGGUF || format == checkpoint.FormatHF {
		return tokenizerOfCheckpoint(path, format)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if modelfile.IsTokenizerJSON(data) {
		return loadTokenizerBytes(path, data)
	}
	tok, protoErr := tokenizer.Load(data)
	if protoErr == nil {
		return tok, nil
	}
	v, binErr := llama2c.ParseTokenizer(data, 0)
	if binErr != nil && format == checkpoint.FormatLlama2c {
		return nil, fmt.Errorf("%s: a llama2.c checkpoint carries no tokenizer: give its tokenizer (tokenizer.bin or a SentencePiece .model)", path)
	}
	if binErr != nil {
		return nil, fmt.Errorf("%s: not a model file, tokenizer.json, SentencePiece model (%v) or llama2.c tokenizer.bin (%v)", path, protoErr, binErr)
	}
	b, err := tokenizerFromVocab(v)
	if err != nil {
		return nil, err
	}
	return tokenizer.Load(b)
}

// tokenizerOfCheckpoint is the tokenizer of the checkpoint at path as run
// would use it: a GGUF file's vocabulary, a Hugging Face directory's
// tokenizer.model or tokenizer.json.
func tokenizerOfCheckpoint(path, format string) (textTokenizer, error) {
	ck, err := checkpoint.Load(path, checkpoint.Options{Format: format})
	if err != nil {
		return nil, err
	}
	b, err := pipeline.TokenizerBytes(ck)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if b == nil {
		return nil, fmt.Errorf("%s: the %s checkpoint carries no tokenizer gpurun reads", path, format)
	}
	return loadTokenizerBytes(path, b)
}

// loadTokenizerBytes loads a stored tokenizer of either kind.
func loadTokenizerBytes(path string, b []byte) (textTokenizer, error) {
	var (
		tok textTokenizer
		err error
	)
	if modelfile.IsTokenizerJSON(b) {
		tok, err = bpe.Load(b)
	} else {
		tok, err = tokenizer.Load(b)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tok, nil
}

func tokenizerFromVocab(v *model.Vocab) ([]byte, error) {
	return tokenizer.FromVocab(v)
}
