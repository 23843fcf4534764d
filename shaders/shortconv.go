package shaders

// ShortConvParams is the uniform block of wgsl/shortconv.wgsl
// (fusion.ShortConvOp: LFM2's gated short convolution with its state).
type ShortConvParams struct {
	Channels uint32 `wgsl:"channels"`
	Width    uint32 `wgsl:"width"`   // taps; the state holds Width-1 inputs per channel
	NRows    uint32 `wgsl:"nrows"`   // rows of the input and output buffers (the graph's tokens)
	Row0     uint32 `wgsl:"row0"`    // a batched step's row of this dispatch (0 unbatched)
	PosAt    uint32 `wgsl:"pos_at"`  // 0 unbatched; else the step word of row 0's position
	WT       uint32 `wgsl:"wt"`      // a WeightType of the taps
	BCXF16   uint32 `wgsl:"bcx_f16"` // 1: the [B | C | x] input is an f16 activation
	OutF16   uint32 `wgsl:"out_f16"` // 1: out is an f16 activation
	ST       uint32 `wgsl:"st"`      // a ScaleType of quantized taps' scales
	Block    uint32 `wgsl:"block"`   // taps per scale (0: unquantized)
	NBlocks  uint32 `wgsl:"nblocks"` // scales per row of taps
	Pad0     uint32 `wgsl:"pad0"`
}

func (ShortConvParams) params() {}
