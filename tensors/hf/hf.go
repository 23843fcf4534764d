// Package hf imports Hugging Face checkpoints: a directory with config.json,
// one or more *.safetensors files and optionally tokenizer.model. Supported
// model types: llama, gemma, gemma2, phi (Phi-2), falcon (7B-style) and
// stablelm.
//
// Layout choices: Llama q_proj/k_proj rows (and biases) are un-permuted back
// to Meta's order so the runtime uses interleaved RoPE for every Llama source;
// the other architectures keep HF's layout with RopeHalves, as llama.cpp does.
// Gemma norm weights get 1 added so the file always holds the multiplier.
package hf

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/checkpoint/verify"
	"github.com/gpurun/gpurun/tensors/model"
	"github.com/gpurun/gpurun/tensors/safetensors"
)

var (
	// ErrFormat reports a malformed or inconsistent checkpoint directory.
	ErrFormat = errors.New("hf: malformed checkpoint")
	// ErrUnsupported reports a model type, option or tensor this importer
	// does not handle.
	ErrUnsupported = errors.New("hf: unsupported")
)

// Load imports the Hugging Face checkpoint in dir. Tensors that need no
// transform alias the memory-mapped safetensors files.
func Load(dir string) (*model.Checkpoint, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, fmt.Errorf("hf: %w", err)
	}
	var hc hfConfig
	if err := json.Unmarshal(raw, &hc); err != nil {
		return nil, fmt.Errorf("%w: config.json: %w", ErrFormat, err)
	}
	cfg, err := hc.config()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("%w: no *.safetensors in %s", ErrFormat, dir)
	}
	slices.Sort(files)
	ck := &model.Checkpoint{Config: cfg}
	im := importer{ck: ck, globals: globals(cfg.Arch), layers: layerTargets(cfg.Arch), prefix: layerPrefix(cfg.Arch)}
	for _, path := range files {
		f, err := safetensors.Open(path)
		if err != nil {
			return nil, fmt.Errorf("hf: %w", err)
		}
		for i := range f.Tensors {
			if err := im.add(f, &f.Tensors[i]); err != nil {
				return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
			}
		}
	}
	// A tied model may still save lm_head.weight (a copy of the embedding).
	if hc.TieWordEmbeddings != nil && *hc.TieWordEmbeddings || cfg.Arch == model.ArchGemma || cfg.Arch == model.ArchGemma2 {
		ck.Tensors = slices.DeleteFunc(ck.Tensors, func(t *tensors.Tensor) bool { return t.Name == model.LMHead })
	}
	if err := verify.Complete(ck); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrFormat, dir, err)
	}
	if tok, err := os.ReadFile(filepath.Join(dir, "tokenizer.model")); err == nil {
		ck.Tokenizer = tok
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("hf: %w", err)
	}
	if err := readTokenizerConfig(dir, &ck.Config); err != nil {
		return nil, err
	}
	if err := ck.Config.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrFormat, dir, err)
	}
	return ck, nil
}

// readTokenizerConfig applies tokenizer_config.json's add_bos_token when the
// file states it.
func readTokenizerConfig(dir string, c *model.Config) error {
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	var tc struct {
		AddBOS *bool `json:"add_bos_token"`
	}
	if err := json.Unmarshal(raw, &tc); err != nil {
		return fmt.Errorf("%w: tokenizer_config.json: %w", ErrFormat, err)
	}
	if tc.AddBOS != nil {
		c.AddBOS = *tc.AddBOS && c.BOS >= 0
	}
	return nil
}

// importer renames and transforms tensors into ck.
type importer struct {
	ck      *model.Checkpoint
	globals map[string]target
	layers  map[string]target
	prefix  string
}

func (im *importer) add(f *safetensors.File, info *safetensors.TensorInfo) error {
	c := &im.ck.Config
	tg, ok := im.globals[info.Name]
	name := tg.name
	if !ok {
		layer, suffix, isLayer := parseLayer(info.Name, im.prefix, c.Layers)
		if tg, ok = im.layers[suffix]; !isLayer || !ok {
			if isRotaryBuffer(suffix) {
				return nil // recomputed at run time
			}
			return fmt.Errorf("%w: tensor %q", ErrUnsupported, info.Name)
		}
		name = model.Layer(layer, tg.name)
	}
	t, err := f.ToTensor(info, name)
	if err != nil {
		return err
	}
	if len(t.Shape) == 0 || len(t.Shape) > 2 {
		return fmt.Errorf("%w: tensor %q has shape %v", ErrFormat, info.Name, t.Shape)
	}
	switch tg.xform {
	case unpermute:
		heads := c.KVHeads
		if tg.heads {
			heads = c.Heads
		}
		if t, err = unpermuteRows(t, heads, c.HeadDim); err != nil {
			return err
		}
	case plusOne:
		if t, err = addOne(t); err != nil {
			return err
		}
	case splitQKV:
		q, k, v, err := splitFusedQKV(t, c.Heads, c.KVHeads, c.HeadDim)
		if err != nil {
			return err
		}
		names := [3]string{model.WQ, model.WK, model.WV}
		if tg.name == model.BQ {
			names = [3]string{model.BQ, model.BK, model.BV}
		}
		layer, _, _ := parseLayer(info.Name, im.prefix, c.Layers)
		for i, p := range []*tensors.Tensor{q, k, v} {
			p.Name = model.Layer(layer, names[i])
			im.ck.Tensors = append(im.ck.Tensors, p)
		}
		return nil
	}
	im.ck.Tensors = append(im.ck.Tensors, t)
	return nil
}

// isRotaryBuffer matches RoPE frequency buffers some exports save
// ("self_attn.rotary_emb.inv_freq"); they are derived from the config.
func isRotaryBuffer(suffix string) bool {
	return filepath.Ext(suffix) == ".inv_freq"
}
