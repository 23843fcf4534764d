package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

func newEmbed() *cobra.Command {
	var (
		mf          modelFlags
		prompts     []string
		noNormalize bool
	)
	cmd := &cobra.Command{
		Use:   "embed MODEL [-p TEXT]... [--no-normalize]",
		Short: "Print the embedding of each text from an embedding model, one JSON array a line",
		Long: `Embed runs an embedding model (a GGUF with <arch>.pooling_type:
gemma-embedding, Qwen3-Embedding, BERT) on each -p TEXT, or on each line of
standard input without -p, and prints one line per input: the embedding
as a JSON array. The text gets the special tokens the model adds (BOS,
EOS as llama.cpp adds them); the vector is pooled as the model declares
(mean, CLS or last token) and L2-normalized, as llama-embedding's default,
unless --no-normalize. An input must fit in --max-cache tokens.`,
		Args: nArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := mf.takeModelArg(cmd, args); err != nil {
				return err
			}
			m, err := mf.open(cmd)
			if err != nil {
				return err
			}
			defer m.Close()
			if m.Pooling() == "" {
				return fmt.Errorf("%s: not an embedding model (its file declares no pooling type)", mf.model)
			}
			w := bufio.NewWriter(cmd.OutOrStdout())
			defer w.Flush()
			one := func(text string) error {
				v, err := m.Embed(cmd.Context(), text, !noNormalize)
				if err != nil {
					return fmt.Errorf("%q: %w", text, err)
				}
				data, err := json.Marshal(v)
				if err != nil {
					return err
				}
				w.Write(append(data, '\n'))
				return w.Flush()
			}
			if len(prompts) > 0 {
				for _, p := range prompts {
					if err := one(p); err != nil {
						return err
					}
				}
				return nil
			}
			br := bufio.NewReader(cmd.InOrStdin())
			for {
				line, err := br.ReadString('\n')
				if line = strings.TrimSuffix(line, "\n"); line != "" {
					if err := one(line); err != nil {
						return err
					}
				}
				if errors.Is(err, io.EOF) {
					return nil
				}
				if err != nil {
					return fmt.Errorf("reading standard input: %w", err)
				}
			}
		},
	}
	mf.register(cmd)
	cmd.Flags().StringArrayVarP(&prompts, "prompt", "p", nil, "text to embed (repeatable; default: each line of standard input)")
	cmd.Flags().BoolVar(&noNormalize, "no-normalize", false, "print the pooled vector as it is, not L2-normalized")
	return cmd
}
