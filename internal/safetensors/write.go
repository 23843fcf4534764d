package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	"github.com/gpurun/gpurun/tensors"
)

// Write encodes ts (unquantized F32, F16, BF16 or I32 tensors) and metadata
// as a safetensors file, tensors in the given order. The header is padded
// with spaces to a multiple of 8 bytes so the data section stays aligned.
func Write(w io.Writer, ts []*tensors.Tensor, metadata map[string]string) error {
	names := map[tensors.DType]string{}
	for k, v := range dtypes {
		names[v] = k
	}
	header := map[string]any{}
	if len(metadata) > 0 {
		header[metadataKey] = metadata
	}
	var off int64
	for _, t := range ts {
		name, ok := names[t.DType]
		if !ok || t.Scales != nil {
			return fmt.Errorf("%w: cannot write %s tensor %q", ErrUnsupported, t.DType, t.Name)
		}
		if err := t.Check(); err != nil {
			return fmt.Errorf("safetensors: %w", err)
		}
		if _, dup := header[t.Name]; dup || t.Name == metadataKey {
			return fmt.Errorf("%w: duplicate tensor name %q", ErrFormat, t.Name)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{}
		}
		header[t.Name] = headerEntry{DType: name, Shape: toInt64(shape), DataOffsets: []int64{off, off + int64(len(t.Data))}}
		off += int64(len(t.Data))
	}
	js, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	if _, err := w.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(js)))); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	if _, err := w.Write(js); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	for _, t := range ts {
		if _, err := w.Write(t.Data); err != nil {
			return fmt.Errorf("safetensors: %w", err)
		}
	}
	return nil
}

func toInt64(s []int) []int64 {
	out := make([]int64, len(s))
	for i, v := range s {
		out[i] = int64(v)
	}
	return out
}
