package synthetic

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// Quantization modes of Options.Quant.
const (
	// QuantInt4 stores linear weights as int4 in blocks of 32 with f16
	// scales; the token embedding and an untied LM head are int8 with one
	// f32 scale per row, keeping 8 bits for the vocabulary matrices (a
	// Gemma-2B int8 embedding is 0.5 GB of its 1.5 GB).
	QuantInt4 = "int4"
	// QuantInt8 stores every matrix as int8 with one f32 scale per row.
	QuantInt8 = "int8"
	// QuantF16 stores every matrix as f16.
	QuantF16 = "f16"
	// QuantF32 stores every matrix as f32 (four times the bytes of f16; a
	// TinyLlama-1.1B shape is 4.4 GB).
	QuantF32 = "f32"
)

// Int4Block is the int4 quantization block: consecutive elements of a row
// sharing one f16 scale.
const Int4Block = 32

// DefaultMaxBytes bounds the weights Checkpoint allocates when
// Options.MaxBytes is 0.
const DefaultMaxBytes = 16 << 30

// Errors callers can test for with errors.Is.
var (
	// ErrOptions: an unknown quantization mode or a negative limit.
	ErrOptions = errors.New("synthetic: invalid options")
	// ErrTooLarge: the weights would exceed Options.MaxBytes.
	ErrTooLarge = errors.New("synthetic: weights too large")
)

// Options choose the storage and the random stream.
type Options struct {
	Quant    string // QuantInt4 (default when empty), QuantInt8, QuantF16 or QuantF32
	Seed     uint64 // same seed, same weights
	MaxBytes int64  // refuse configurations whose weights (plus 256 bytes a tensor) exceed this (0: DefaultMaxBytes)
}

// Checkpoint builds random weights for spec directly in their stored form:
// quantized codes and scales are drawn as bytes, never through a float32
// copy of a matrix, so memory is the size of the weights themselves. Values
// are scaled so that activations keep a sane range through any depth: each
// matrix row has a standard deviation near 1/sqrt(its input width), norm
// scales lie in [0.95, 1.05] and biases in [-0.02, 0.02]. The checkpoint
// holds exactly the tensors internal/arch reads for spec; it has no
// tokenizer, so prompts must be token ids.
func Checkpoint(spec model.Config, opts Options) (*model.Checkpoint, error) {
	plan, err := newPlan(&spec, opts)
	if err != nil {
		return nil, err
	}
	ts := make([]*tensors.Tensor, len(plan.entries))
	work := make(chan int)
	var wg sync.WaitGroup
	for range max(1, min(runtime.GOMAXPROCS(0), len(ts))) {
		wg.Go(func() {
			for i := range work {
				ts[i] = plan.build(i, opts.Seed)
			}
		})
	}
	for i := range ts {
		work <- i
	}
	close(work)
	wg.Wait()
	return &model.Checkpoint{Config: spec, Tensors: ts}, nil
}

// Bytes is the size of the weights Checkpoint would build (data and
// scales), computed without building anything.
func Bytes(spec model.Config, opts Options) (int64, error) {
	quant, _, err := checkOptions(&spec, opts)
	if err != nil {
		return 0, err
	}
	return dataBytes(&spec, quant), nil
}

// Params is the number of weights (elements, not bytes) of spec's
// checkpoint: the figure model cards publish.
func Params(spec model.Config) (int64, error) {
	if err := spec.Validate(); err != nil {
		return 0, fmt.Errorf("synthetic: %w", err)
	}
	n := footprint(&spec, func(e entry) int64 { return elements(e.shape) })
	if n == math.MaxInt64 {
		return 0, fmt.Errorf("%w: parameter count overflows int64", ErrTooLarge)
	}
	return n, nil
}

// tensorOverhead is what the limit charges per tensor beyond its data: the
// Tensor, its scales, name and shape.
const tensorOverhead = 256

// plan is the checked list of tensors with their storage formats.
type plan struct {
	entries []entry
	formats []format
	bytes   int64
}

func newPlan(spec *model.Config, opts Options) (*plan, error) {
	quant, limit, err := checkOptions(spec, opts)
	if err != nil {
		return nil, err
	}
	// Sizes first, from one layer times the depth, so that an absurd config
	// fails before anything proportional to it is allocated.
	data := dataBytes(spec, quant)
	count := footprint(spec, func(entry) int64 { return 1 })
	if data > limit || count > limit/tensorOverhead || data+count*tensorOverhead > limit {
		return nil, fmt.Errorf("%w: %d bytes of weights in %d tensors, limit %d", ErrTooLarge, data, count, limit)
	}
	p := &plan{entries: layout(spec), bytes: data}
	p.formats = make([]format, len(p.entries))
	for i, e := range p.entries {
		p.formats[i] = formatFor(e, quant)
	}
	return p, nil
}

// checkOptions validates spec and opts and returns the quantization mode
// and byte limit in effect.
func checkOptions(spec *model.Config, opts Options) (quant string, limit int64, err error) {
	if err := spec.Validate(); err != nil {
		return "", 0, fmt.Errorf("synthetic: %w", err)
	}
	quant = opts.Quant
	if quant == "" {
		quant = QuantInt4
	}
	switch quant {
	case QuantInt4, QuantInt8, QuantF16, QuantF32:
	default:
		return "", 0, fmt.Errorf("%w: quant %q (want %s, %s, %s or %s)", ErrOptions, opts.Quant, QuantInt4, QuantInt8, QuantF16, QuantF32)
	}
	limit = opts.MaxBytes
	if limit < 0 {
		return "", 0, fmt.Errorf("%w: max bytes %d", ErrOptions, limit)
	}
	if limit == 0 {
		limit = DefaultMaxBytes
	}
	return quant, limit, nil
}

// dataBytes is the stored size of every tensor of spec (saturating at
// math.MaxInt64).
func dataBytes(spec *model.Config, quant string) int64 {
	return footprint(spec, func(e entry) int64 { return formatFor(e, quant).bytes(e.shape) })
}

// format is how one tensor is stored.
type format struct {
	dtype     tensors.DType
	block     int // quantization block; 0 means one scale per row
	scaleType tensors.DType
}

// formatFor picks the storage of a tensor. A matrix whose rows do not split
// into int4 blocks falls back to per-row int4, and odd rows to int8, so
// that any valid config can be built.
func formatFor(e entry, quant string) format {
	switch e.role {
	case roleNorm, roleBias, roleRouter, roleConv, roleDecay:
		return format{dtype: tensors.F32}
	}
	cols := e.shape[len(e.shape)-1]
	switch {
	case quant == QuantF16:
		return format{dtype: tensors.F16}
	case quant == QuantF32:
		return format{dtype: tensors.F32}
	case quant == QuantInt8 || e.role == roleEmbed || cols%2 != 0:
		return format{dtype: tensors.I8, scaleType: tensors.F32}
	case cols%Int4Block == 0:
		return format{dtype: tensors.I4, block: Int4Block, scaleType: tensors.F16}
	default:
		return format{dtype: tensors.I4, scaleType: tensors.F32}
	}
}

// scaleShape is the shape of the scales tensor of a [rows, cols] matrix.
func (f format) scaleShape(rows, cols int) []int {
	if f.block == 0 {
		return []int{rows}
	}
	return []int{rows, cols / f.block}
}

func (f format) bytes(shape []int) int64 {
	n := elements(shape)
	b := int64(f.dtype.ByteSize(int(n)))
	if f.dtype.Quantized() {
		rows, cols := matrixDims(shape)
		b += int64(f.scaleType.ByteSize(int(elements(f.scaleShape(rows, cols)))))
	}
	return b
}

func elements(shape []int) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= int64(d)
	}
	return n
}

// matrixDims views a shape as [rows, cols] (cols the last dimension).
func matrixDims(shape []int) (rows, cols int) {
	cols = shape[len(shape)-1]
	return int(elements(shape)) / cols, cols
}

// build allocates and fills tensor i. Its random stream depends only on the
// seed and the tensor's name, so results do not depend on scheduling.
func (p *plan) build(i int, seed uint64) *tensors.Tensor {
	e, f := p.entries[i], p.formats[i]
	src := newStream(seed, e.name)
	t := &tensors.Tensor{Name: e.name, DType: f.dtype, Shape: append([]int(nil), e.shape...)}
	n := int(elements(e.shape))
	t.Data = make([]byte, f.dtype.ByteSize(n))
	rows, cols := matrixDims(e.shape)
	switch e.role {
	case roleNorm:
		src.uniformF32(t.Data, 0.95, 1.05)
		return t
	case roleBias:
		src.uniformF32(t.Data, -0.02, 0.02)
		return t
	case roleConv:
		src.uniformF32(t.Data, -1/math.Sqrt(float64(cols)), 1/math.Sqrt(float64(cols)))
		return t
	case roleDecay:
		src.uniformF32(t.Data, -2, -0.1)
		return t
	}
	// Matrices: the standard deviation that keeps W·x at the scale of x.
	std := 1 / math.Sqrt(float64(cols))
	switch f.dtype {
	case tensors.F16, tensors.F32:
		src.floatValues(t.Data, std, f.dtype)
	case tensors.I8, tensors.I4:
		codes := codesI8
		if f.dtype == tensors.I4 {
			codes = codesI4
		}
		src.codes(t.Data, codes)
		shape := f.scaleShape(rows, cols)
		s := &tensors.Tensor{Name: model.ScaleName(e.name), DType: f.scaleType, Shape: shape}
		s.Data = make([]byte, f.scaleType.ByteSize(int(elements(shape))))
		src.scales(s.Data, f.scaleType, std/codes.rms)
		t.Scales = s
	}
	return t
}
