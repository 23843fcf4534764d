package shaders

// DeltaParams is the uniform block of wgsl/deltaconv.wgsl and
// wgsl/deltanet.wgsl (fusion.DeltaNetOp: delta_conv, then delta_rule or
// delta_chunk).
type DeltaParams struct {
	KeyHeads   uint32  `wgsl:"key_heads"`
	ValueHeads uint32  `wgsl:"value_heads"`
	HeadDim    uint32  `wgsl:"head_dim"` // D, at most DeltaMaxHeadDim
	Width      uint32  `wgsl:"width"`    // convolution taps
	NRows      uint32  `wgsl:"nrows"`    // rows of the buffers
	Eps        float32 `wgsl:"eps"`      // the L2 norms' floor
	QKVF16     uint32  `wgsl:"qkv_f16"`  // 1: qkv is an f16 activation: packed binary16 pairs
	BetaF16    uint32  `wgsl:"beta_f16"`
	AlphaF16   uint32  `wgsl:"alpha_f16"`
	OutF16     uint32  `wgsl:"out_f16"`
	Row0       uint32  `wgsl:"row0"`   // a batched step's row of this dispatch (0 unbatched)
	PosAt      uint32  `wgsl:"pos_at"` // 0 unbatched; else the step word of row 0's position
	WT         uint32  `wgsl:"wt"`     // a WeightType of the taps (f32, f16, bf16)
	Pad0       uint32  `wgsl:"pad0"`
	Pad1       uint32  `wgsl:"pad1"`
	Pad2       uint32  `wgsl:"pad2"`
}

func (DeltaParams) params() {}

// DeltaMaxHeadDim is the largest head dim of the delta kernels (64
// invocations of 4 columns); DeltaChunk the rows per chunk of delta_chunk.
const (
	DeltaMaxHeadDim = 256
	DeltaChunk      = 32
)

// DeltaScratch is the f32 values of the xs binding of the delta kernels
// for rows rows of a layer: the convolved rows, then delta_chunk's
// per-head scratch.
func DeltaScratch(rows, keyHeads, valueHeads, headDim int) int {
	return rows*(2*keyHeads+valueHeads)*headDim + valueHeads*3*DeltaChunk*headDim
}
