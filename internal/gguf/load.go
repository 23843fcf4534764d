package gguf

import (
	"fmt"
	"slices"

	"github.com/gpurun/gpurun/internal/checkpoint/verify"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// Load memory-maps the GGUF file at path and imports it as a checkpoint.
func Load(path string) (*model.Checkpoint, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	ck, err := f.Checkpoint()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ck, nil
}

// Checkpoint imports the parsed file: the configuration from the metadata
// (architectures llama, including Llama 3's rope_freqs, gemma, gemma2, gemma3,
// gemma-embedding, bert,
// phi2, phi3, falcon, stablelm, qwen2, qwen3, qwen3moe, smollm3, gpt-oss,
// gemma4, lfm2, qwen35, qwen35moe, granitehybrid), the tensors
// under the names of package model, and the vocabulary.
func (f *File) Checkpoint() (*model.Checkpoint, error) {
	if f.IsAdapter() {
		return nil, fmt.Errorf("%w: a LoRA adapter (general.type adapter), not a model: apply it to its base model (--lora, gpurun.WithLoRA)", ErrUnsupported)
	}
	arch := f.Architecture()
	c, err := f.config(arch)
	if err != nil {
		return nil, err
	}
	ck := &model.Checkpoint{Config: c}
	for i := range f.Tensors {
		info := &f.Tensors[i]
		if c.Arch == model.ArchBERT {
			if t, done, err := f.bertTensor(info); done {
				if err != nil {
					return nil, err
				}
				if t != nil {
					ck.Tensors = append(ck.Tensors, t)
				}
				continue
			}
		}
		ts, err := f.importTensor(info, &ck.Config)
		if err != nil {
			return nil, err
		}
		ck.Tensors = append(ck.Tensors, ts...)
	}
	if err := verify.Complete(ck); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	if ck.Vocab, err = f.vocab(); err != nil {
		return nil, err
	}
	cfg := &ck.Config
	cfg.BOS, cfg.EOS = -1, -1
	if v := ck.Vocab; v != nil {
		if len(v.Pieces) > cfg.VocabSize {
			return nil, fmt.Errorf("%w: %d tokens for a %d-row embedding", ErrFormat, len(v.Pieces), cfg.VocabSize)
		}
		cfg.BOS, cfg.EOS = v.BOS, v.EOS
		m := &meta{f: f}
		cfg.AddBOS = m.bool("tokenizer.ggml.add_bos_token", v.BOS >= 0 && (v.Model != "gpt2" || gpt2AddsBOS[v.Pre]))
		if v.Model == "gemma4" {
			// llama.cpp adds BOS to every Gemma 4 prompt, whatever the
			// file says.
			if v.BOS < 0 {
				return nil, fmt.Errorf("%w: a gemma4 vocabulary without tokenizer.ggml.bos_token_id", ErrFormat)
			}
			cfg.AddBOS = true
		}
		if cfg.Pooling != model.PoolNone {
			// Only an embedding input ends in EOS (generation stops there).
			cfg.AddEOS = v.EOS >= 0 && m.bool("tokenizer.ggml.add_eos_token", false)
		}
		if eot := m.tokenID("tokenizer.ggml.eot_token_id", -1, len(v.Pieces)); eot >= 0 && eot != v.EOS {
			cfg.StopTokens = append(cfg.StopTokens, eot)
		}
		if v.Model == "gemma4" {
			// llama.cpp ends generation at these Gemma 4 tokens by name
			// (the end of a turn, and a tool call awaiting its result).
			for id, p := range v.Pieces {
				if (p == "<eos>" || p == "<turn|>" || p == "<|tool_response>") && id != v.EOS && !slices.Contains(cfg.StopTokens, id) {
					cfg.StopTokens = append(cfg.StopTokens, id)
				}
			}
		}
		if m.err != nil {
			return nil, m.err
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	return ck, nil
}

// importTensor converts one GGUF tensor, splitting fused QKV projections.
func (f *File) importTensor(info *TensorInfo, c *model.Config) ([]*tensors.Tensor, error) {
	layer, suffix, err := splitName(info.Name, c.Layers)
	if err != nil {
		return nil, err
	}
	if layer < 0 {
		switch suffix {
		case ropeFreqs, ropeFactorsLong, ropeFactorsShort:
			return nil, f.ropeTable(info, c)
		}
		name, ok := globalNames[suffix]
		if suffix == lfm2FinalNorm && c.Arch == model.ArchLFM2 {
			name, ok = model.FinalNorm, true
		}
		if !ok {
			return nil, fmt.Errorf("%w: tensor %q", ErrUnsupported, info.Name)
		}
		t, err := f.toTensor(info, name)
		return []*tensors.Tensor{t}, err
	}
	if c.Arch == model.ArchQwen35 || c.Arch == model.ArchQwen35MoE {
		if ts, ok, err := f.qwen35Layer(info, layer, suffix, c); ok {
			return ts, err
		}
	}
	if suffix == fusedQKV || suffix == fusedQKVBias {
		fused, err := f.toTensor(info, info.Name)
		if err != nil {
			return nil, err
		}
		names := []string{model.WQ, model.WK, model.WV}
		if suffix == fusedQKVBias {
			names = []string{model.BQ, model.BK, model.BV}
		}
		q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
		parts, err := splitFused(fused, []int{q, kv, kv})
		if err != nil {
			return nil, err
		}
		for i, p := range parts {
			p.Name = model.Layer(layer, names[i])
			if p.Scales != nil {
				p.Scales.Name = model.ScaleName(p.Name)
			}
		}
		return parts, nil
	}
	if suffix == fusedUp && c.Arch == model.ArchPhi3 {
		fused, err := f.toTensor(info, info.Name)
		if err != nil {
			return nil, err
		}
		parts, err := splitFused(fused, []int{c.HiddenDim, c.HiddenDim})
		if err != nil {
			return nil, err
		}
		for i, name := range []string{model.WGate, model.WUp} {
			parts[i].Name = model.Layer(layer, name)
			if parts[i].Scales != nil {
				parts[i].Scales.Name = model.ScaleName(parts[i].Name)
			}
		}
		return parts, nil
	}
	name, ok := layerNames[suffix]
	if !ok {
		return nil, fmt.Errorf("%w: tensor %q", ErrUnsupported, info.Name)
	}
	if c.Arch == model.ArchGPTOSS && name == model.PostAttnNorm {
		// gpt-oss's post_attention_norm is the norm before its FFN
		// (src/models/openai-moe.cpp: attn_post_norm on ffn_inp).
		name = model.FFNNorm
	}
	t, err := f.toTensor(info, model.Layer(layer, name))
	if err == nil && flatSSM[name] && len(t.Shape) > 1 {
		if t.DType != tensors.F32 {
			return nil, fmt.Errorf("%w: tensor %q of %s, not f32", ErrUnsupported, info.Name, t.DType)
		}
		n := 1
		for _, d := range t.Shape {
			n *= d
		}
		t.Shape = []int{n}
	}
	return []*tensors.Tensor{t}, err
}

// bertTensor imports BERT's global tensors of their own (done false for
// the others): the embeddings' norm, and the position rows with the token
// type 0 row added (llama.cpp adds it to every token: all are sentence A),
// read now (a table of max_seq_len rows); token_types itself is dropped.
func (f *File) bertTensor(info *TensorInfo) (*tensors.Tensor, bool, error) {
	switch info.Name {
	case bertEmbedNorm:
		t, err := f.toTensor(info, model.EmbedNorm)
		return t, true, err
	case bertEmbedBias:
		t, err := f.toTensor(info, model.EmbedNormBias)
		return t, true, err
	case bertTokenTypes:
		return nil, true, nil
	case bertPositions:
	default:
		return nil, false, nil
	}
	rows, err := f.float32Tensor(info)
	if err != nil {
		return nil, true, err
	}
	var types []float32
	for i := range f.Tensors {
		if f.Tensors[i].Name == bertTokenTypes {
			if types, err = f.float32Tensor(&f.Tensors[i]); err != nil {
				return nil, true, err
			}
		}
	}
	shape := slices.Clone(info.Dims)
	slices.Reverse(shape)
	if len(shape) != 2 || len(types) > 0 && len(types)%shape[1] != 0 {
		return nil, true, fmt.Errorf("%w: %s %v and %s of %d values", ErrFormat, bertPositions, shape, bertTokenTypes, len(types))
	}
	if len(types) > 0 {
		for i := range rows {
			rows[i] += types[i%shape[1]]
		}
	}
	t, err := tensors.FromF32(model.PositionEmbedding, shape, rows, tensors.F32)
	return t, true, err
}

// float32Tensor reads a tensor's values as float32s.
func (f *File) float32Tensor(info *TensorInfo) ([]float32, error) {
	t, err := f.readTensor(info, info.Name)
	if err != nil {
		return nil, err
	}
	vals, err := t.Float32()
	if err != nil {
		return nil, fmt.Errorf("%w: tensor %q: %w", ErrFormat, info.Name, err)
	}
	return vals, nil
}

// splitFused is splitRows, deferred for a deferred t: each part reads the
// fused tensor when a backend takes it and keeps its own rows.
func splitFused(t *tensors.Tensor, rows []int) ([]*tensors.Tensor, error) {
	if !t.Deferred() {
		return splitRows(t, rows)
	}
	// The shapes (and the checks), from a stand-in with no bytes.
	shapes, err := splitRows(&tensors.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape}, rows)
	if err != nil {
		return nil, err
	}
	for i, p := range shapes {
		p.Scales = nil
		p.Source = func(p *tensors.Tensor) error {
			whole := &tensors.Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Source: t.Source}
			if err := whole.Fill(); err != nil {
				return err
			}
			parts, err := splitRows(whole, rows)
			if err != nil {
				return err
			}
			p.Data, p.Scales = parts[i].Data, parts[i].Scales
			if p.Scales != nil {
				p.Scales.Name = model.ScaleName(p.Name)
			}
			return nil
		}
	}
	return shapes, nil
}

// splitRows cuts t along its first dimension into parts of the given row
// counts (for a 1-D tensor, of the given element counts). The parts alias t.
func splitRows(t *tensors.Tensor, rows []int) ([]*tensors.Tensor, error) {
	total := 0
	for _, r := range rows {
		total += r
	}
	if len(t.Shape) == 0 || t.Shape[0] != total || len(t.Shape) > 2 {
		return nil, fmt.Errorf("%w: fused tensor %q %v does not split into rows %v", ErrFormat, t.Name, t.Shape, rows)
	}
	cols := 1
	if len(t.Shape) == 2 {
		cols = t.Shape[1]
	}
	if !t.DType.Block() && t.DType.Bits()*cols%8 != 0 {
		return nil, fmt.Errorf("%w: fused tensor %q rows are not whole bytes", ErrUnsupported, t.Name)
	}
	rowBytes := t.DType.ByteSize(cols)
	var out []*tensors.Tensor
	start := 0
	for _, r := range rows {
		p := &tensors.Tensor{DType: t.DType, Shape: append([]int{r}, t.Shape[1:]...)}
		if t.Data != nil { // nil: splitFused's stand-in, shapes only
			p.Data = t.Data[start*rowBytes : (start+r)*rowBytes]
		}
		if s := t.Scales; s != nil {
			sb := len(s.Data) / total
			p.Scales = &tensors.Tensor{DType: s.DType, Shape: append([]int{r}, s.Shape[1:]...), Data: s.Data[start*sb : (start+r)*sb]}
		}
		out = append(out, p)
		start += r
	}
	return out, nil
}

// ropeTable reads a RoPE factor tensor (rope_freqs, rope_factors_long or
// rope_factors_short: one value per rotated pair) into the configuration.
func (f *File) ropeTable(info *TensorInfo, c *model.Config) error {
	t, err := f.readTensor(info, info.Name)
	if err != nil {
		return err
	}
	if len(t.Shape) != 1 || t.Shape[0] != c.RopeDims/2 {
		return fmt.Errorf("%w: tensor %q has shape %v, want [%d] (rope dims / 2)", ErrFormat, info.Name, t.Shape, c.RopeDims/2)
	}
	vals, err := t.Float32()
	if err != nil {
		return fmt.Errorf("%w: tensor %q: %w", ErrFormat, info.Name, err)
	}
	switch info.Name {
	case ropeFreqs, ropeFactorsLong:
		if c.RopeFactors != nil {
			return fmt.Errorf("%w: tensor %q with other rope factors (rope scaling or %s)", ErrUnsupported, info.Name, ropeFreqs)
		}
		c.RopeFactors = vals
	case ropeFactorsShort:
		c.RopeFactorsShort = vals
	}
	return nil
}
