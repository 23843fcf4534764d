package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpurun/gpurun"
	"github.com/gpurun/gpurun/internal/checkpoint"
	"github.com/gpurun/gpurun/internal/lora"
	"github.com/gpurun/gpurun/tensors/model"
	"github.com/spf13/pflag"
)

// loraFlags are --lora (repeatable) and --lora-requantize, shared by run,
// chat, serve, bench and convert.
type loraFlags struct {
	specs    []lora.Spec
	requant  bool
	unmerged bool
}

// loraList is the repeatable --lora FILE[:SCALE] value.
type loraList struct{ p *[]lora.Spec }

func (l loraList) Type() string { return "FILE[:SCALE]" }
func (l loraList) String() string {
	var parts []string
	for _, s := range *l.p {
		parts = append(parts, s.String())
	}
	return strings.Join(parts, ",")
}
func (l loraList) Set(s string) error {
	spec, err := lora.ParseSpec(s)
	if err != nil {
		return err
	}
	*l.p = append(*l.p, spec)
	return nil
}

func (r *loraFlags) register(f *pflag.FlagSet) {
	f.Var(loraList{&r.specs}, "lora", "LoRA adapter to merge into the weights at load, with an optional scale (default 1): a GGUF adapter "+
		"(llama.cpp's convert_lora_to_gguf.py) or a Hugging Face PEFT directory; repeat for several (their updates add up)")
	f.BoolVar(&r.requant, "lora-requantize", false, "store Q8_0/Q4_0 (int8/int4) weights an adapter changes in their type again "+
		"instead of f32: as small as the base, one more rounding of each merged weight")
}

// registerUnmerged adds --lora-unmerged (not to convert, which merges).
func (r *loraFlags) registerUnmerged(f *pflag.FlagSet) {
	f.BoolVar(&r.unmerged, "lora-unmerged", false, "apply the --lora adapters at run time (W·x + s·B·(A·x), two small products more per "+
		"adapted projection) instead of merging them into the weights at load: the base weights stay as they are (quantized ones too), "+
		"and converted model files take adapters")
}

func (r *loraFlags) options() []gpurun.Option {
	var opts []gpurun.Option
	for _, s := range r.specs {
		opts = append(opts, gpurun.WithLoRA(s.Path, s.Scale))
	}
	if r.requant {
		opts = append(opts, gpurun.WithLoRARequantize())
	}
	if r.unmerged {
		opts = append(opts, gpurun.WithUnmergedLoRA())
	}
	return opts
}

// merge merges the adapters into ck (convert --lora).
func (r *loraFlags) merge(ck *model.Checkpoint) error {
	if len(r.specs) == 0 {
		return nil
	}
	list := make([]lora.Applied, 0, len(r.specs))
	for _, s := range r.specs {
		a, err := checkpoint.LoadLoRA(s.Path, &ck.Config)
		if err != nil {
			return err
		}
		list = append(list, lora.Applied{Adapter: a, Scale: s.Scale})
	}
	return lora.Merge(ck, list, lora.Options{Requantize: r.requant})
}

// adapterFlag is serve's repeatable --adapter NAME=FILE[:SCALE].
type adapterFlag struct {
	names []string
	specs []lora.Spec
}

func (a *adapterFlag) Type() string { return "NAME=FILE[:SCALE]" }
func (a *adapterFlag) String() string {
	var parts []string
	for i, n := range a.names {
		parts = append(parts, n+"="+a.specs[i].String())
	}
	return strings.Join(parts, ",")
}
func (a *adapterFlag) Set(s string) error {
	name, file, ok := strings.Cut(s, "=")
	if !ok || name == "" || strings.ContainsAny(name, ": \t") {
		return errors.New("want NAME=FILE[:SCALE], NAME without colons or spaces")
	}
	if slices.Contains(a.names, name) {
		return fmt.Errorf("adapter %q given twice", name)
	}
	spec, err := lora.ParseSpec(file)
	if err != nil {
		return err
	}
	a.names, a.specs = append(a.names, name), append(a.specs, spec)
	return nil
}

func (a *adapterFlag) options() []gpurun.Option {
	var opts []gpurun.Option
	for i, n := range a.names {
		opts = append(opts, gpurun.WithAdapter(n, a.specs[i].Path, a.specs[i].Scale))
	}
	return opts
}
