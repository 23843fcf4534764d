package modelfile

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/gpurun/gpurun/internal/mmap"
	"github.com/gpurun/gpurun/internal/modelfile/internal/tflite"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// Format names what container a File was read from.
type Format string

const (
	FormatTFLite Format = "tflite" // bare model flatbuffer
	FormatTask   Format = "task"   // .task zip bundle
)

// File is a parsed model file. Tensor data and metadata alias the bytes
// passed to Parse (or the mapping made by Open): they are read-only and
// must not be used after Close.
type File struct {
	format    Format
	size      int64
	cfg       model.Config
	hasConfig bool
	weights   []*tensors.Tensor // file order, scale tensors attached rather than listed
	byName    map[string]*tensors.Tensor
	meta      map[string][]byte
	tokenizer []byte
	taskMeta  []byte
	mapping   *mmap.Map
}

// Open maps the file at path and parses it as a model flatbuffer or a .task
// bundle, whichever its content is.
func Open(path string) (*File, error) {
	m, err := mmap.Open(path)
	if err != nil {
		return nil, fmt.Errorf("modelfile: %w", err)
	}
	f, err := Parse(m.Bytes())
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	f.mapping = m
	return f, nil
}

// Parse reads a model flatbuffer or a .task bundle from data without copying
// tensor bytes. Every offset is checked before use.
func Parse(data []byte) (f *File, err error) {
	// Last line of defense: the checks below are meant to make this
	// unreachable, but a panic must never escape to the caller.
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("%w: unexpected parser failure: %v", ErrFormat, r)
		}
	}()
	return parse(data)
}

// parse is Parse without the recover, so tests see any panic.
func parse(data []byte) (*File, error) {
	if isZip(data) {
		return parseTask(data)
	}
	f, err := parseModel(data)
	if err != nil {
		return nil, err
	}
	f.format = FormatTFLite
	return f, nil
}

// Close releases the mapping made by Open; it does nothing for Parse.
func (f *File) Close() error {
	if f.mapping == nil {
		return nil
	}
	m := f.mapping
	f.mapping = nil
	return m.Close()
}

// Format is the container the file was read from.
func (f *File) Format() Format { return f.format }

// Config is the model configuration stored in the file (zero if absent; see
// HasConfig).
func (f *File) Config() model.Config { return f.cfg }

// HasConfig reports whether the file carried a gpurun configuration.
func (f *File) HasConfig() bool { return f.hasConfig }

// Tensors lists the weights in file order. Quantized tensors carry their
// scales in Scales; the scale tensors are not listed separately.
func (f *File) Tensors() []*tensors.Tensor { return f.weights }

// Tensor returns the tensor with the given name (scale tensors included), or
// nil.
func (f *File) Tensor(name string) *tensors.Tensor { return f.byName[name] }

// Tokenizer returns the tokenizer: the .task TOKENIZER_MODEL or
// TOKENIZER_JSON entry if present, else the flatbuffer's spm_vocab_model or
// hf_tokenizer_json metadata; nil if none. IsTokenizerJSON tells a
// tokenizer.json from a SentencePiece ModelProto.
func (f *File) Tokenizer() []byte { return f.tokenizer }

// Metadata returns the flatbuffer metadata entry with the given name.
func (f *File) Metadata(name string) ([]byte, bool) {
	b, ok := f.meta[name]
	return b, ok
}

// MetadataNames lists the flatbuffer metadata entries, sorted.
func (f *File) MetadataNames() []string { return slices.Sorted(maps.Keys(f.meta)) }

// TaskMetadata returns the METADATA entry of a .task bundle (nil otherwise).
func (f *File) TaskMetadata() []byte { return f.taskMeta }

// Field ids of the TFLite tables (positions in schema.fbs).
const (
	modelSubgraphs = 2
	modelBuffers   = 4
	modelMetadata  = 6

	subgraphTensors = 0

	tensorShape  = 0
	tensorType   = 1
	tensorBuffer = 2
	tensorName   = 3
	tensorQuant  = 4

	quantDetailsType = 4
	quantDetails     = 5
	customBytes      = 0

	bufferData   = 0
	bufferOffset = 1
	bufferSize   = 2

	metadataName   = 0
	metadataBuffer = 1
)

// budget bounds what parsing allocates to a small multiple of the input, so
// that a file of shared or tiny tables cannot make the parser allocate far
// more than the file's size.
type budget struct{ left int64 }

func (b *budget) charge(n int64) error {
	b.left -= n
	if b.left < 0 {
		return fmt.Errorf("%w: too many tensors or metadata entries for the file size", ErrFormat)
	}
	return nil
}

// tensorCost approximates the heap bytes one parsed tensor takes besides its
// name and shape: the Tensor, its map entry and list slots.
const tensorCost = 160

func parseModel(data []byte) (*File, error) {
	fb := fbuf(data)
	if !fb.has(0, 8) {
		return nil, fmt.Errorf("%w: %d bytes", ErrTruncated, len(data))
	}
	if string(data[4:8]) != fileIdentifier {
		return nil, fmt.Errorf("%w: no %q identifier (neither a TFLite flatbuffer nor a zip)", ErrFormat, fileIdentifier)
	}
	root, err := fb.root()
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	buffers, err := root.vector(modelBuffers, 4)
	if err != nil {
		return nil, fmt.Errorf("model buffers: %w", err)
	}
	bud := &budget{left: 4*int64(len(data)) + 64<<10}
	f := &File{size: int64(len(data)), byName: map[string]*tensors.Tensor{}, meta: map[string][]byte{}}

	subgraphs, err := root.vector(modelSubgraphs, 4)
	if err != nil {
		return nil, fmt.Errorf("model subgraphs: %w", err)
	}
	var all []*tensors.Tensor
	for s := range subgraphs.n {
		sg, err := subgraphs.table(s)
		if err != nil {
			return nil, fmt.Errorf("subgraph %d: %w", s, err)
		}
		tv, err := sg.vector(subgraphTensors, 4)
		if err != nil {
			return nil, fmt.Errorf("subgraph %d tensors: %w", s, err)
		}
		for i := range tv.n {
			tt, err := tv.table(i)
			if err != nil {
				return nil, fmt.Errorf("subgraph %d tensor %d: %w", s, i, err)
			}
			t, err := readTensor(fb, tt, buffers, bud)
			if err != nil {
				return nil, fmt.Errorf("subgraph %d tensor %d: %w", s, i, err)
			}
			if t == nil {
				continue // no constant data: a graph activation, not a weight
			}
			if f.byName[t.Name] != nil {
				return nil, fmt.Errorf("%w: duplicate tensor %q", ErrFormat, t.Name)
			}
			f.byName[t.Name] = t
			all = append(all, t)
		}
	}
	if err := f.attachScales(all); err != nil {
		return nil, err
	}
	if err := f.readMetadata(fb, root, buffers, bud); err != nil {
		return nil, err
	}
	if js, ok := f.meta[MetaConfig]; ok {
		if err := f.setConfig(js); err != nil {
			return nil, err
		}
	}
	f.tokenizer = f.meta[MetaTokenizer]
	if f.tokenizer == nil {
		f.tokenizer = f.meta[MetaTokenizerJSON]
	}
	return f, nil
}

// readTensor decodes one Tensor table; it returns nil for tensors without
// constant data (buffer 0).
func readTensor(fb fbuf, tt table, buffers vector, bud *budget) (*tensors.Tensor, error) {
	name, err := tt.bytes(tensorName)
	if err != nil {
		return nil, fmt.Errorf("name: %w", err)
	}
	bufIndex, err := tt.uint32(tensorBuffer, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: buffer: %w", name, err)
	}
	if bufIndex == 0 {
		return nil, nil
	}
	typ, err := tt.uint8(tensorType, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: type: %w", name, err)
	}
	dt, err := gpurunType(int8(typ))
	if tflite.TensorType(typ) == tflite.TensorTypeUINT8 {
		dt, err = customType(tt)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	shapeVec, err := tt.vector(tensorShape, 4)
	if err != nil {
		return nil, fmt.Errorf("%s: shape: %w", name, err)
	}
	if err := bud.charge(tensorCost + int64(len(name)) + 8*int64(shapeVec.n)); err != nil {
		return nil, err
	}
	shape := make([]int, shapeVec.n)
	for i := range shape {
		d := shapeVec.int32(i)
		if d < 0 {
			return nil, fmt.Errorf("%w: %s: dimension %d", ErrFormat, name, d)
		}
		shape[i] = int(d)
	}
	data, err := bufferBytes(fb, buffers, bufIndex)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	n, ok := elements(shape)
	if !ok || dt.ByteSize(n) != len(data) {
		return nil, fmt.Errorf("%w: %s: %s%v does not match its %d data bytes", ErrFormat, name, dt, shape, len(data))
	}
	t := &tensors.Tensor{Name: string(name), DType: dt, Shape: shape, Data: data}
	if dt.Block() {
		if err := t.Check(); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrFormat, err)
		}
	}
	return t, nil
}

// customType reads the block type of a UINT8 tensor from its
// CustomQuantization details (see BlockQuantization).
func customType(tt table) (tensors.DType, error) {
	unsupported := fmt.Errorf("%w: tensor type UINT8 without a gpurun block quantization", ErrUnsupported)
	qp, ok, err := tt.ref(tensorQuant)
	if err != nil || !ok {
		return 0, cmp.Or(err, unsupported)
	}
	q, err := tt.buf.table(qp)
	if err != nil {
		return 0, err
	}
	kind, err := q.uint8(quantDetailsType, 0)
	if err != nil {
		return 0, err
	}
	dp, ok, err := q.ref(quantDetails)
	if err != nil || !ok || tflite.QuantizationDetails(kind) != tflite.QuantizationDetailsCustomQuantization {
		return 0, cmp.Or(err, unsupported)
	}
	d, err := tt.buf.table(dp)
	if err != nil {
		return 0, err
	}
	custom, err := d.bytes(customBytes)
	if err != nil {
		return 0, err
	}
	return blockType(custom)
}

// elements multiplies dims, failing past 2^48 (more than any file holds).
func elements(shape []int) (int, bool) {
	n := 1
	for _, d := range shape {
		if d != 0 && n > (1<<48)/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// bufferBytes resolves buffer i: external bytes at offset/size (counted from
// the flatbuffer's start, TFLite's rule for offset > 1) or inline data.
func bufferBytes(fb fbuf, buffers vector, i uint32) ([]byte, error) {
	if int64(i) >= int64(buffers.n) {
		return nil, fmt.Errorf("%w: buffer %d of %d", ErrFormat, i, buffers.n)
	}
	bt, err := buffers.table(int(i))
	if err != nil {
		return nil, fmt.Errorf("buffer %d: %w", i, err)
	}
	off, err := bt.uint64(bufferOffset, 0)
	if err != nil {
		return nil, fmt.Errorf("buffer %d: %w", i, err)
	}
	size, err := bt.uint64(bufferSize, 0)
	if err != nil {
		return nil, fmt.Errorf("buffer %d: %w", i, err)
	}
	if off > 1 {
		if off > uint64(len(fb)) || size > uint64(len(fb))-off {
			return nil, fmt.Errorf("%w: buffer %d: %d bytes at %d past the end (%d)", ErrTruncated, i, size, off, len(fb))
		}
		return fb[off : off+size : off+size], nil
	}
	data, err := bt.bytes(bufferData)
	if err != nil {
		return nil, fmt.Errorf("buffer %d data: %w", i, err)
	}
	return data, nil
}

// attachScales pairs each quantized tensor with its "<name>_quantized_scale"
// tensor and lists the rest as weights.
func (f *File) attachScales(all []*tensors.Tensor) error {
	isScale := map[*tensors.Tensor]bool{}
	for _, t := range all {
		if !t.DType.Quantized() {
			continue
		}
		s := f.byName[model.ScaleName(t.Name)]
		if s == nil {
			return fmt.Errorf("%w: quantized tensor %s has no %s", ErrFormat, t.Name, model.ScaleName(t.Name))
		}
		t.Scales = s
		isScale[s] = true
		if err := t.Check(); err != nil {
			return fmt.Errorf("%w: %w", ErrFormat, err)
		}
	}
	for _, t := range all {
		if !isScale[t] {
			f.weights = append(f.weights, t)
		}
	}
	return nil
}

func (f *File) readMetadata(fb fbuf, root table, buffers vector, bud *budget) error {
	mv, err := root.vector(modelMetadata, 4)
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	for i := range mv.n {
		mt, err := mv.table(i)
		if err != nil {
			return fmt.Errorf("metadata %d: %w", i, err)
		}
		name, err := mt.bytes(metadataName)
		if err != nil {
			return fmt.Errorf("metadata %d name: %w", i, err)
		}
		bi, err := mt.uint32(metadataBuffer, 0)
		if err != nil {
			return fmt.Errorf("metadata %s: %w", name, err)
		}
		data, err := bufferBytes(fb, buffers, bi)
		if err != nil {
			return fmt.Errorf("metadata %s: %w", name, err)
		}
		if err := bud.charge(tensorCost + int64(len(name))); err != nil {
			return err
		}
		if _, dup := f.meta[string(name)]; dup {
			return fmt.Errorf("%w: duplicate metadata %q", ErrFormat, name)
		}
		f.meta[string(name)] = data
	}
	return nil
}

func (f *File) setConfig(js []byte) error {
	var cfg model.Config
	dec := json.NewDecoder(bytes.NewReader(js))
	if err := dec.Decode(&cfg); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrFormat, MetaConfig, err)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrFormat, MetaConfig, err)
	}
	f.cfg, f.hasConfig = cfg, true
	return nil
}
