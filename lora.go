package gpurun

import (
	"context"
	"fmt"
	"strings"

	"github.com/gpurun/gpurun/internal/checkpoint"
	"github.com/gpurun/gpurun/internal/lora"
	"github.com/gpurun/gpurun/pipeline"
)

// WithLoRA applies a LoRA adapter at the given scale (1 is the adapter as
// trained; llama.cpp's --lora-scaled): a GGUF adapter (llama.cpp's
// convert_lora_to_gguf.py) or a Hugging Face PEFT directory. Repeat it for
// several adapters; their updates add up. The adapters are merged into the
// weights when the model loads (W' = W + scale·B·A, no cost per token), so
// they are fixed for the model's life. Weights stored as I8/I4 (GGUF Q8_0,
// Q4_0) or K-quant blocks become F32 where an adapter changes them, unless
// WithLoRARequantize. Merged adapters apply to checkpoints (GGUF, Hugging
// Face, llama2.c), not to converted .tflite/.task files: merge them with
// `gpurun convert --lora` instead, or apply them unmerged
// (WithUnmergedLoRA).
func WithLoRA(path string, scale float32) Option {
	return func(o *openOptions) { o.lora = append(o.lora, lora.Spec{Path: path, Scale: scale}) }
}

// WithUnmergedLoRA keeps WithLoRA's adapters apart from the weights and
// applies them at run time, y = W·x + s·B·(A·x) after each adapted
// projection (two small products more per projection, on every backend),
// instead of merging them at load. The base weights are untouched, so
// quantized weights stay as they are and converted model files take
// adapters too.
func WithUnmergedLoRA() Option { return func(o *openOptions) { o.loraUnmerged = true } }

// WithLoRARequantize stores the I8/I4 weights an adapter changes in their
// type again (same blocks, same scale type) instead of F32: the model stays
// as small as the base, at the cost of one more rounding of each merged
// weight (on the Q8_0 test model the logits move 0.03 from llama.cpp's
// unmerged run, against 0.006 for the F32 merge).
func WithLoRARequantize() Option { return func(o *openOptions) { o.loraRequant = true } }

// mergeLoRA loads the adapters of o and merges them into src, or keeps
// them in o.loraApplied with WithUnmergedLoRA.
func mergeLoRA(src *source, o *openOptions) error {
	if len(o.lora) == 0 {
		return nil
	}
	if src.ck == nil && !o.loraUnmerged {
		return fmt.Errorf("%w: LoRA adapters apply to checkpoints (GGUF, Hugging Face, llama2.c), not to a %s model file: merge them with gpurun convert --lora, or apply them unmerged", ErrOptions, src.format)
	}
	o.report("lora")
	cfg := src.config()
	list := make([]lora.Applied, 0, len(o.lora))
	for _, s := range o.lora {
		a, err := checkpoint.LoadLoRA(s.Path, &cfg)
		if err != nil {
			return err
		}
		list = append(list, lora.Applied{Adapter: a, Scale: s.Scale})
	}
	if o.loraUnmerged {
		o.loraApplied = list
		return nil
	}
	return lora.Merge(src.ck, list, lora.Options{Requantize: o.loraRequant})
}

// namedAdapter is one WithAdapter.
type namedAdapter struct {
	name string
	spec lora.Spec
}

// WithAdapter adds a variant of the model named name: the model with the
// adapter at path applied unmerged at scale, over the same copy of the base
// weights (pipeline.FromCheckpointVariants). Variants returns them; gpurun
// serve offers each as "MODEL:name". Each variant has its own slots
// (WithParallel each) and KV caches; the variants' sessions share batched
// decode steps, each row applying its own adapter. Adapters need a checkpoint (GGUF,
// Hugging Face, llama2.c); WithLoRA's adapters apply to the base and to
// every variant.
func WithAdapter(name, path string, scale float32) Option {
	return func(o *openOptions) {
		o.adapters = append(o.adapters, namedAdapter{name: name, spec: lora.Spec{Path: path, Scale: scale}})
	}
}

// Variants are the WithAdapter models by name (nil without any): each
// shares this model's weights and backend, takes the same GenerateOptions
// and is closed with this model (its own Close does nothing).
func (m *Model) Variants() map[string]*Model {
	if len(m.variants) == 0 {
		return nil
	}
	out := make(map[string]*Model, len(m.variants))
	for name, v := range m.variants {
		out[name] = &Model{pm: v, path: m.path, format: m.format, template: m.template, noTokReason: m.noTokReason, variantOf: m}
	}
	return out
}

// adapterSets loads the WithAdapter adapters: the base set (WithLoRA's
// unmerged adapters, if any), then one set per WithAdapter with the base
// set's adapters and its own.
func adapterSets(src *source, o *openOptions) ([][]lora.Applied, error) {
	if src.ck == nil {
		return nil, fmt.Errorf("%w: adapters served beside the model need a checkpoint (GGUF, Hugging Face, llama2.c), not a %s model file", ErrOptions, src.format)
	}
	sets := [][]lora.Applied{o.loraApplied}
	seen := map[string]bool{}
	for _, na := range o.adapters {
		if na.name == "" || seen[na.name] || strings.ContainsAny(na.name, " \t\n") {
			return nil, fmt.Errorf("%w: adapter name %q: empty, repeated or with white space", ErrOptions, na.name)
		}
		seen[na.name] = true
		a, err := checkpoint.LoadLoRA(na.spec.Path, &src.ck.Config)
		if err != nil {
			return nil, err
		}
		sets = append(sets, append(append([]lora.Applied(nil), o.loraApplied...), lora.Applied{Adapter: a, Scale: na.spec.Scale}))
	}
	return sets, nil
}

// openVariants loads src once with the adapter sets of adapterSets.
func (m *Model) openVariants(ctx context.Context, src *source, o *openOptions, popts pipeline.Options, sets [][]lora.Applied) error {
	popts.LoRA = nil
	if popts.Backend == nil {
		return fmt.Errorf("%w: no backend", ErrOptions)
	}
	models, err := pipeline.FromCheckpointVariants(ctx, src.ck, popts, sets)
	if err != nil {
		return err
	}
	m.pm = models[0]
	m.variants = map[string]*pipeline.Model{}
	for i, na := range o.adapters {
		m.variants[na.name] = models[i+1]
	}
	return nil
}
