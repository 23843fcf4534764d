package modelfile

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// Summary describes a model file for `gpurun inspect`; it marshals to JSON.
type Summary struct {
	Format         Format           `json:"format"`
	FileBytes      int64            `json:"file_bytes"`
	Config         *model.Config    `json:"config,omitempty"`
	Tensors        []TensorSummary  `json:"tensors"`
	Params         int64            `json:"params"`       // elements of all weights (scales excluded)
	TensorBytes    int64            `json:"tensor_bytes"` // weights plus scales
	BytesByDType   map[string]int64 `json:"bytes_by_dtype"`
	Metadata       []string         `json:"metadata"`
	TokenizerBytes int              `json:"tokenizer_bytes"`
	// ShapeOrder says how Shape lists dimensions when not row-major
	// (outermost first): a GGUF file's shapes are in ggml's ne order,
	// innermost first, as the file stores them.
	ShapeOrder string `json:"shape_order,omitempty"`
}

// TensorSummary describes one weight.
type TensorSummary struct {
	Name         string        `json:"name"`
	DType        string        `json:"dtype"`
	Shape        []int         `json:"shape"`
	Bytes        int64         `json:"bytes"`
	Quantization *QuantSummary `json:"quantization,omitempty"`
}

// QuantSummary describes a quantized tensor's scales.
type QuantSummary struct {
	// Block is the number of row elements sharing a scale; PerChannel is
	// true when that is the whole row.
	Block      int    `json:"block"`
	PerChannel bool   `json:"per_channel"`
	ScaleDType string `json:"scale_dtype"`
	ScaleBytes int64  `json:"scale_bytes"`
	// InBlock is set for llama.cpp's block types, whose scales (and mins)
	// are stored inside each block of Block elements (ScaleDType empty).
	InBlock bool `json:"in_block,omitempty"`
}

// Summary collects per-tensor facts and totals.
func (f *File) Summary() Summary {
	s := SummarizeTensors(f.weights)
	s.Format, s.FileBytes, s.Metadata, s.TokenizerBytes = f.format, f.size, f.MetadataNames(), len(f.tokenizer)
	if f.hasConfig {
		cfg := f.cfg
		s.Config = &cfg
	}
	return s
}

// SummarizeTensors fills a Summary's tensor facts and totals from ts (the
// weights, quantized ones carrying their Scales), for weights read from
// elsewhere than a model file (an imported checkpoint).
func SummarizeTensors(ts []*tensors.Tensor) Summary {
	s := Summary{BytesByDType: map[string]int64{}, Tensors: make([]TensorSummary, 0, len(ts))}
	for _, t := range ts {
		sum := TensorSummary{Name: t.Name, DType: t.DType.String(), Shape: slices.Clone(t.Shape), Bytes: int64(len(t.Data))}
		s.Params += int64(t.NumElements())
		s.TensorBytes += sum.Bytes
		s.BytesByDType[sum.DType] += sum.Bytes
		if t.Scales != nil {
			sum.Quantization = quantSummary(t)
			s.TensorBytes += sum.Quantization.ScaleBytes
			s.BytesByDType["scales"] += sum.Quantization.ScaleBytes
		} else if t.DType.Block() {
			sum.Quantization = &QuantSummary{Block: t.DType.BlockLen(), InBlock: true}
		}
		s.Tensors = append(s.Tensors, sum)
	}
	return s
}

func quantSummary(t *tensors.Tensor) *QuantSummary {
	return &QuantSummary{
		Block:      t.BlockSize(),
		PerChannel: len(t.Scales.Shape) == 1,
		ScaleDType: t.Scales.DType.String(),
		ScaleBytes: int64(len(t.Scales.Data)),
	}
}

// WriteText prints the summary as aligned plain text.
func (s Summary) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "format:\t%s\nfile size:\t%d bytes\n", s.Format, s.FileBytes)
	if c := s.Config; c != nil {
		fmt.Fprintf(tw, "arch:\t%s (dim %d, hidden %d, layers %d, heads %d/%d, head_dim %d, vocab %d, ctx %d)\n",
			c.Arch, c.Dim, c.HiddenDim, c.Layers, c.Heads, c.KVHeads, c.HeadDim, c.VocabSize, c.MaxSeqLen)
	}
	fmt.Fprintf(tw, "metadata:\t%v\ntokenizer:\t%d bytes\n", s.Metadata, s.TokenizerBytes)
	fmt.Fprintf(tw, "tensors:\t%d (%d parameters, %d bytes)\n\n", len(s.Tensors), s.Params, s.TensorBytes)
	shape := "SHAPE"
	if s.ShapeOrder != "" {
		shape += " (" + s.ShapeOrder + ")"
	}
	fmt.Fprintf(tw, "NAME\tDTYPE\t%s\tBYTES\tQUANTIZATION\n", shape)
	for _, t := range s.Tensors {
		q := "-"
		if t.Quantization != nil {
			q = fmt.Sprintf("block %d, %s scales", t.Quantization.Block, t.Quantization.ScaleDType)
			if t.Quantization.PerChannel {
				q = fmt.Sprintf("per channel, %s scales", t.Quantization.ScaleDType)
			}
			if t.Quantization.InBlock {
				q = fmt.Sprintf("llama.cpp blocks of %d", t.Quantization.Block)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%s\n", t.Name, t.DType, t.Shape, t.Bytes, q)
	}
	for _, d := range slices.Sorted(maps.Keys(s.BytesByDType)) {
		fmt.Fprintf(tw, "total %s:\t%d bytes\n", d, s.BytesByDType[d])
	}
	return tw.Flush()
}
