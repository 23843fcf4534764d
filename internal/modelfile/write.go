package modelfile

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"

	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/gpurun/gpurun/internal/modelfile/internal/tflite"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// WriteOptions carries the optional parts of a model file.
type WriteOptions struct {
	// Tokenizer is a serialized SentencePiece ModelProto stored under
	// MetaTokenizer, or a Hugging Face tokenizer.json stored under
	// MetaTokenizerJSON (see IsTokenizerJSON); nil stores none.
	Tokenizer []byte
	// Extra metadata entries; keys must not collide with the Meta* keys.
	Extra map[string][]byte
	// Progress, if set, is called after each tensor's bytes are written with
	// the tensor bytes done so far and the total.
	Progress func(done, total int64)
}

// entry is one flatbuffer tensor: a weight or the scales of a quantized one.
type entry struct {
	name   string
	t      *tensors.Tensor
	offset int64 // of the data, relative to the end of the flatbuffer region
}

// Write stores cfg and the tensors ts as a TFLite flatbuffer followed by the
// tensor bytes. Quantized tensors get a companion "<name>_quantized_scale"
// tensor (model.ScaleName); per-channel ones also carry TFLite quantization
// parameters so TFLite tools show them. Tensor bytes are streamed from ts
// without another copy.
func Write(w io.Writer, cfg model.Config, ts []*tensors.Tensor, opts WriteOptions) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	entries, total, err := layout(ts)
	if err != nil {
		return err
	}
	meta, err := metadataEntries(cfg, opts)
	if err != nil {
		return err
	}
	// Buffer offsets are absolute, so the flatbuffer's size decides the
	// offsets it holds. Values do not change its size once all are non-zero,
	// so this settles after at most two rounds.
	var fb []byte
	base := int64(0)
	for {
		fb, err = buildFlatbuffer(entries, meta, base)
		if err != nil {
			return err
		}
		need := alignUp(int64(len(fb)), dataAlign)
		if base > 0 && need <= base {
			break
		}
		base = need
	}
	cw := &countWriter{w: w}
	if _, err := cw.Write(fb); err != nil {
		return fmt.Errorf("modelfile: write: %w", err)
	}
	var done int64
	for _, e := range entries {
		if err := cw.padTo(base + e.offset); err != nil {
			return fmt.Errorf("modelfile: write: %w", err)
		}
		if _, err := cw.Write(e.t.Data); err != nil {
			return fmt.Errorf("modelfile: write %s: %w", e.name, err)
		}
		done += int64(len(e.t.Data))
		if opts.Progress != nil {
			opts.Progress(done, total)
		}
	}
	return nil
}

// layout checks the tensors, expands scales into their own entries and
// places every entry's bytes at a 64-byte aligned offset.
func layout(ts []*tensors.Tensor) ([]entry, int64, error) {
	seen := make(map[string]bool, len(ts))
	var entries []entry
	var off, total int64
	add := func(name string, t *tensors.Tensor) error {
		if name == "" {
			return fmt.Errorf("%w: tensor without a name", ErrInvalid)
		}
		if seen[name] {
			return fmt.Errorf("%w: duplicate tensor %q", ErrInvalid, name)
		}
		seen[name] = true
		for _, d := range t.Shape {
			if d > 1<<31-1 {
				return fmt.Errorf("%w: %s: dimension %d exceeds int32", ErrInvalid, name, d)
			}
		}
		off = alignUp(off, dataAlign)
		entries = append(entries, entry{name: name, t: t, offset: off})
		off += int64(len(t.Data))
		total += int64(len(t.Data))
		return nil
	}
	for _, t := range ts {
		if t == nil {
			return nil, 0, fmt.Errorf("%w: nil tensor", ErrInvalid)
		}
		if err := t.Check(); err != nil {
			return nil, 0, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if err := add(t.Name, t); err != nil {
			return nil, 0, err
		}
		if t.Scales != nil {
			if err := add(model.ScaleName(t.Name), t.Scales); err != nil {
				return nil, 0, err
			}
		}
	}
	return entries, total, nil
}

type metaEntry struct {
	name string
	data []byte
}

func metadataEntries(cfg model.Config, opts WriteOptions) ([]metaEntry, error) {
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: config: %w", ErrInvalid, err)
	}
	meta := []metaEntry{{MetaConfig, js}, {MetaBackend, []byte("gpu")}}
	if opts.Tokenizer != nil {
		key := MetaTokenizer
		if IsTokenizerJSON(opts.Tokenizer) {
			key = MetaTokenizerJSON
		}
		meta = append(meta, metaEntry{key, opts.Tokenizer})
	}
	keys := make([]string, 0, len(opts.Extra))
	for k := range opts.Extra {
		if k == MetaConfig || k == MetaBackend || k == MetaTokenizer || k == MetaTokenizerJSON || k == "" {
			return nil, fmt.Errorf("%w: extra metadata key %q is reserved", ErrInvalid, k)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		meta = append(meta, metaEntry{k, opts.Extra[k]})
	}
	return meta, nil
}

// buildFlatbuffer serializes the model table. Buffer 0 is TFLite's empty
// sentinel, buffer i+1 holds entry i at base+offset, and metadata buffers
// follow with their bytes inline.
func buildFlatbuffer(entries []entry, meta []metaEntry, base int64) ([]byte, error) {
	b := flatbuffers.NewBuilder(1024 + 128*len(entries))

	tensorOffs := make([]flatbuffers.UOffsetT, len(entries))
	for i, e := range entries {
		typ, err := tfliteType(e.t.DType)
		if err != nil {
			return nil, err
		}
		name := b.CreateString(e.name)
		quant := quantizationParams(b, e)
		tflite.TensorStartShapeVector(b, len(e.t.Shape))
		for _, d := range slices.Backward(e.t.Shape) {
			b.PrependInt32(int32(d))
		}
		shape := b.EndVector(len(e.t.Shape))
		tflite.TensorStart(b)
		tflite.TensorAddShape(b, shape)
		tflite.TensorAddType(b, typ)
		tflite.TensorAddBuffer(b, uint32(i+1))
		tflite.TensorAddName(b, name)
		if quant != 0 {
			tflite.TensorAddQuantization(b, quant)
		}
		tensorOffs[i] = tflite.TensorEnd(b)
	}
	tensorVec := offsetVector(b, tflite.SubGraphStartTensorsVector, tensorOffs)
	sgName := b.CreateString("weights")
	tflite.SubGraphStart(b)
	tflite.SubGraphAddTensors(b, tensorVec)
	tflite.SubGraphAddName(b, sgName)
	subgraphs := offsetVector(b, tflite.ModelStartSubgraphsVector, []flatbuffers.UOffsetT{tflite.SubGraphEnd(b)})

	bufOffs := make([]flatbuffers.UOffsetT, 0, 1+len(entries)+len(meta))
	tflite.BufferStart(b)
	bufOffs = append(bufOffs, tflite.BufferEnd(b))
	for _, e := range entries {
		tflite.BufferStart(b)
		tflite.BufferAddOffset(b, uint64(base+e.offset))
		tflite.BufferAddSize(b, uint64(len(e.t.Data)))
		bufOffs = append(bufOffs, tflite.BufferEnd(b))
	}
	metaOffs := make([]flatbuffers.UOffsetT, len(meta))
	for i, m := range meta {
		b.StartVector(1, len(m.data), 16) // TFLite's force_align for Buffer.data
		for _, c := range slices.Backward(m.data) {
			b.PrependByte(c)
		}
		data := b.EndVector(len(m.data))
		tflite.BufferStart(b)
		tflite.BufferAddData(b, data)
		bufIndex := len(bufOffs)
		bufOffs = append(bufOffs, tflite.BufferEnd(b))

		name := b.CreateString(m.name)
		tflite.MetadataStart(b)
		tflite.MetadataAddName(b, name)
		tflite.MetadataAddBuffer(b, uint32(bufIndex))
		metaOffs[i] = tflite.MetadataEnd(b)
	}
	buffers := offsetVector(b, tflite.ModelStartBuffersVector, bufOffs)
	metadata := offsetVector(b, tflite.ModelStartMetadataVector, metaOffs)
	desc := b.CreateString("gpurun weights")

	tflite.ModelStart(b)
	tflite.ModelAddVersion(b, 3)
	tflite.ModelAddSubgraphs(b, subgraphs)
	tflite.ModelAddDescription(b, desc)
	tflite.ModelAddBuffers(b, buffers)
	tflite.ModelAddMetadata(b, metadata)
	b.FinishWithFileIdentifier(tflite.ModelEnd(b), []byte(fileIdentifier))
	return b.FinishedBytes(), nil
}

// quantizationParams writes TFLite per-channel parameters for a tensor with
// one scale per row (zero point 0, quantized dimension 0). Block-wise scales
// have no TFLite form; their scale tensor alone describes them. Block types
// are UINT8 tensors whose CustomQuantization details name the type.
func quantizationParams(b *flatbuffers.Builder, e entry) flatbuffers.UOffsetT {
	t := e.t
	if t.DType.Block() {
		custom := b.CreateByteVector([]byte(BlockQuantization + t.DType.String()))
		tflite.CustomQuantizationStart(b)
		tflite.CustomQuantizationAddCustom(b, custom)
		details := tflite.CustomQuantizationEnd(b)
		tflite.QuantizationParametersStart(b)
		tflite.QuantizationParametersAddDetailsType(b, tflite.QuantizationDetailsCustomQuantization)
		tflite.QuantizationParametersAddDetails(b, details)
		return tflite.QuantizationParametersEnd(b)
	}
	if t.Scales == nil || len(t.Scales.Shape) != 1 || len(t.Shape) != 2 {
		return 0
	}
	scales, err := t.Scales.Float32()
	if err != nil {
		return 0
	}
	tflite.QuantizationParametersStartScaleVector(b, len(scales))
	for _, s := range slices.Backward(scales) {
		b.PrependFloat32(s)
	}
	scaleVec := b.EndVector(len(scales))
	tflite.QuantizationParametersStartZeroPointVector(b, len(scales))
	for range scales {
		b.PrependInt64(0)
	}
	zpVec := b.EndVector(len(scales))
	tflite.QuantizationParametersStart(b)
	tflite.QuantizationParametersAddScale(b, scaleVec)
	tflite.QuantizationParametersAddZeroPoint(b, zpVec)
	tflite.QuantizationParametersAddQuantizedDimension(b, 0)
	return tflite.QuantizationParametersEnd(b)
}

func offsetVector(b *flatbuffers.Builder, start func(*flatbuffers.Builder, int) flatbuffers.UOffsetT, offs []flatbuffers.UOffsetT) flatbuffers.UOffsetT {
	start(b, len(offs))
	for _, o := range slices.Backward(offs) {
		b.PrependUOffsetT(o)
	}
	return b.EndVector(len(offs))
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// countWriter tracks the output position so padding can be computed.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

var zeros [dataAlign]byte

func (c *countWriter) padTo(pos int64) error {
	for c.n < pos {
		if _, err := c.Write(zeros[:min(pos-c.n, dataAlign)]); err != nil {
			return err
		}
	}
	return nil
}
