package llama2c

import (
	"fmt"
	"io"

	"github.com/gpurun/gpurun/internal/mmap"
	"github.com/gpurun/gpurun/tensors"
	"github.com/gpurun/gpurun/tensors/model"
)

// Load memory-maps a llama2.c checkpoint and returns its configuration and
// weights. The tensors alias the mapping, which therefore stays open for the
// life of the process (model.Checkpoint has no Close).
func Load(path string) (*model.Checkpoint, error) {
	m, err := mmap.Open(path)
	if err != nil {
		return nil, fmt.Errorf("llama2c: %w", err)
	}
	ck, err := Parse(m.Bytes())
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ck, nil
}

// Parse decodes a whole llama2.c checkpoint held in data. The returned tensors
// alias data, which must stay unchanged while they are in use.
func Parse(data []byte) (*model.Checkpoint, error) {
	h, err := ParseHeader(data)
	if err != nil {
		return nil, err
	}
	want, err := h.FileSize()
	if err != nil {
		return nil, err
	}
	switch have := int64(len(data)); {
	case have < want:
		return nil, fmt.Errorf("%w: %w: truncated: header needs %d bytes, file has %d", ErrFormat, io.ErrUnexpectedEOF, want, have)
	case have > want:
		return nil, fmt.Errorf("%w: %w: header needs %d bytes, file has %d (%d extra)", ErrFormat, ErrTrailingData, want, have, have-want)
	}
	// The size matches, so every count below is bounded by the file size.
	ck := &model.Checkpoint{Config: h.Config()}
	off := int64(HeaderSize)
	for _, a := range h.layout() {
		size := 4 * a.elements()
		count := 1
		if a.perLayer {
			count = h.Layers
		}
		for l := range count {
			if a.name != "" {
				ck.Tensors = append(ck.Tensors, &tensors.Tensor{
					Name:  tensorName(a.name, l),
					DType: tensors.F32,
					Shape: append([]int(nil), a.shape...),
					Data:  data[off : off+size : off+size],
				})
			}
			off += size
		}
	}
	return ck, nil
}

// tensorName maps an array of the llama2.c layout to the names of names.go.
func tensorName(array string, layer int) string {
	switch array {
	case "token_embedding":
		return model.TokenEmbedding
	case "final_norm":
		return model.FinalNorm
	case "classifier":
		return model.LMHead
	}
	suffix := map[string]string{
		"attn_norm": model.AttnNorm,
		"wq":        model.WQ,
		"wk":        model.WK,
		"wv":        model.WV,
		"wo":        model.WO,
		"ffn_norm":  model.FFNNorm,
		"w1":        model.WGate,
		"w2":        model.WDown,
		"w3":        model.WUp,
	}[array]
	return model.Layer(layer, suffix)
}

// Config is the architecture llama2.c's run.c implements for this header.
func (h Header) Config() model.Config {
	return model.Config{
		Arch:        model.ArchLlama,
		VocabSize:   h.VocabSize,
		Dim:         h.Dim,
		HiddenDim:   h.HiddenDim,
		Layers:      h.Layers,
		Heads:       h.Heads,
		KVHeads:     h.KVHeads,
		HeadDim:     h.HeadDim(),
		MaxSeqLen:   h.SeqLen,
		Norm:        model.NormRMS,
		NormEps:     1e-5,
		RopeStyle:   model.RopeInterleaved, // run.c rotates pairs (2i, 2i+1)
		RopeDims:    h.HeadDim(),
		RopeBase:    10000,
		Act:         model.ActSiLU,
		GatedFFN:    true,
		Tied:        h.SharedClassifier,
		Activations: model.PolicyAuto,
		BOS:         1,
		EOS:         2,
		// run.c ends a generation when it samples BOS, which separates
		// the stories llama2.c's models were trained on.
		StopTokens: []int{1},
		AddBOS:     true,
	}
}
