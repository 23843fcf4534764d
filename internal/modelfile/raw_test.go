package modelfile

import (
	"slices"
	"testing"

	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/gpurun/gpurun/internal/modelfile/internal/tflite"
)

// rawTensor describes a tensor written by buildRaw with inline buffer data,
// the layout TFLite files under 2 GiB use.
type rawTensor struct {
	name   string
	typ    tflite.TensorType
	shape  []int32
	data   []byte
	noData bool // reference buffer 0
	// external places the data at this absolute offset via Buffer.offset
	// (the bytes themselves are not appended; tests use it for bad offsets).
	external uint64
}

type rawModel struct {
	tensors []rawTensor
	meta    map[string][]byte
}

// buildRaw writes a flatbuffer with the generated builder, independently of
// Write, so the reader can be tested on layouts Write never produces.
func buildRaw(t testing.TB, m rawModel) []byte {
	t.Helper()
	b := flatbuffers.NewBuilder(256)
	var bufs, tens, metas []flatbuffers.UOffsetT
	tflite.BufferStart(b)
	bufs = append(bufs, tflite.BufferEnd(b))
	addBuffer := func(data []byte, external uint64) uint32 {
		var vec flatbuffers.UOffsetT
		if external == 0 {
			vec = b.CreateByteVector(data)
		}
		tflite.BufferStart(b)
		if external != 0 {
			tflite.BufferAddOffset(b, external)
			tflite.BufferAddSize(b, uint64(len(data)))
		} else {
			tflite.BufferAddData(b, vec)
		}
		bufs = append(bufs, tflite.BufferEnd(b))
		return uint32(len(bufs) - 1)
	}
	for _, rt := range m.tensors {
		var bi uint32
		if !rt.noData {
			bi = addBuffer(rt.data, rt.external)
		}
		name := b.CreateString(rt.name)
		tflite.TensorStartShapeVector(b, len(rt.shape))
		for _, d := range slices.Backward(rt.shape) {
			b.PrependInt32(d)
		}
		shape := b.EndVector(len(rt.shape))
		tflite.TensorStart(b)
		tflite.TensorAddShape(b, shape)
		tflite.TensorAddType(b, rt.typ)
		tflite.TensorAddBuffer(b, bi)
		tflite.TensorAddName(b, name)
		tens = append(tens, tflite.TensorEnd(b))
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range m.meta {
			if !yield(k) {
				return
			}
		}
	}) {
		bi := addBuffer(m.meta[k], 0)
		name := b.CreateString(k)
		tflite.MetadataStart(b)
		tflite.MetadataAddName(b, name)
		tflite.MetadataAddBuffer(b, bi)
		metas = append(metas, tflite.MetadataEnd(b))
	}
	tv := offsetVector(b, tflite.SubGraphStartTensorsVector, tens)
	tflite.SubGraphStart(b)
	tflite.SubGraphAddTensors(b, tv)
	sgs := offsetVector(b, tflite.ModelStartSubgraphsVector, []flatbuffers.UOffsetT{tflite.SubGraphEnd(b)})
	bv := offsetVector(b, tflite.ModelStartBuffersVector, bufs)
	mv := offsetVector(b, tflite.ModelStartMetadataVector, metas)
	tflite.ModelStart(b)
	tflite.ModelAddVersion(b, 3)
	tflite.ModelAddSubgraphs(b, sgs)
	tflite.ModelAddBuffers(b, bv)
	tflite.ModelAddMetadata(b, mv)
	b.FinishWithFileIdentifier(tflite.ModelEnd(b), []byte(fileIdentifier))
	return b.FinishedBytes()
}
