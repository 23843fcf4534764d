package hf

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpurun/gpurun/internal/lora"
	"github.com/gpurun/gpurun/internal/safetensors"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// PEFT file names in an adapter directory.
const (
	PEFTConfig  = "adapter_config.json"
	PEFTWeights = "adapter_model.safetensors"
)

// peftConfig is what gpurun reads of adapter_config.json.
type peftConfig struct {
	PEFTType      string          `json:"peft_type"`
	R             *int            `json:"r"`
	Alpha         *float64        `json:"lora_alpha"`
	RSLoRA        bool            `json:"use_rslora"`
	DoRA          bool            `json:"use_dora"`
	FanInFanOut   bool            `json:"fan_in_fan_out"`
	Bias          string          `json:"bias"`
	RankPattern   map[string]any  `json:"rank_pattern"`
	AlphaPattern  map[string]any  `json:"alpha_pattern"`
	ModulesToSave json.RawMessage `json:"modules_to_save"`
	// TargetModules is a list of module names or a regular expression;
	// gpurun takes the targets from the tensors present.
	TargetModules json.RawMessage `json:"target_modules"`
}

// LoadLoRA reads a Hugging Face PEFT LoRA directory (adapter_config.json
// and adapter_model.safetensors) as an adapter for a model of
// configuration c.
func LoadLoRA(dir string, c *model.Config) (*lora.Adapter, error) {
	cfg, err := os.ReadFile(filepath.Join(dir, PEFTConfig))
	if err != nil {
		return nil, fmt.Errorf("hf: lora: %w", err)
	}
	// Read, not mapped: the adapter is small and its values are copied.
	data, err := os.ReadFile(filepath.Join(dir, PEFTWeights))
	if err != nil {
		return nil, fmt.Errorf("hf: lora: %w", err)
	}
	st, err := safetensors.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", lora.ErrFormat, err)
	}
	return ParseLoRA(cfg, st, c)
}

// ParseLoRA imports a PEFT adapter from its adapter_config.json and its
// parsed weights. Each lora_A [r, in] / lora_B [out, r] pair of a module
// becomes a pair on the weight the module's base tensor imports as, with
// the same transform (Llama q/k rows permuted; fused qkv_proj, gate_up_proj
// and Falcon query_key_value split, the parts sharing A). The scale is
// lora_alpha/r (lora_alpha/√r with use_rslora). Options that change the
// arithmetic (DoRA, per-module rank or alpha patterns, trained biases or
// modules_to_save, fan_in_fan_out) are lora.ErrUnsupported.
func ParseLoRA(config []byte, st *safetensors.File, c *model.Config) (*lora.Adapter, error) {
	var pc peftConfig
	if err := json.Unmarshal(config, &pc); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", lora.ErrFormat, PEFTConfig, err)
	}
	switch {
	case pc.PEFTType != "" && pc.PEFTType != "LORA":
		return nil, fmt.Errorf("%w: peft_type %q", lora.ErrUnsupported, pc.PEFTType)
	case pc.DoRA:
		return nil, fmt.Errorf("%w: use_dora", lora.ErrUnsupported)
	case pc.FanInFanOut:
		return nil, fmt.Errorf("%w: fan_in_fan_out", lora.ErrUnsupported)
	case pc.Bias != "" && pc.Bias != "none":
		return nil, fmt.Errorf("%w: bias %q (trained biases)", lora.ErrUnsupported, pc.Bias)
	case len(pc.RankPattern) > 0 || len(pc.AlphaPattern) > 0:
		return nil, fmt.Errorf("%w: rank_pattern / alpha_pattern", lora.ErrUnsupported)
	case len(pc.ModulesToSave) > 0 && string(pc.ModulesToSave) != "null" && string(pc.ModulesToSave) != "[]":
		return nil, fmt.Errorf("%w: modules_to_save (fully trained modules)", lora.ErrUnsupported)
	}
	r, alpha := 8, 8.0 // PEFT's defaults
	if pc.R != nil {
		r = *pc.R
	}
	if pc.Alpha != nil {
		alpha = *pc.Alpha
	}
	if r <= 0 || r > 1<<16 || math.IsNaN(alpha) || math.IsInf(alpha, 0) {
		return nil, fmt.Errorf("%w: r %d, lora_alpha %v", lora.ErrFormat, r, alpha)
	}
	a := &lora.Adapter{Alpha: float32(alpha)}
	if pc.RSLoRA {
		// Pair scale Alpha/r must be lora_alpha/√r.
		a.Alpha = float32(alpha * math.Sqrt(float64(r)))
	}
	type ab struct{ a, b *safetensors.TensorInfo }
	pairs := map[string]*ab{}
	var order []string
	for i := range st.Tensors {
		info := &st.Tensors[i]
		name := strings.TrimPrefix(info.Name, "base_model.model.")
		mod, isA := strings.CutSuffix(name, ".lora_A.weight")
		isB := false
		if !isA {
			mod, isB = strings.CutSuffix(name, ".lora_B.weight")
		}
		if !isA && !isB {
			return nil, fmt.Errorf("%w: tensor %q is neither a lora_A nor a lora_B weight", lora.ErrUnsupported, info.Name)
		}
		p := pairs[mod]
		if p == nil {
			p = &ab{}
			pairs[mod] = p
			order = append(order, mod)
		}
		slot := &p.b
		if isA {
			slot = &p.a
		}
		if *slot != nil {
			return nil, fmt.Errorf("%w: %s twice", lora.ErrFormat, info.Name)
		}
		*slot = info
	}
	for _, mod := range order {
		p := pairs[mod]
		if p.a == nil || p.b == nil {
			return nil, fmt.Errorf("%w: %s has only one of lora_A and lora_B", lora.ErrFormat, mod)
		}
		ps, err := peftPair(st, mod, p.a, p.b, r, c)
		if err != nil {
			return nil, err
		}
		a.Pairs = append(a.Pairs, ps...)
	}
	return a, nil
}

// peftPair imports the pair of module mod (its name without the PEFT
// prefix, such as "model.layers.0.self_attn.q_proj").
func peftPair(st *safetensors.File, mod string, ai, bi *safetensors.TensorInfo, r int, c *model.Config) ([]lora.Pair, error) {
	at, err := st.ToTensor(ai, ai.Name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", lora.ErrFormat, err)
	}
	bt, err := st.ToTensor(bi, bi.Name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", lora.ErrFormat, err)
	}
	if len(at.Shape) != 2 || len(bt.Shape) != 2 || at.Shape[0] != bt.Shape[1] {
		return nil, fmt.Errorf("%w: %s: lora_A %v and lora_B %v are not [r, in] and [out, r]", lora.ErrFormat, mod, at.Shape, bt.Shape)
	}
	if at.Shape[0] != r {
		return nil, fmt.Errorf("%w: %s has rank %d, adapter_config.json r %d", lora.ErrFormat, mod, at.Shape[0], r)
	}
	weight := mod + ".weight"
	var tg target
	layer := -1
	if g, ok := globals(c.Arch)[weight]; ok && g.name == model.LMHead {
		tg = g
	} else {
		l, suffix, isLayer := parseLayer(weight, layerPrefix(c.Arch), c.Layers)
		t, ok := layerTargets(c.Arch)[suffix]
		if !isLayer || !ok || !isLoRATarget(t) {
			return nil, fmt.Errorf("%w: module %q is no attention, FFN or output projection of a %s model with %d layers", lora.ErrMismatch, mod, c.Arch, c.Layers)
		}
		tg, layer = t, l
	}
	name := func(s string) string {
		if layer < 0 {
			return s
		}
		return model.Layer(layer, s)
	}
	var parts []*tensors.Tensor
	var names []string
	switch tg.xform {
	case unpermute:
		heads := c.KVHeads
		if tg.heads {
			heads = c.Heads
		}
		if bt, err = unpermuteRows(bt, heads, c.HeadDim); err != nil {
			return nil, fmt.Errorf("%w: %w", lora.ErrMismatch, err)
		}
		parts, names = []*tensors.Tensor{bt}, []string{tg.name}
	case splitRowsQKV, splitGateUp:
		rows, ns := []int{c.Heads * c.HeadDim, c.KVHeads * c.HeadDim, c.KVHeads * c.HeadDim}, []string{model.WQ, model.WK, model.WV}
		if tg.xform == splitGateUp {
			rows, ns = []int{c.HiddenDim, c.HiddenDim}, []string{model.WGate, model.WUp}
		}
		if parts, err = splitRows(bt, rows); err != nil {
			return nil, fmt.Errorf("%w: %w", lora.ErrMismatch, err)
		}
		names = ns
	case splitQKV:
		q, k, v, err := splitFusedQKV(bt, c.Heads, c.KVHeads, c.HeadDim)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", lora.ErrMismatch, err)
		}
		parts, names = []*tensors.Tensor{q, k, v}, []string{model.WQ, model.WK, model.WV}
	default:
		parts, names = []*tensors.Tensor{bt}, []string{tg.name}
	}
	av, err := at.Float32()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", lora.ErrFormat, err)
	}
	var ps []lora.Pair
	for i, p := range parts {
		bv, err := p.Float32()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", lora.ErrFormat, err)
		}
		ps = append(ps, lora.Pair{Target: name(names[i]), Rank: r, In: at.Shape[1], Out: p.Shape[0], A: av, B: bv})
	}
	return ps, nil
}

// isLoRATarget reports the per-layer weights an adapter may change.
func isLoRATarget(t target) bool {
	switch t.name {
	case model.WQ, model.WK, model.WV, model.WO, model.WGate, model.WUp, model.WDown:
		return true
	}
	return false
}
