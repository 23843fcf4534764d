package gguf

import (
	"fmt"
	"math"
	"strings"

	"github.com/gpurun/gpurun/internal/lora"
	"github.com/gpurun/gpurun/tensors/model"
)

// IsAdapter reports whether the file is an adapter (general.type "adapter")
// rather than a model.
func (f *File) IsAdapter() bool {
	v, ok := f.Get("general.type")
	s, _ := v.Str()
	return ok && s == "adapter"
}

// loraTargets are the per-layer weights an adapter may target.
var loraTargets = map[string]bool{
	model.WQ: true, model.WK: true, model.WV: true, model.WO: true,
	model.WGate: true, model.WUp: true, model.WDown: true,
}

// LoRA imports the file as a LoRA adapter for a model of configuration c,
// as llama.cpp's convert_lora_to_gguf.py writes one: general.type
// "adapter", adapter.type "lora", adapter.lora.alpha (0 when absent, as
// llama.cpp reads it), general.architecture, and per target weight W the
// pair "W.lora_a" (ggml [in, r]) and "W.lora_b" ([r, out]) in any element
// type the model loader reads. Fused projections (attn_qkv; Phi 3's
// ffn_up) are split like the base weights: the parts share A and take
// their rows of B. Malformed files give ErrFormat (with lora.ErrFormat);
// pairs whose shapes do not fit c give lora.ErrMismatch.
func (f *File) LoRA(c *model.Config) (*lora.Adapter, error) {
	if !f.IsAdapter() {
		return nil, fmt.Errorf("%w: %w: general.type is not \"adapter\" (is this a model file?)", ErrFormat, lora.ErrFormat)
	}
	if v, _ := f.Get("adapter.type"); func() bool { s, _ := v.Str(); return s != "lora" }() {
		return nil, fmt.Errorf("%w: adapter.type is %s, want \"lora\"", lora.ErrUnsupported, v)
	}
	a := &lora.Adapter{Arch: f.Architecture()}
	if a.Arch == "" {
		return nil, fmt.Errorf("%w: %w: no general.architecture", ErrFormat, lora.ErrFormat)
	}
	if a.Arch != c.Arch {
		return nil, fmt.Errorf("%w: adapter for architecture %q, model is %q", lora.ErrMismatch, a.Arch, c.Arch)
	}
	if v, ok := f.Get("adapter.lora.alpha"); ok {
		x, ok := v.Float()
		if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%w: %w: adapter.lora.alpha = %s is not a finite float", ErrFormat, lora.ErrFormat, v)
		}
		a.Alpha = float32(x)
	}
	type ab struct{ a, b *TensorInfo }
	pairs := map[string]*ab{}
	var order []string
	for i := range f.Tensors {
		info := &f.Tensors[i]
		base, isA := strings.CutSuffix(info.Name, ".lora_a")
		isB := false
		if !isA {
			base, isB = strings.CutSuffix(info.Name, ".lora_b")
		}
		if !isA && !isB {
			return nil, fmt.Errorf("%w: tensor %q is neither a .lora_a nor a .lora_b", lora.ErrUnsupported, info.Name)
		}
		p := pairs[base]
		if p == nil {
			p = &ab{}
			pairs[base] = p
			order = append(order, base)
		}
		slot := &p.b
		if isA {
			slot = &p.a
		}
		if *slot != nil {
			return nil, fmt.Errorf("%w: %w: tensor %q twice", ErrFormat, lora.ErrFormat, info.Name)
		}
		*slot = info
	}
	for _, base := range order {
		p := pairs[base]
		if p.a == nil || p.b == nil {
			return nil, fmt.Errorf("%w: %w: %s has only one of lora_a and lora_b", ErrFormat, lora.ErrFormat, base)
		}
		ps, err := f.loraPair(base, p.a, p.b, c)
		if err != nil {
			return nil, err
		}
		a.Pairs = append(a.Pairs, ps...)
	}
	return a, nil
}

// loraPair reads one pair and splits it over the targets of base.
func (f *File) loraPair(base string, ai, bi *TensorInfo, c *model.Config) ([]lora.Pair, error) {
	if len(ai.Dims) != 2 || len(bi.Dims) != 2 {
		return nil, fmt.Errorf("%w: %w: %s: lora_a %v and lora_b %v are not matrices", ErrFormat, lora.ErrFormat, base, ai.Dims, bi.Dims)
	}
	in, rank, out := ai.Dims[0], ai.Dims[1], bi.Dims[1]
	if bi.Dims[0] != rank {
		return nil, fmt.Errorf("%w: %s: lora_a has rank %d, lora_b %d", lora.ErrMismatch, base, rank, bi.Dims[0])
	}
	targets, rows, err := loraNames(base, c)
	if err != nil {
		return nil, err
	}
	total := 0
	for _, r := range rows {
		total += r
	}
	if out != total {
		return nil, fmt.Errorf("%w: %s: lora_b has %d output rows, the model's weight %d", lora.ErrMismatch, base, out, total)
	}
	if in != c.Dim && in != c.HiddenDim && in != c.Heads*c.HeadDim {
		return nil, fmt.Errorf("%w: %s: lora_a has %d inputs, which no projection of the model has", lora.ErrMismatch, base, in)
	}
	av, err := f.loraValues(ai)
	if err != nil {
		return nil, err
	}
	bv, err := f.loraValues(bi)
	if err != nil {
		return nil, err
	}
	var ps []lora.Pair
	start := 0
	for i, name := range targets {
		ps = append(ps, lora.Pair{Target: name, Rank: rank, In: in, Out: rows[i], A: av, B: bv[start*rank : (start+rows[i])*rank]})
		start += rows[i]
	}
	return ps, nil
}

func (f *File) loraValues(info *TensorInfo) ([]float32, error) {
	t, err := f.ImportTensor(info)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", lora.ErrFormat, err)
	}
	v, err := t.Float32()
	if err != nil {
		return nil, fmt.Errorf("%w: %w: tensor %q: %w", ErrFormat, lora.ErrFormat, info.Name, err)
	}
	return v, nil
}

// loraNames maps a GGUF weight name to our targets and their output rows.
func loraNames(base string, c *model.Config) ([]string, []int, error) {
	layer, suffix, err := splitName(base, c.Layers)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", lora.ErrMismatch, err)
	}
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	switch {
	case layer < 0 && suffix == "output.weight":
		return []string{model.LMHead}, []int{c.VocabSize}, nil
	case layer < 0:
		return nil, nil, fmt.Errorf("%w: target %q (gpurun applies adapters to attention, FFN and output projections)", lora.ErrUnsupported, base)
	case suffix == fusedQKV:
		return []string{model.Layer(layer, model.WQ), model.Layer(layer, model.WK), model.Layer(layer, model.WV)}, []int{q, kv, kv}, nil
	case suffix == fusedUp && c.Arch == model.ArchPhi3:
		return []string{model.Layer(layer, model.WGate), model.Layer(layer, model.WUp)}, []int{c.HiddenDim, c.HiddenDim}, nil
	}
	name, ok := layerNames[suffix]
	if !ok || !loraTargets[name] {
		return nil, nil, fmt.Errorf("%w: target %q (gpurun applies adapters to attention, FFN and output projections)", lora.ErrUnsupported, base)
	}
	rows := map[string]int{model.WQ: q, model.WK: kv, model.WV: kv, model.WO: c.Dim, model.WGate: c.HiddenDim, model.WUp: c.HiddenDim, model.WDown: c.Dim}[name]
	return []string{model.Layer(layer, name)}, []int{rows}, nil
}
