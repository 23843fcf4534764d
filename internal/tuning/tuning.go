// Package tuning holds the knobs of the GPU backend (internal/backend/compute)
// that only tests turn: a lower weight-binding limit to exercise the split
// of weights into row blocks, and kernel variants the planner would not
// pick on the device at hand (attention kinds, no subgroup operations, no
// f16 arithmetic), so that every kernel runs on the test devices and under
// the validation layer. Being internal, they are not part of the API;
// compute.New runs the zero Options.
package tuning

import "fmt"

// Options tunes the GPU backend (compute.NewWithOptions). The zero value
// is what compute.New runs.
type Options struct {
	// MaxBinding caps the bytes one weight binding covers; 0 means the
	// device's MaxStorageBinding. Tests lower it to exercise the split of
	// weights into row blocks; activations and the cache keep the device
	// limit.
	MaxBinding int64
	// Attention picks the attention kernels (AttentionAuto: split over
	// the sequence for decode, tiled over queries and keys for prefill).
	Attention AttentionKind
	// Subgroups picks the decode kernel's reduction:
	// SubgroupsAuto uses subgroup operations where the device offers them
	// (gpu.Caps.SubgroupSize: Vulkan devices with basic and shuffle
	// subgroup operations, browsers offering WebGPU's subgroups),
	// SubgroupsOff keeps the portable
	// workgroup-memory reduction everywhere.
	Subgroups SubgroupMode
	// F16 picks the arithmetic of the decode kernel where it
	// reduces through subgroups: F16Auto uses f16 arithmetic
	// (matvec_sg_h) for f16 activations (the model's activation policy)
	// and f16, int8 or int4 weights on devices reporting it (gpu.Caps.F16:
	// Vulkan with shaderFloat16 and 16-bit storage), F16Off keeps f32
	// arithmetic everywhere.
	F16 F16Mode
}

// F16Mode selects whether kernels may use f16 arithmetic.
type F16Mode uint8

const (
	F16Auto F16Mode = iota
	F16Off
)

func (m F16Mode) String() string {
	if m == F16Off {
		return "nof16"
	}
	return "f16"
}

// SubgroupMode selects whether kernels use subgroup operations.
type SubgroupMode uint8

const (
	SubgroupsAuto SubgroupMode = iota
	SubgroupsOff
)

func (m SubgroupMode) String() string {
	if m == SubgroupsOff {
		return "nosubgroups"
	}
	return "subgroups"
}

// AttentionKind selects the attention kernels.
type AttentionKind uint8

const (
	// AttentionAuto runs prefill graphs (more than compute's
	// attnSplitTokens tokens) tiled (attn_tiled: each key and value chunk staged once for
	// a tile of query rows) and splits decode graphs over the sequence
	// (attn_split + attn_combine: a decode step has one query row per
	// head, too few workgroups to fill a GPU unless the sequence is split
	// across them, flash-decoding), on every device.
	AttentionAuto AttentionKind = iota
	// AttentionPerHead runs one workgroup per (head, token) over the whole
	// visible sequence (attention / attention_f16).
	AttentionPerHead
	// AttentionSplit always splits over the sequence: attn_split per
	// (kv head, head batch, chunk, token), then attn_combine.
	AttentionSplit
	// AttentionTiled runs attn_tiled for every graph: one workgroup per
	// (kv head, tile of attnQueryRows (token, head) rows), each key and
	// value chunk staged once for the whole tile, online softmax.
	AttentionTiled
)

func (k AttentionKind) String() string {
	switch k {
	case AttentionAuto:
		return "auto"
	case AttentionPerHead:
		return "perhead"
	case AttentionSplit:
		return "split"
	case AttentionTiled:
		return "tiled"
	}
	return fmt.Sprintf("AttentionKind(%d)", uint8(k))
}
