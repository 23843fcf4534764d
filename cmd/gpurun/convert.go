package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/internal/checkpoint"
	"github.com/gpurun/gpurun/internal/convert"
	"github.com/gpurun/gpurun/pipeline"
	"github.com/gpurun/gpurun/tensors/model"
)

func newConvert() *cobra.Command {
	var (
		out, tok, quant, format, acts string
		template                      string
		quiet                         bool
		lf                            loraFlags
	)
	cmd := &cobra.Command{
		Use:   "convert INPUT -o OUT.tflite|OUT.task",
		Short: "Convert a llama2.c, GGUF or Hugging Face checkpoint into a model file or .task bundle",
		Long: `Convert reads a checkpoint (a llama2.c .bin, a GGUF file, or a Hugging Face
directory with config.json and *.safetensors; the format is detected from the
content unless --format says otherwise), quantizes it per --quant and writes a
TFLite-flatbuffer model file, or a .task bundle when OUT ends in .task.

Recipes: ` + strings.Join(convert.Recipes, ", ") + `. "keep" stores every tensor in
its imported type (GGUF Q8_0/Q4_0 blocks stay bit-exact).

--lora FILE[:SCALE] (repeatable) merges LoRA adapters into the weights
before quantizing, so the output runs the adapted model with no adapter.`,
		Args: nArgs(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return fmt.Errorf("-o OUT is required")
			}
			if err := convert.CheckTarget(out); err != nil {
				return err
			}
			ctx := cmd.Context()
			chatTemplate := gpurun.ChatTemplateOf(args[0])
			if template != "" {
				data, err := os.ReadFile(template)
				if err != nil {
					return fmt.Errorf("--chat-template: %w", err)
				}
				chatTemplate = string(data)
			}
			ck, err := checkpoint.Load(args[0], checkpoint.Options{Format: format, Tokenizer: tok})
			if err != nil {
				return err
			}
			if err := lf.merge(ck); err != nil {
				return err
			}
			notef := func(f string, a ...any) {
				if !quiet {
					fmt.Fprintf(cmd.ErrOrStderr(), "note: "+f+"\n", a...)
				}
			}
			ts, err := convert.Tensors(ctx, ck, convert.Options{Recipe: quant, Notef: notef})
			if err != nil {
				return err
			}
			cfg := ck.Config
			if acts != "" {
				cfg.Activations = acts
			}
			tokBytes, err := checkpointTokenizer(ck)
			if err != nil {
				return err
			}
			if tokBytes == nil && convert.IsTask(out) {
				return fmt.Errorf("a .task bundle needs a tokenizer: pass --tokenizer FILE")
			}
			var total int64
			for _, t := range ts {
				total += int64(len(t.Data))
			}
			bar := newBar(total, "writing "+out, quiet)
			err = convert.Write(out, cfg, ts, convert.WriteOptions{Tokenizer: tokBytes, ChatTemplate: chatTemplate,
				Progress: func(done, _ int64) { _ = bar.Set64(done) }})
			_ = bar.Finish()
			if err != nil {
				return err
			}
			if !quiet {
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %s, %d tensors, %s of weights (%s)\n",
					out, cfg.Arch, len(ts), humanBytes(total), recipeName(quant))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "output path (.tflite model file or .task bundle)")
	f.StringVar(&tok, "tokenizer", "", "tokenizer: SentencePiece .model, tokenizer.json or llama2.c tokenizer.bin (GGUF and HF bring their own)")
	quant = convert.Keep
	f.Var(&choiceFlag{&quant, convert.Recipes}, "quant", "quantization recipe: "+strings.Join(convert.Recipes, "|"))
	f.Var(&choiceFlag{&format, []string{checkpoint.FormatLlama2c, checkpoint.FormatGGUF, checkpoint.FormatHF}}, "format", "input format: llama2c|gguf|hf (default: detect from content)")
	f.Var(&choiceFlag{&acts, []string{model.PolicyAuto, model.PolicyF32, model.PolicyF16}}, "activations", "activation precision policy stored in the model: auto|f32|f16 (default: the architecture's)")
	f.StringVar(&template, "chat-template", "", "a Jinja chat template FILE to store in the model (default: the checkpoint's own, from a GGUF file or a Hugging Face directory)")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress or summary on stderr")
	lf.register(f)
	return cmd
}

func recipeName(q string) string {
	if q == "" {
		return convert.Keep
	}
	return q
}

// checkpointTokenizer returns the tokenizer to store for ck (see
// pipeline.TokenizerBytes).
func checkpointTokenizer(ck *model.Checkpoint) ([]byte, error) {
	return pipeline.TokenizerBytes(ck)
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
