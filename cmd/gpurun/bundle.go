package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gpurun/gpurun/internal/convert"
	"github.com/gpurun/gpurun/internal/modelfile"
)

func newBundle() *cobra.Command {
	var out, tok string
	cmd := &cobra.Command{
		Use:   "bundle MODEL -t TOKENIZER -o OUT.task",
		Short: "Bundle a model file and a tokenizer into a .task file",
		Long: `Bundle packs a model file, a tokenizer (a SentencePiece .model, a
tokenizer.json, a llama2.c tokenizer.bin, or any file gpurun tokenize
accepts) and the model's
configuration into a .task bundle whose entries can be memory-mapped in place.`,
		Args: nArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" || tok == "" {
				return errors.New("-t TOKENIZER and -o OUT.task are required")
			}
			if !convert.IsTask(out) {
				return fmt.Errorf("-o %s: a bundle's name ends in .task", out)
			}
			if err := convert.CheckTarget(out); err != nil {
				return err
			}
			f, err := modelfile.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			if !f.HasConfig() {
				return fmt.Errorf("%s has no gpurun configuration; convert the checkpoint with gpurun convert", args[0])
			}
			t, err := openTokenizer(tok)
			if err != nil {
				return err
			}
			// A byte-level BPE model's embedding is often padded past its
			// tokenizer (Qwen: 151936 rows, 151669 ids).
			if t.VocabSize() > f.Config().VocabSize {
				return fmt.Errorf("tokenizer has %d ids, model vocabulary %d", t.VocabSize(), f.Config().VocabSize)
			}
			// The tensors alias the mapped input; WriteFile streams them out.
			tpl, _ := f.Metadata(convert.MetaChatTemplate)
			if err := convert.Write(out, f.Config(), f.Tensors(), convert.WriteOptions{Tokenizer: t.Marshal(), ChatTemplate: string(tpl)}); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "output .task path")
	cmd.Flags().StringVarP(&tok, "tokenizer", "t", "", "tokenizer file")
	return cmd
}
