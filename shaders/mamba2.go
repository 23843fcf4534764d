package shaders

// Mamba2Params is the uniform block of wgsl/mamba2conv.wgsl and
// wgsl/mamba2scan.wgsl (fusion.Mamba2Op: Granite 4.0 H's Mamba-2 mixer
// with its state).
type Mamba2Params struct {
	Inner  uint32 `wgsl:"inner"`   // d_inner: z and x widths
	Heads  uint32 `wgsl:"heads"`   // SSM heads (head dim Inner/Heads)
	Groups uint32 `wgsl:"groups"`  // groups of B and C
	DState uint32 `wgsl:"dstate"`  // d_state
	Width  uint32 `wgsl:"width"`   // convolution taps; the state's window holds Width-1 inputs per channel
	NRows  uint32 `wgsl:"nrows"`   // rows of the input, scratch and output buffers (the graph's tokens)
	Row0   uint32 `wgsl:"row0"`    // a batched step's row of this dispatch (0 unbatched)
	PosAt  uint32 `wgsl:"pos_at"`  // 0 unbatched; else the step word of row 0's position
	WT     uint32 `wgsl:"wt"`      // a WeightType (F32, F16, BF16) of the taps
	ZXF16  uint32 `wgsl:"zx_f16"`  // 1: the [z | x | B | C | dt] input is an f16 activation
	OutF16 uint32 `wgsl:"out_f16"` // 0: the scan writes the planner's f32 scratch
	Pad0   uint32 `wgsl:"pad0"`
}

func (Mamba2Params) params() {}
