// Package hf imports Hugging Face checkpoints: a directory with config.json,
// one or more *.safetensors files and optionally tokenizer.model. Supported
// model types: llama (with Llama 3.1's rope_scaling), mistral, gemma, gemma2,
// gemma3_text, phi (Phi-2), phi3 (LongRoPE), falcon (7B-style), stablelm,
// qwen2, qwen3, smollm3, gemma4_text (Gemma 4's text model; a
// multimodal gemma4 checkpoint imports its text model, gemma4.go), and
// the hybrids (hybrid.go): qwen3_5_text and qwen3_5_moe_text (Qwen3.5's
// text model, or a multimodal qwen3_5 / qwen3_5_moe checkpoint's), lfm2
// and granitemoehybrid (Granite 4.0 H without routed experts).
//
// Layout choices: Llama q_proj/k_proj rows (and biases) are un-permuted back
// to Meta's order so the runtime uses interleaved RoPE for every Llama source;
// the other architectures keep HF's layout with RopeHalves, as llama.cpp does.
// Gemma norm weights get 1 added so the file always holds the multiplier
// (not Gemma 4's, which are stored as the multiplier).
package hf

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/gpurun/gpurun/internal/checkpoint/verify"
	"github.com/gpurun/gpurun/internal/safetensors"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
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
	multimodal, err := gemma4Text(raw, &hc)
	if err == nil {
		err = qwen35Text(raw, &hc)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
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
	switch {
	case multimodal:
		im.textName = gemma4TensorName
	case cfg.Arch == model.ArchQwen35 || cfg.Arch == model.ArchQwen35MoE:
		im.textName = qwen35TensorName
	}
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
	if err := im.stack(); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	// A tied model may still save lm_head.weight (a copy of the embedding).
	if hc.TieWordEmbeddings != nil && *hc.TieWordEmbeddings || isGemma(cfg.Arch) {
		ck.Tensors = slices.DeleteFunc(ck.Tensors, func(t *tensors.Tensor) bool { return t.Name == model.LMHead })
	}
	if err := verify.Complete(ck); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrFormat, dir, err)
	}
	// SentencePiece's tokenizer.model when there is one, else the
	// tokenizer.json (byte-level BPE, checked when it is loaded).
	for _, name := range []string{"tokenizer.model", "tokenizer.json"} {
		tok, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil {
			ck.Tokenizer = tok
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("hf: %w", err)
		}
	}
	if err := readTokenizerConfig(dir, &ck.Config, ck.Tokenizer); err != nil {
		return nil, err
	}
	if err := ck.Config.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrFormat, dir, err)
	}
	return ck, nil
}

// readTokenizerConfig applies tokenizer_config.json's add_bos_token when the
// file states it; otherwise, for a tokenizer.json, whether its
// post-processor puts the BOS token first (as Llama 3's TemplateProcessing
// does, and GPT-2-style ByteLevel ones do not).
func readTokenizerConfig(dir string, c *model.Config, tok []byte) error {
	raw, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if errors.Is(err, os.ErrNotExist) {
		raw, err = []byte("{}"), nil
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
	switch {
	case tc.AddBOS != nil:
		c.AddBOS = *tc.AddBOS && c.BOS >= 0
	case len(tok) > 0 && tok[0] == '{':
		first, err := postProcessorFirst(tok)
		if err != nil {
			return err
		}
		c.AddBOS = c.BOS >= 0 && first == c.BOS
	}
	return nil
}

// postProcessorFirst returns the id a tokenizer.json's TemplateProcessing
// puts before a single sequence, or -1.
func postProcessorFirst(tok []byte) (int, error) {
	var tj struct {
		PostProcessor *struct {
			Type   string `json:"type"`
			Single []struct {
				SpecialToken *struct {
					ID string `json:"id"`
				} `json:"SpecialToken"`
			} `json:"single"`
			SpecialTokens map[string]struct {
				IDs []int `json:"ids"`
			} `json:"special_tokens"`
		} `json:"post_processor"`
	}
	if err := json.Unmarshal(tok, &tj); err != nil {
		return -1, fmt.Errorf("%w: tokenizer.json: %w", ErrFormat, err)
	}
	pp := tj.PostProcessor
	if pp == nil || pp.Type != "TemplateProcessing" || len(pp.Single) == 0 || pp.Single[0].SpecialToken == nil {
		return -1, nil
	}
	if ids := pp.SpecialTokens[pp.Single[0].SpecialToken.ID].IDs; len(ids) == 1 {
		return ids[0], nil
	}
	return -1, nil
}

// importer renames and transforms tensors into ck.
type importer struct {
	ck      *model.Checkpoint
	globals map[string]target
	layers  map[string]target
	prefix  string
	// experts holds Qwen 3 MoE's per-expert matrices by stacked name
	// until stack makes each set one [experts, rows, cols] tensor.
	experts map[string][]*tensors.Tensor
	// textName, when set, maps a tensor name to the text model's, or
	// says to skip it: a multimodal checkpoint's text model is under
	// model.language_model., beside the towers' tensors
	// (gemma4TensorName, qwen35TensorName).
	textName func(string) (string, bool)
}

func (im *importer) add(f *safetensors.File, info *safetensors.TensorInfo) error {
	c := &im.ck.Config
	hfName := info.Name
	if im.textName != nil {
		var skip bool
		if hfName, skip = im.textName(hfName); skip {
			return nil
		}
	}
	tg, ok := im.globals[hfName]
	name := tg.name
	if !ok {
		layer, suffix, isLayer := parseLayer(hfName, im.prefix, c.Layers)
		if e, stacked, isExpert := expertTarget(suffix); isLayer && isExpert && c.Experts > 0 {
			return im.addExpert(f, info, model.Layer(layer, stacked), e)
		}
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
	if tg.xform == squeezeConv || tg.xform == deltaConv {
		if err := squeeze(t); err != nil {
			return err
		}
	}
	if len(t.Shape) == 0 && tg.name == model.LayerScale {
		t.Shape = []int{1} // Gemma 4's layer_scalar may be saved as a scalar
	}
	fused3D := tg.xform == experts3D || tg.xform == expertsGateUp
	if len(t.Shape) == 0 || len(t.Shape) > 2 && !fused3D {
		return fmt.Errorf("%w: tensor %q has shape %v", ErrFormat, info.Name, t.Shape)
	}
	switch tg.xform {
	case negExp, queryGate, deltaQKV, deltaConv, deltaHeads, deltaA, deltaOut, experts3D, expertsGateUp:
		layer, _, _ := parseLayer(hfName, im.prefix, c.Layers)
		parts, err := im.hybridTransform(tg, t, layer)
		if err != nil {
			return err
		}
		im.ck.Tensors = append(im.ck.Tensors, parts...)
		return nil
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
	case splitRowsQKV, splitGateUp:
		rows, names := []int{c.Heads * c.HeadDim, c.KVHeads * c.HeadDim, c.KVHeads * c.HeadDim}, []string{model.WQ, model.WK, model.WV}
		if tg.xform == splitGateUp {
			rows, names = []int{c.HiddenDim, c.HiddenDim}, []string{model.WGate, model.WUp}
		}
		parts, err := splitRows(t, rows)
		if err != nil {
			return err
		}
		layer, _, _ := parseLayer(info.Name, im.prefix, c.Layers)
		for i, p := range parts {
			p.Name = model.Layer(layer, names[i])
			im.ck.Tensors = append(im.ck.Tensors, p)
		}
		return nil
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

// addExpert keeps expert e's matrix of the stacked tensor name.
func (im *importer) addExpert(f *safetensors.File, info *safetensors.TensorInfo, name string, e int) error {
	n := im.ck.Config.Experts
	if e >= n {
		return fmt.Errorf("%w: tensor %q: expert %d of %d", ErrFormat, info.Name, e, n)
	}
	t, err := f.ToTensor(info, info.Name)
	if err != nil {
		return err
	}
	if len(t.Shape) != 2 || t.Scales != nil {
		return fmt.Errorf("%w: expert tensor %q has shape %v", ErrFormat, info.Name, t.Shape)
	}
	if im.experts == nil {
		im.experts = map[string][]*tensors.Tensor{}
	}
	set := im.experts[name]
	if set == nil {
		set = make([]*tensors.Tensor, n)
		im.experts[name] = set
	}
	if set[e] != nil {
		return fmt.Errorf("%w: tensor %q given twice", ErrFormat, info.Name)
	}
	set[e] = t
	return nil
}

// stack makes each set of expert matrices one tensor [experts, rows, cols]
// in expert order. The safetensors files interleave the experts' gate, up
// and down matrices, so this copies them once, at load.
func (im *importer) stack() error {
	names := make([]string, 0, len(im.experts))
	for name := range im.experts {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		set := im.experts[name]
		first := set[0]
		for e, t := range set {
			if t == nil {
				return fmt.Errorf("%w: %s: expert %d missing", ErrFormat, name, e)
			}
			if t.DType != first.DType || !slices.Equal(t.Shape, first.Shape) {
				return fmt.Errorf("%w: %s: expert %d is %s %v, expert 0 %s %v", ErrFormat, name, e, t.DType, t.Shape, first.DType, first.Shape)
			}
		}
		data := make([]byte, 0, len(set)*len(first.Data))
		for _, t := range set {
			data = append(data, t.Data...)
		}
		im.ck.Tensors = append(im.ck.Tensors, &tensors.Tensor{Name: name, DType: first.DType,
			Shape: []int{len(set), first.Shape[0], first.Shape[1]}, Data: data})
	}
	im.experts = nil
	return nil
}

// isRotaryBuffer matches RoPE frequency buffers some exports save
// ("self_attn.rotary_emb.inv_freq"); they are derived from the config.
func isRotaryBuffer(suffix string) bool {
	return filepath.Ext(suffix) == ".inv_freq"
}
